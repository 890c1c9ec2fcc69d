"""Build the testdev C++ extension once and cache it across runs and processes.

The build directory is keyed by a hash of the C++ sources, the torch build and the Python version, so
a stale library can never be loaded; a file lock (fcntl: released by the OS if the holder dies) lets
concurrent processes (test workers, bringup workers) build it exactly once. Later imports load the
shared library directly, without starting ninja.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import sys
import sysconfig
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import cast

import torch

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = ("runtime.cpp", "kernels.cpp", "lazy.cpp")
HEADERS = ("testdev.h", "lazy.h")
_STAMP = "built.ok"


def cache_root() -> Path:
    """$BRINGUP_CACHE_DIR/testdev, else $XDG_CACHE_HOME/bringup/testdev, else ~/.cache/bringup/testdev."""
    env = os.environ.get("BRINGUP_CACHE_DIR")
    if env:
        return Path(env) / "testdev"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "bringup" / "testdev"


def build_key() -> str:
    h = hashlib.sha256()
    for name in (*SOURCES, *HEADERS):
        h.update(name.encode() + b"\0" + (CSRC / name).read_bytes() + b"\0")
    for part in (
        torch.__version__,
        str(torch.version.git_version),
        sys.version,
        platform.machine(),
        os.environ.get("CXX", ""),
        sysconfig.get_config_var("EXT_SUFFIX") or "",
    ):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def _import_library(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


@cache
def load_extension(verbose: bool = False) -> ModuleType:
    """The compiled extension module (built on first use: 47 s on 2 cores, 86 s of CPU; then loaded from the cache)."""
    from filelock import FileLock

    key = build_key()
    name = f"bringup_testdev_{key}"
    build_dir = cache_root() / key
    lib = build_dir / f"{name}.so"
    if (build_dir / _STAMP).is_file() and lib.is_file():
        return _import_library(name, lib)
    build_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_root() / f"{key}.lock")):
        if (build_dir / _STAMP).is_file() and lib.is_file():
            return _import_library(name, lib)
        # torch's own build baton is a plain file: one left by a killed build would block us forever.
        # We hold the real (OS) lock, so any baton here is stale.
        (build_dir / "lock").unlink(missing_ok=True)
        if sys.stderr.isatty():
            print(
                f"bringup.testdev: building the C++ test device (once; cached in {build_dir})...",
                file=sys.stderr,
                flush=True,
            )
        from torch.utils.cpp_extension import load

        try:
            mod = load(
                name=name,
                sources=[str(CSRC / s) for s in SOURCES],
                extra_include_paths=[str(CSRC)],
                extra_cflags=["-O2"],
                build_directory=str(build_dir),
                verbose=verbose,
            )
        except Exception as e:
            lines = str(e).splitlines()
            why = next((ln.strip() for ln in lines if "error:" in ln), lines[-1].strip() if lines else "")
            raise RuntimeError(f"building the testdev C++ extension failed in {build_dir}: {why}") from e
        (build_dir / _STAMP).write_text(f"{name}\n")
        return cast(ModuleType, mod)  # load() returns the built extension module
