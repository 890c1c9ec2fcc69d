"""The wheel holds the package and nothing else, and a non-editable install of it works.

The wheel is built from a copy of the source tree that carries what a user's checkout gathers next to
the package (run results with inductor caches, another folder whose name starts with "bringup", byte
code): `packages.find` with `include = ["bringup*"]` packed all of them. The install goes into a
throwaway venv that sees this environment's site-packages (torch is not downloaded again) but not the
source tree, so the installed copy must find its own templates and C++ sources.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREE_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "bringup-results",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".testdev-build",
)
PACKAGE_DATA = (
    "bringup/testdev/csrc/runtime.cpp",
    "bringup/testdev/csrc/kernels.cpp",
    "bringup/testdev/csrc/testdev.h",
    "bringup/report/templates/report.css",
    "bringup/report/templates/report.js",
    "bringup/zoo/dynamo_suites.yaml",  # the dynamo suites' model lists (zoo --source dynamo:...)
)


def _polluted_tree(dst: Path) -> Path:
    src = dst / "src"
    shutil.copytree(ROOT, src, ignore=TREE_IGNORE)
    run = src / "bringup-results" / "20260101-000000-abcdef"
    (run / "inductor" / "ab").mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    (run / "inductor" / "ab" / "kernel.py").write_text("x = 1\n")
    (src / "bringup-results" / "bringup.db").write_bytes(b"SQLite format 3\0")
    (src / "bringup_scratch").mkdir()
    (src / "bringup_scratch" / "__init__.py").write_text("")
    (src / "bringup" / "__pycache__").mkdir(exist_ok=True)
    (src / "bringup" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    return src


def _build_wheel(src: Path, out: Path) -> Path:
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    (wheel,) = out.glob("bringup-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    return _build_wheel(_polluted_tree(tmp), tmp / "dist")


def wheel_problems(names: list[str]) -> list[str]:
    """What is wrong with a wheel's file list (empty when it holds exactly the package)."""
    problems = []
    for n in names:
        top = n.split("/", 1)[0]
        if top != "bringup" and not (top.startswith("bringup-") and top.endswith(".dist-info")):
            problems.append(f"outside the package: {n}")
        elif "__pycache__" in n or n.endswith(".pyc"):
            problems.append(f"byte code: {n}")
    expected_py = {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "bringup").rglob("*.py") if "__pycache__" not in p.parts
    }
    for n in sorted((expected_py | set(PACKAGE_DATA)) - set(names)):
        problems.append(f"missing: {n}")
    return problems


def test_wheel_holds_the_package_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert wheel_problems(names) == []
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [ln for ln in zipfile.ZipFile(wheel).read(meta).decode().splitlines() if ln.startswith("Requires-Dist:")]
    # timm (which pulls torchvision, pinned to one torch release) only as the extra, never by default
    assert [r for r in requires if "timm" in r] == ['Requires-Dist: timm>=1.0; extra == "timm"']
    assert not [r for r in requires if "torchvision" in r]


def test_wheel_check_has_power(tmp_path: Path) -> None:
    """The file-list check fails on what the old `include = ["bringup*"]` packed, and on a lost template."""
    good = [
        n.relative_to(ROOT).as_posix()
        for n in (ROOT / "bringup").rglob("*")
        if n.is_file() and "__pycache__" not in n.parts
    ]
    assert wheel_problems(good + ["bringup-0.1.0.dist-info/METADATA"]) == []
    old = [*good, "bringup-results/20260101-000000-abcdef/summary.json", "bringup_scratch/__init__.py"]
    assert len(wheel_problems(old)) == 2
    assert wheel_problems([n for n in good if not n.endswith("report.css")]) == [
        "missing: bringup/report/templates/report.css"
    ]
    assert wheel_problems([*good, "bringup/__pycache__/cli.cpython-311.pyc"]) == [
        "byte code: bringup/__pycache__/cli.cpython-311.pyc"
    ]


def _venv_with_this_site(root: Path) -> Path:
    """A venv that imports this environment's packages (torch, ...) after its own, and not the tree."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    out = subprocess.run([str(root / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    purelib = Path(out.stdout.strip())
    # a path line only: the .pth files over there (this checkout's editable install) are not processed
    (purelib / "outer-site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root


def _installed(tmp_path: Path, wheel: Path) -> tuple[Path, dict[str, str]]:
    venv = _venv_with_this_site(tmp_path / "venv")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["BRINGUP_DB"] = str(tmp_path / "bringup.db")
    return venv, env


def _bringup(venv: Path, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "bringup"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def test_installed_wheel_runs_devices_report_and_testdev(tmp_path: Path, wheel: Path) -> None:
    from bringup.testdev.build import build_key

    venv, env = _installed(tmp_path, wheel)
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import bringup, torch; print(bringup.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert where.returncode == 0, where.stderr[-3000:]
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the installed copy, not the tree

    p = _bringup(venv, env, tmp_path, "devices", "--no-calibrate")
    assert p.returncode == 0 and "auto" in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]

    p = _bringup(venv, env, tmp_path, "--device", "cpu", "selftest", "--plan", "ok")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    p = _bringup(venv, env, tmp_path, "report", "--out", "r.html")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    html = (tmp_path / "r.html").read_text()
    css = (ROOT / "bringup" / "report" / "templates" / "report.css").read_text()
    assert css.strip().splitlines()[0] in html and "selftest" in html  # the packaged template, inlined

    # The test device from the installed sources: its build key hashes the C++ files it finds next to
    # the installed module, so the key equals this tree's only if all of them were found, unchanged.
    key = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from bringup.testdev.build import build_key, CSRC; print(build_key()); print(CSRC)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert key.returncode == 0, key.stderr[-3000:]
    got_key, csrc = key.stdout.split()
    assert Path(csrc).is_relative_to(venv) and got_key == build_key()
    p = _bringup(venv, env, tmp_path, "--import", "bringup.testdev", "--device", "testdev", "devices", "--no-calibrate")
    assert p.returncode == 0 and "testdev" in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]


@pytest.mark.slow
def test_installed_wheel_builds_testdev_from_scratch(tmp_path: Path, wheel: Path) -> None:
    """The C++ build itself (compiler, headers next to the sources) from the installed copy, cold cache."""
    venv, env = _installed(tmp_path, wheel)
    env["BRINGUP_CACHE_DIR"] = str(tmp_path / "cache")
    p = _bringup(venv, env, tmp_path, "--import", "bringup.testdev", "--device", "testdev", "devices", "--no-calibrate")
    assert p.returncode == 0 and "testdev" in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]
    assert list((tmp_path / "cache" / "testdev").glob("*/bringup_testdev_*.so"))
