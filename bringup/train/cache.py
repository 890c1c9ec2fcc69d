"""Cold and warm compile caches.

Every compiled case points all of torch's on-disk compile caches at a directory of its own under the
run directory (`<run dir>/train-cache/<mode>-<key>/`), before anything compiles in its fresh worker:

    TORCHINDUCTOR_CACHE_DIR  -> inductor/  FX graph cache (fxgraph/), AOT autograd cache (aotautograd/),
                                           generated kernels, dynamo's PGO profiles (dynamo/)
    TRITON_CACHE_DIR         -> triton/    compiled Triton kernels (GPU backends)
    TMPDIR, tempfile.tempdir -> tmp/       what inductor keeps under the *default* cache dir whatever
                                           TORCHINDUCTOR_CACHE_DIR says: precompiled C++ headers (cpu
                                           kernels) and the on-disk autotuning caches

cold: the directory is emptied first, so nothing compiled earlier (by any run) is reused; the case
marks it finished when it passes. warm: a rerun, in a new process, on the directory its cold case
left. A warm case whose cold case has not finished (e.g. it ran in parallel, or on another machine)
primes a directory of its own in a child process first (a full cold compile, not timed) and says so.
A device plugin's own compile cache (e.g. Neuron's) is not moved: set its variable in the environment.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.train.spec import CACHE_COLD, TrainSpec

MARKER = "cold-run-passed"


@dataclass(frozen=True)
class CacheDirs:
    root: Path

    def env(self) -> dict[str, str]:
        return {
            "TORCHINDUCTOR_CACHE_DIR": str(self.root / "inductor"),
            "TRITON_CACHE_DIR": str(self.root / "triton"),
            "TMPDIR": str(self.root / "tmp"),
        }

    def activate(self) -> None:
        """Point this process (and every process it starts from now on) at these directories."""
        for v in self.env().values():
            Path(v).mkdir(parents=True, exist_ok=True)
        os.environ.update(self.env())
        tempfile.tempdir = str(self.root / "tmp")

    def wipe(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def mark_passed(self) -> None:
        (self.root / MARKER).touch()

    @property
    def passed(self) -> bool:
        return (self.root / MARKER).exists()

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())


def dirs_for(spec: TrainSpec, run_dir: Path, primed: bool = False) -> CacheDirs:
    name = f"{spec.mode}-{spec.cache_key}" + ("-primed" if primed else "")
    return CacheDirs(Path(run_dir).resolve() / "train-cache" / name)


def prepare(spec: TrainSpec, run_dir: Path) -> tuple[CacheDirs, bool]:
    """Choose and activate the case's cache dirs. Returns (dirs, needs_priming)."""
    dirs = dirs_for(spec, run_dir)
    if spec.cache == CACHE_COLD:
        dirs.wipe()
        dirs.activate()
        return dirs, False
    if dirs.passed:
        dirs.activate()
        return dirs, False
    own = dirs_for(spec, run_dir, primed=True)
    own.wipe()
    own.activate()
    return own, True


def _prime_child(params: dict[str, Any], device_name: str, imports: list[str], err_path: str) -> None:
    import importlib

    from bringup.device import resolve_device
    from bringup.train import loop

    try:
        for m in imports:
            importlib.import_module(m)
        spec = TrainSpec.from_params(params)
        loop.train(spec, resolve_device(device_name), check_fallbacks=False)
    except BaseException as e:
        Path(err_path).write_text(f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        raise SystemExit(1) from None


def prime(spec: TrainSpec, device_name: str, imports: tuple[str, ...], workdir: Path) -> str:
    """Fill the active cache dirs with a cold compile in a child process (one step, not timed).
    Returns "" on success, else the child's first error line."""
    prime_spec = spec.with_(steps=1, warmup=0, cache=CACHE_COLD)
    workdir.mkdir(parents=True, exist_ok=True)
    if spec.nproc > 1:
        from bringup.device import resolve_device
        from bringup.train.distributed import launch

        try:
            launch(prime_spec, resolve_device(device_name), imports, workdir / "prime")
        except Exception as e:
            return f"{type(e).__name__}: {e}".splitlines()[0]
        return ""
    err = workdir / "prime-error.txt"
    err.unlink(missing_ok=True)
    p = multiprocessing.get_context("spawn").Process(
        target=_prime_child, args=(prime_spec.params(), device_name, list(imports), str(err))
    )
    p.start()
    p.join()
    if p.exitcode == 0:
        return ""
    return err.read_text().splitlines()[0] if err.exists() else f"priming process exited with code {p.exitcode}"
