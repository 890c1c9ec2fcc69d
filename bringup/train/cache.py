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
The device family's own persistent compile cache goes there too, where its adapter names one
(`compile_cache_env`: PyTorch/XLA's XLA_PERSISTENT_CACHE_PATH -> xla/, which also serves the lazy
eager graphs). A plugin's cache its adapter does not name (e.g. Neuron's) is not moved: set its
variable in the environment.

artifact: a new job with empty directories (`<mode>-<key>-artifact/`, wiped) that loads a portable
artifact (train/artifact.py: torch's mega-cache, and the compiled C++ kernels and precompiled headers
unpacked where inductor looks) before anything compiles: the user's file (--load-cache-artifact), else the
one its cold case wrote (`artifact.bin` in the cold dir: every passing cold case writes one), else one
made by a priming child in a directory of its own (`-primed-artifact/`), not timed.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.device import resolve_device
from bringup.errors import BadInput
from bringup.train import artifact, loop
from bringup.train.distributed import launch
from bringup.train.spec import CACHE_ARTIFACT, CACHE_COLD, TrainSpec

if TYPE_CHECKING:
    from bringup.device import Device

MARKER = "cold-run-passed"
ARTIFACT = "artifact.bin"
# Where each cache layer keeps its entries under the inductor dir (torch 2.13); the rest is kernels.
LAYER_DIRS = {"fxgraph": "fx_graph", "aotautograd": "aot_autograd", "dynamo": "pgo"}


@dataclass(frozen=True)
class CacheDirs:
    root: Path
    device: Device | None = None  # the Device whose family's own compile cache goes under root too

    def env(self) -> dict[str, str]:
        own = self.device.adapter.compile_cache_env(self.root) if self.device is not None else {}
        return {
            "TORCHINDUCTOR_CACHE_DIR": str(self.root / "inductor"),
            "TRITON_CACHE_DIR": str(self.root / "triton"),
            "TMPDIR": str(self.root / "tmp"),
            **own,
        }

    def activate(self) -> None:
        """Point this process (and every process it starts from now on) at these directories."""
        for v in self.env().values():
            if v.startswith(str(self.root)):
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

    def layer_bytes(self) -> dict[str, int]:
        """Bytes on disk per cache layer: fx_graph, aot_autograd, pgo (dynamo's profiles), kernels (the
        generated code and compiled kernels), triton, tmp (headers, autotuning), artifact (the file)."""
        out = {v: 0 for v in LAYER_DIRS.values()} | {"kernels": 0, "triton": 0, "tmp": 0, "artifact": 0}
        for p in self.root.rglob("*"):
            if not p.is_file():
                continue
            rel = p.relative_to(self.root).parts
            if rel[0] == "inductor" and len(rel) > 1:
                key = LAYER_DIRS.get(rel[1], "kernels")
            else:
                key = {"triton": "triton", "tmp": "tmp", ARTIFACT: "artifact"}.get(rel[0], "kernels")
            out[key] += p.stat().st_size
        return out


def dirs_for(spec: TrainSpec, run_dir: Path, primed: bool = False, device: Device | None = None) -> CacheDirs:
    name = f"{spec.mode}-{spec.cache_key}"
    if spec.cache == CACHE_ARTIFACT:
        name += "-primed-artifact" if primed else "-artifact"
    elif primed:
        name += "-primed"
    return CacheDirs(Path(run_dir).resolve() / "train-cache" / name, device)


def artifact_source(spec: TrainSpec, run_dir: Path) -> Path | None:
    """The artifact an artifact arm loads: the user's file, else its cold case's (None: prime one)."""
    if spec.artifact:
        return Path(spec.artifact)
    cold = dirs_for(spec.with_(cache=CACHE_COLD), run_dir)
    return cold.root / ARTIFACT if cold.passed and (cold.root / ARTIFACT).exists() else None


def saver(spec: TrainSpec, device_type: str, paths: list[Path]) -> tuple[dict[str, Any], Any]:
    """For a cold run that leaves an artifact: (mode_kw for loop.train, finish). finish() writes what this
    process compiled to each path (the AOT-compiled function for aot, torch's mega-cache otherwise) and
    returns the payload's bytes (0: nothing to write)."""
    got: dict[str, Any] = {}
    aot = spec.mode == "aot"
    kw: dict[str, Any] = {"on_compiled": lambda b, src: got.update(fn=b, sources=src)} if aot else {}

    def finish() -> int:
        payload = got.get("fn") if aot else artifact.mega_cache_bytes()
        if not payload:
            return 0
        head = artifact.header_for(spec, device_type, artifact.KIND_AOT if aot else artifact.KIND_MEGA)
        if aot:  # what the function's dropped code guards protected: checked when it is loaded
            head["sources"] = got.get("sources", {})
        try:  # the compiled C++ kernels the mega-cache does not hold
            kernels, info = artifact.pack_kernels()
        except (ImportError, AttributeError):  # an inductor laid out otherwise: graphs only (the load counts
            kernels, info = b"", {}  # the kernels it rebuilds and warns)
        for p in paths:
            artifact.write(p, head, payload, kernels, info)
        return len(payload) + len(kernels)

    return kw, finish


