"""A tiny plugin package, `bringup-fakeplugin`, written as wheels at several versions (no build tool, no
index: the wheel files are zip archives written here), and the repro scripts the bisect tests run.

The plugin's `scale(x)` is right (x * 1.0) before `fault_from` and 1% off from it on: what a backend's
compile pass that scales an output would do. A version in `broken` declares a dependency no index has (pip
cannot install it: a skip); a version in `flaky` makes the repro alternate its verdict, run by run (a
counter file per version next to the repro).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterable
from pathlib import Path

NAME = "bringup-fakeplugin"
MODULE = "bringup_fakeplugin"

REPRO = """
import os, pathlib, sys, time
import bringup_fakeplugin as p

time.sleep(float(os.environ.get("FAKEPLUGIN_SLEEP", "0")))
err = abs(p.scale(1.0) - 1.0)
print(f"plugin {p.__version__}")
print(f"scale error: {err}")
if p.FLAKY:
    counter = pathlib.Path(__file__).with_name(f".flip-{p.__version__}")
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    sys.exit(n % 2)
sys.exit(1 if err > 1e-6 else 0)
"""


# A case entry (`bringup_fakeplugin:run_case`): what a stored run's case calls, so that a bisection can re-run
# it in each candidate env through that env's bringup.
RUN_CASE = """

def run_case(case, ctx):
    from bringup.case import CaseResult, Status

    err = abs(scale(1.0) - 1.0)
    status = Status.FAIL_NUMERIC if err > 1e-6 else Status.PASS
    r = CaseResult.for_case(case, status, f"plugin {__version__}: scale error {err:.3g}")
    r.metric("max_rel_err", err)
    return r
"""


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(out: Path, version: str, fault: bool, broken: bool = False, flaky: bool = False) -> Path:
    dist = f"{MODULE}-{version}.dist-info"
    scale = "1.01" if fault else "1.0"
    files = {
        f"{MODULE}/__init__.py": (
            f'__version__ = "{version}"\nFLAKY = {flaky}\nSCALE = {scale}\n\n\n'
            "def scale(x: float) -> float:\n    return x * SCALE\n" + RUN_CASE
        ).encode(),
        f"{dist}/METADATA": (
            f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            f"Project-URL: Release notes, https://example.invalid/fakeplugin/{version}\n"
            + ("Requires-Dist: bringup-no-such-dependency>=1\n" if broken else "")
        ).encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests/bisect\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/top_level.txt": f"{MODULE}\n".encode(),
    }
    record = [_record_line(n, d) for n, d in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = out / f"{MODULE}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
    return path


def write_wheels(
    out: Path, versions: Iterable[str], fault_from: str, broken: Iterable[str] = (), flaky: Iterable[str] = ()
) -> list[Path]:
    from packaging.version import Version

    out.mkdir(parents=True, exist_ok=True)
    broken, flaky = set(broken), set(flaky)
    return [write_wheel(out, v, Version(v) >= Version(fault_from), v in broken, v in flaky) for v in versions]


def write_repro(path: Path) -> Path:
    path.write_text(REPRO)
    return path


def versions(n: int) -> list[str]:
    return [f"0.{i}.0" for i in range(1, n + 1)]
