"""selftest items that compile through the compile cache, for the kill-mid-compile checks (docs/reliability.md).

`build:S`: what inductor does with a C++ kernel, in miniature and in S seconds: the library's place in the
inductor cache this worker uses (`<cache>/<xx>/<key>.so`, inductor's lock `<cache>/locks/<key>.lock`), built
under that lock only when it does not exist yet, by a compiler that writes its output in place (the file
exists, empty, from the start of the link; its bytes come at the end, S seconds later); then loaded with
dlopen. A worker killed in those S seconds leaves exactly what a killed `g++` leaves.

`inductor`: the real thing, cheaply: a small pointwise function compiled with torch.compile (inductor),
checked against eager.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line

_SOURCE = "int selftest_kernel(void) { return 42; }\n"


def library_path(tag: str) -> tuple[Path, Path]:
    """(the library, its build lock) in the inductor cache dir this process would use."""
    # inductor's own rule for the cache dir
    from torch._inductor.runtime.cache_dir_utils import cache_dir  # lazy: private torch API

    root = Path(cache_dir())
    key = "cselftest" + hashlib.sha256(tag.encode()).hexdigest()[:24]
    return root / key[1:3] / f"{key}.so", root / "locks" / f"{key}.lock"


def _compile(out: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("g++") or shutil.which("clang")
    if cc is None:
        raise NotImplementedError("selftest build: no C compiler on this machine (cc, gcc, g++, clang)")
    src = out.with_suffix(".c")
    src.write_text(_SOURCE)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True)


def build_in_place(path: Path, seconds: float) -> None:
    """A linker's way of writing: the output file created at once under its final name, its bytes after `seconds`."""
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "lib.so"
        _compile(built)
        data = built.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.flush()
        time.sleep(seconds)
        f.write(data)


def build_item(case: Case, seconds: float) -> CaseResult:
    path, lock = library_path(str(case.params.get("tag", "")))
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        built = not path.exists()
        if built:  # inductor's rule: build what does not exist, trust what does
            build_in_place(path, seconds)
    lib = ctypes.CDLL(str(path))  # OSError "...: file too short" on what a killed build left
    got = lib.selftest_kernel()
    if got != 42:
        return CaseResult.for_case(case, Status.FAIL_NUMERIC, f"selftest build: the kernel returned {got}, not 42")
    r = CaseResult.for_case(case, Status.PASS)
    r.fields["library"] = str(path)
    r.fields["built"] = built
    return r


def inductor_item(case: Case, ctx: Any) -> CaseResult:
    torch._dynamo.reset()
    x = torch.linspace(-2.0, 2.0, 67, device=ctx.device.torch_device)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return torch.sin(t) * 2.0 + torch.cos(t * 3.0)

    try:
        got = torch.compile(fn, backend="inductor")(x)
    except Exception as e:
        import traceback  # lazy: optional

        return CaseResult.for_case(case, classify(e, compiling=True), first_line(e), error=traceback.format_exc())
    err = float((got.double() - fn(x.double())).abs().max())
    if err > 1e-4:
        return CaseResult.for_case(case, Status.FAIL_NUMERIC, f"selftest inductor: max error {err:.3g}")
    r = CaseResult.for_case(case, Status.PASS)
    r.metric("max_abs_err", err)
    return r