def load(spec: TrainSpec, path: Path, device_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load an artifact into this (fresh) process: (mode_kw for loop.train, what was loaded: kind, seconds,
    entries per cache layer). The mega-cache goes into the active (empty) cache dirs now; an AOT function
    is handed to the aot mode, which loads it when the model is prepared (timed in apply_mode_s)."""
    t = time.perf_counter()  # the job pays for reading and checking the file too
    art = artifact.read(path)
    head = artifact.fits_stack(art, path, spec, device_type).header  # kernels for another machine: not unpacked
    if head["kind"] == artifact.KIND_AOT and spec.mode != "aot":
        raise BadInput(f"cache artifact {path} holds an AOT-compiled function: use it with --modes aot")
    # the compiled kernels unpack beside the source check and the mega-cache's entries, neither of which
    # compiles or loads a kernel; all are in place before this returns (the job's build, mode and steps
    # come after)
    unpacking = artifact.unpack_kernels_meanwhile(art.kernels, f"cache artifact {path}") if art.kernels else None
    try:
        artifact.fits_code(art, path)
        entries = artifact.load_mega_cache(art.payload) if head["kind"] == artifact.KIND_MEGA else None
    except BaseException:
        if unpacking is not None:
            unpacking.exception()  # the thread done writing (whole files) before the case reports
        raise
    supplied = unpacking.result() if unpacking is not None else {}
    isa = (head.get("kernels") or {}).get("vec_isa", "") if art.kernels else ""
    out = {
        "kind": head["kind"],
        "bytes": len(art.payload) + len(art.kernels),
        "kernels_supplied": supplied.get("kernels", 0),
        "headers_supplied": supplied.get("headers", 0),
        "vec_isa": isa,
        "vec_isa_adopted": artifact.adopt_vec_isa(isa),
    }
    if entries is None:
        return {"load": art.payload}, {**out, "load_s": time.perf_counter() - t}
    return {}, {**out, "load_s": time.perf_counter() - t, "entries": entries}


def prepare(spec: TrainSpec, run_dir: Path, device: Device | None = None) -> tuple[CacheDirs, bool]:
    """Choose and activate the case's cache dirs. Returns (dirs, needs_priming). An artifact arm that
    needs priming gets the priming dirs activated: prime() in them, then `fresh(spec, run_dir)`."""
    dirs = dirs_for(spec, run_dir, device=device)
    if spec.cache == CACHE_ARTIFACT:
        if artifact_source(spec, run_dir) is not None:
            return fresh(spec, run_dir, device), False
        own = dirs_for(spec, run_dir, primed=True, device=device)
        own.wipe()
        own.activate()
        return own, True
    if spec.cache == CACHE_COLD:
        dirs.wipe()
        dirs.activate()
        return dirs, False
    if dirs.passed:
        dirs.activate()
        return dirs, False
    own = dirs_for(spec, run_dir, primed=True, device=device)
    own.wipe()
    own.activate()
    return own, True


def fresh(spec: TrainSpec, run_dir: Path, device: Device | None = None) -> CacheDirs:
    """An artifact arm's own empty dirs, activated."""
    dirs = dirs_for(spec, run_dir, device=device)
    dirs.wipe()
    dirs.activate()
    return dirs


def _prime_child(
    params: dict[str, Any], device_name: str, imports: list[str], err_path: str, save_to: str = ""
) -> None:
    try:
        for m in imports:
            importlib.import_module(m)
        spec = TrainSpec.from_params(params)
        device = resolve_device(device_name)
        kw, finish = saver(spec, device.type, [Path(save_to)] if save_to else [])
        loop.train(spec, device, check_fallbacks=False, mode_kw=kw)
        if save_to and not finish():  # e.g. a backend outside inductor's caches: nothing to ship
            raise NotImplementedError(f"backend {spec.backend!r} left nothing in torch's caches to ship as an artifact")
    except BaseException as e:
        inner = getattr(e, "exc", e)  # a StageError: the exception of the stage that failed (its type counts)
        Path(err_path).write_text(f"{type(inner).__name__}: {inner}\n{traceback.format_exc()}")
        raise SystemExit(1) from None


def prime(
    spec: TrainSpec, device_name: str, imports: tuple[str, ...], workdir: Path, save_to: Path | None = None
) -> str:
    """Fill the active cache dirs with a cold compile in a child process (one step, not timed); with
    `save_to`, the child also writes its artifact there. Returns "" on success, else the child's first
    error line."""
    prime_spec = spec.with_(steps=1, warmup=0, cache=CACHE_COLD, artifact="", save_artifact="")
    workdir.mkdir(parents=True, exist_ok=True)
    if spec.nproc > 1:
        try:
            launch(prime_spec, resolve_device(device_name), imports, workdir / "prime")
        except Exception as e:
            return f"{type(e).__name__}: {e}".splitlines()[0]
        return ""
    err = workdir / "prime-error.txt"
    err.unlink(missing_ok=True)
    p = multiprocessing.get_context("spawn").Process(
        target=_prime_child, args=(prime_spec.params(), device_name, list(imports), str(err), str(save_to or ""))
    )
    p.start()
    p.join()
    if p.exitcode == 0:
        return ""
    return err.read_text().splitlines()[0] if err.exists() else f"priming process exited with code {p.exitcode}"
