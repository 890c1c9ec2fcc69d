"""Portable warm caches: a file that starts a new job warm on another machine (or in another cache dir).

A file is one header line, one JSON line, then the payload and the kernel section:

    BRINGUP-CACHE-ARTIFACT v2\\n
    {"kind": "mega-cache" | "aot-function", "torch": "2.13.0+cpu", "device_type": "cpu",
     "backend": "inductor", "mode": "compile", "model": "qwen3-tiny", "dtype": "fp32", "batch": 4,
     "seq": 256, "nproc": 1, "overrides": [], "bytes": N, "made": "<UTC time>",
     "sources": {module: sha256} (aot-function only: the modules it traced),
     "kernels": null | {"bytes": K, "sha256": ..., "kernels": n, "headers": h, "machine": "x86_64",
                        "cpu_capability": "AVX512", "compiler": "gcc version 12.2.0 ...", "compiler_sha256": ...,
                        "vec_isa": "avx512 avx512_vnni"}}\\n
    <payload: N bytes><kernel section: K bytes>

mega-cache: `torch.compiler.save_cache_artifacts()` after a run (PGO, AOTAutograd, FX graph and
autotuning caches in one blob), loaded with `torch.compiler.load_cache_artifacts()` before anything
compiles. aot-function: `torch.compile(fn, fullgraph=True).aot_compile(...)` saved with
`save_compiled_function`, loaded with `torch.compiler.load_compiled_function`.

The kernel section (a gzip tar, `tarfile`): what the mega-cache does not hold and a cpu job would
otherwise build again in its cache-hit path (torch 2.13): inductor's compiled C++ kernels (`*.so`,
`*.o` under the inductor cache dir, named by a hash of their source and compile command line, not of
the directory, so they are found at the same relative place in another cache dir) and its precompiled
headers (`*.h` + `*.h.gch` under `codecache._HEADER_DIR`, named by a hash of the header, its command
line and the compiler version; gcc uses a .gch from another directory: checked, a new job that got
only the headers built its kernels without building the header again). Unpacked into the new job's
empty dirs before anything compiles. The kernels depend on the machine, the C++ compiler and the
vector ISA (ATen's cpu capability): a file made with others is refused with one line (with another ISA
or compiler inductor's hashes would differ, or the .so would not run, and the job would start cold
without a word).

A file made with another torch version, device type or compile backend, or for other graphs (model,
shapes, dtype, mode, ranks), would be ignored by torch's caches and the job would start cold without a
word: `check` refuses it with one line naming the difference (BadInput: exit 2). So is a file of the
older layout (v1: no kernel section) and a damaged kernel section (its sha256).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import inspect
import io
import json
import platform
import tarfile
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bringup.errors import BadInput
from bringup.files import atomic_write_bytes

MAGIC = b"BRINGUP-CACHE-ARTIFACT v2\n"
OLD_MAGICS = (b"BRINGUP-CACHE-ARTIFACT v1\n",)
KIND_MEGA, KIND_AOT = "mega-cache", "aot-function"
# What the file's graphs were made for: a difference in any of these means torch's caches would miss.
STACK_KEYS = ("torch", "device_type", "backend")
GRAPH_KEYS = ("mode", "model", "overrides", "dtype", "batch", "seq", "nproc", "dynamic", "seqs")
# A graph key a file may lack (made before the key existed) means its default.
GRAPH_DEFAULTS: dict[str, Any] = {"dynamic": "auto", "seqs": []}
# What compiled kernels depend on: a difference means they would be built again (or not load).
KERNEL_KEYS = ("machine", "cpu_capability", "compiler_sha256")
KERNEL_SUFFIXES = (".so", ".o")  # inductor's compiled C++ kernels (cpu), named by content hash
HEADER_SUFFIXES = (".h", ".gch")  # inductor's precompiled headers and the one-line header each compiles


@dataclass(frozen=True)
class Artifact:
    header: dict[str, Any]
    payload: bytes
    kernels: bytes = b""


def header_for(spec: Any, device_type: str, kind: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "torch": torch.__version__,
        "device_type": device_type,
        "backend": spec.backend,
        "mode": spec.mode,
        "model": spec.model,
        "overrides": list(spec.overrides),
        "dtype": spec.dtype,
        "batch": spec.batch,
        "seq": spec.seq,
        "nproc": spec.nproc,
        "dynamic": spec.dynamic,
        "seqs": list(spec.seqs),
    }


def encode(
    header: dict[str, Any], payload: bytes, kernels: bytes = b"", kernel_info: dict[str, Any] | None = None
) -> bytes:
    """The file's bytes. `kernels` (a kernel section from `pack_kernels`) goes with `kernel_info`, the
    stack it was built on (`kernel_stack()` plus its counts)."""
    ks = None
    if kernels:
        ks = {**(kernel_info or {}), "bytes": len(kernels), "sha256": hashlib.sha256(kernels).hexdigest()}
    h = {**header, "bytes": len(payload), "kernels": ks, "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return MAGIC + json.dumps(h, sort_keys=True).encode() + b"\n" + payload + kernels


def write(
    path: Path, header: dict[str, Any], payload: bytes, kernels: bytes = b"", kernel_info: dict[str, Any] | None = None
) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, encode(header, payload, kernels, kernel_info))


def read(path: str | Path) -> Artifact:
    """The file's header, payload and kernel section; BadInput (one line) for a missing, unreadable,
    foreign, old-format, truncated or damaged file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise BadInput(f"cache artifact {path}: cannot read it: {e.strerror or e}") from None
    if old := next((m for m in OLD_MAGICS if data.startswith(m)), None):
        raise BadInput(
            f"cache artifact {path}: file format {old.decode().split()[-1]} (an older bringup: it carries "
            f"no compiled kernels); this bringup reads {MAGIC.decode().split()[-1]}: make a new one with "
            "--save-cache-artifact"
        )
    if not data.startswith(MAGIC):
        raise BadInput(
            f"cache artifact {path}: not a bringup cache artifact (no '{MAGIC.decode().strip()}' "
            "header); make one with `bringup train --save-cache-artifact PATH`"
        )
    line, sep, body = data[len(MAGIC) :].partition(b"\n")
    try:
        header = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        header = None
    if not sep or not isinstance(header, dict) or header.get("kind") not in (KIND_MEGA, KIND_AOT):
        raise BadInput(f"cache artifact {path}: damaged header")
    ks = header.get("kernels")
    if ks is not None and not (isinstance(ks, dict) and isinstance(ks.get("bytes"), int)):
        raise BadInput(f"cache artifact {path}: damaged header (kernel section)")
    n, k = header.get("bytes"), (ks or {}).get("bytes", 0)
    if not isinstance(n, int) or n + k != len(body):
        raise BadInput(f"cache artifact {path}: truncated ({len(body)} of {n} + {k} payload and kernel bytes)")
    payload, kernels = body[:n], body[n:]
    if kernels and hashlib.sha256(kernels).hexdigest() != (ks or {}).get("sha256"):
        raise BadInput(
            f"cache artifact {path}: damaged kernel section (its sha256 differs from the header's): "
            "make a new one with --save-cache-artifact"
        )
    return Artifact(header, payload, kernels)


def mismatch(header: dict[str, Any], want: dict[str, Any]) -> str:
    """'' when the file fits this run, else what differs (the file's value -> this run's)."""
    have = {k: header.get(k, GRAPH_DEFAULTS.get(k)) for k in STACK_KEYS + GRAPH_KEYS}
    diffs = [
        f"{k} {have[k]!r} (this run: {want.get(k)!r})"
        for k in STACK_KEYS + GRAPH_KEYS
        if _norm(have[k]) != _norm(want.get(k))
    ]
    return ", ".join(diffs)


def kernel_mismatch(kernels: dict[str, Any] | None, here: dict[str, Any]) -> str:
    """'' when the file's compiled kernels fit this machine (or it has none), else what differs."""
    if not kernels:
        return ""
    diffs = []
    for k in KERNEL_KEYS:
        if kernels.get(k) != here.get(k):
            name = k.removesuffix("_sha256")  # the compiler is compared by its full `-v` output, named by its version
            diffs.append(f"{name} {kernels.get(name)!r} (this machine: {here.get(name)!r})")
    return ", ".join(diffs)


def source_mismatch(sources: dict[str, str] | None) -> str:
    """'' when every module an AOT-compiled function traced has the source it was traced from (sha256),
    else which changed. An AOT function keeps no guard on code (train/modes.py: portable_guards), so a
    changed model file would silently run the code it was compiled from; a mega-cache needs no such check
    (dynamo traces again and its graphs are looked up by what it traced)."""
    diffs = []
    for name, digest in sorted((sources or {}).items()):
        try:
            now = hashlib.sha256(inspect.getsource(importlib.import_module(name)).encode()).hexdigest()
        except Exception as e:  # gone, or no source to read: it cannot be the code that was compiled
            diffs.append(f"{name} ({type(e).__name__})")
            continue
        if now != digest:
            diffs.append(f"{name} (source sha256 {digest[:12]}, now {now[:12]})")
    return ", ".join(diffs)


def _norm(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def check(path: str | Path, spec: Any, device_type: str) -> dict[str, Any]:
    """Read the file and refuse it (BadInput, one line) when it was made for another stack or graphs, or
    its compiled kernels for another machine or compiler. Returns its header."""
    return fits_code(fits_stack(read(path), path, spec, device_type), path).header


def fits_stack(art: Artifact, path: str | Path, spec: Any, device_type: str) -> Artifact:
    """The instant part of `check`, on a file already read: the stack and graphs it was made for, and its
    kernels' machine and compiler."""
    want = header_for(spec, device_type, art.header["kind"])
    if diff := mismatch(art.header, want):
        raise BadInput(
            f"cache artifact {path} does not fit this run: {diff}; torch's caches would miss and the "
            "job would start cold: make one on this stack with --save-cache-artifact"
        )
    if diff := kernel_mismatch(art.header.get("kernels"), kernel_stack() if art.header.get("kernels") else {}):
        raise BadInput(
            f"cache artifact {path}: its compiled kernels were built on another machine or compiler: "
            f"{diff}; they would be built again (or not load) and the job would start cold: make one "
            "on this machine with --save-cache-artifact"
        )
    return art


def fits_code(art: Artifact, path: str | Path) -> Artifact:
    """The slow part of `check` (an AOT function's: it imports the modules it traced): their source."""
    if diff := source_mismatch(art.header.get("sources")):
        raise BadInput(
            f"cache artifact {path}: the model code it compiled has changed since: {diff}; the "
            "AOT-compiled function would run the old code: make a new one with "
            "--save-cache-artifact"
        )
    return art


# ---- the compiled kernels (the kernel section) ----------------------------------------------------
def kernel_stack() -> dict[str, Any]:
    """What compiled C++ kernels depend on, cheap to ask (no compile): the machine, ATen's cpu capability
    (the vector ISA class) and the C++ compiler inductor calls (its `-v` output)."""
    try:
        from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler  # lazy: optional

        compiler = get_compiler_version_info(get_cpp_compiler())
    except Exception as e:  # no compiler (or a torch without these helpers): nothing to compare it with
        compiler = f"unavailable ({type(e).__name__})"
    version = next((x for x in compiler.split("_") if " version " in x), compiler[-120:])
    return {
        "machine": platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "compiler": version.strip(),
        "compiler_sha256": hashlib.sha256(compiler.encode()).hexdigest(),
    }


def kernel_dirs() -> dict[str, Path]:
    """Where this process's inductor looks for compiled kernels and precompiled headers (no "headers" on a
    torch whose inductor keeps none: `codecache._HEADER_DIR` is torch >= 2.8)."""
    from torch._inductor import codecache  # lazy: private torch API, loaded only when used
    from torch._inductor.runtime.cache_dir_utils import cache_dir  # lazy: private torch API, loaded only when used

    dirs = {"inductor": Path(cache_dir())}
    header_dir = getattr(codecache, "_HEADER_DIR", None)
    if header_dir:
        dirs["headers"] = Path(header_dir)
    return dirs


def kernel_files(root: Path | None = None) -> set[str]:
    """The compiled kernels under the inductor cache dir (relative paths)."""
    root = root or kernel_dirs()["inductor"]
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.suffix in KERNEL_SUFFIXES}


def pack_kernels() -> tuple[bytes, dict[str, Any]]:
    """This process's compiled kernels and precompiled headers as a gzip tar (b"" when none), and what
    they were built on with their counts."""
    dirs = kernel_dirs()
    names = {"inductor": sorted(kernel_files(dirs["inductor"]))}
    if "headers" in dirs:
        hd = dirs["headers"]
        keep = [p for p in hd.glob("**/*") if p.is_file() and p.suffix in HEADER_SUFFIXES and "locks" not in p.parts]
        names["headers"] = sorted(str(p.relative_to(hd)) for p in keep)
    if not names["inductor"]:
        return b"", {}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tf:  # level 1: 150 MB of headers in ~1 s
        for top, rels in names.items():
            for rel in rels:
                tf.add(dirs[top] / rel, arcname=f"{top}/{rel}", recursive=False)
    info = {
        **kernel_stack(),
        "kernels": len(names["inductor"]),
        "vec_isa": picked_vec_isa(),
        "headers": sum(1 for r in names.get("headers", ()) if r.endswith(".gch")),
    }
    return buf.getvalue(), info


def picked_vec_isa() -> str:
    """The vector ISA inductor picked (and proved, by building and loading test programs) in this process:
    the compile flags of every cpu kernel it built ('' when it has none)."""
    from torch._inductor import cpu_vec_isa  # lazy: private torch API, loaded only when used

    return str(cpu_vec_isa.pick_vec_isa())


def adopt_vec_isa(name: str) -> bool:
    """Take the vector ISA the kernels were built with instead of proving it again. Inductor's first cpu
    kernel (compiled or loaded) in a process picks the ISA by building and `dlopen`ing a test program per
    candidate in a child process each (6 here, ~0.15 s each with the probes' builds cached, ~10 s without):
    the artifact's maker already proved its pick on a machine with this one's cpu capability and compiler
    (`fits_stack` checked both). Only the candidates' base proofs are skipped (3 of the 6 here): the sub-feature
    probes (avx512 bf16, VNNI) run whatever the switch says, and they set compile flags. The candidates
    are listed once with the proof switched off
    (`config.cpp.vec_isa_ok = True`, which `valid_vec_isa_list` caches), and the switch is put back at
    once: inductor's config is part of its FX graph cache key, so leaving it on made every graph of the
    mega-cache miss (measured). Kept only when the pick from that list is the maker's (else the kernels'
    flags would differ), otherwise the list is dropped and inductor proves its own. True when adopted."""
    from torch._inductor import config, cpu_vec_isa  # lazy: private torch API, loaded only when used

    if not name or config.cpp.vec_isa_ok is not None:  # none recorded, or the user decided already
        return False
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    with config.patch({"cpp.vec_isa_ok": True}):
        adopted = str(cpu_vec_isa.pick_vec_isa()) == name
    if not adopted:
        cpu_vec_isa.valid_vec_isa_list.cache_clear()
    return adopted


def unpack_kernels(
    section: bytes, where: str = "cache artifact", dirs: dict[str, Path] | None = None
) -> dict[str, int]:
    """Unpack a kernel section into this process's (empty) inductor and header dirs, where inductor looks
    before it builds anything: {"kernels": n, "headers": h}. A section that is not a gzip tar of those two
    dirs is refused with one line (BadInput). Inflated in one call and copied out in 8 MiB pieces: the
    ~150 MB precompiled header streamed through `GzipFile` in 16 KiB reads took 1.0-1.2 s here, this
    0.7-0.9 s, and nearly all of it outside the GIL (zlib and the writes let go of it), which is what
    `unpack_kernels_meanwhile` relies on."""
    dirs = kernel_dirs() if dirs is None else dirs
    got = {"kernels": 0, "headers": 0}
    try:
        raw = gzip.decompress(section)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:", copybufsize=8 << 20) as tf:  # type: ignore[call-overload]  # copybufsize: TarFile's, not in the stub
            members = tf.getmembers()
            for m in members:
                top, _, rel = m.name.partition("/")
                if top not in dirs or not rel or not m.isfile() or rel.startswith("/") or ".." in rel.split("/"):
                    raise BadInput(f"{where}: damaged kernel section (unexpected entry {m.name!r})")
            # the "data" filter (Python >= 3.10.12 / 3.11.4) on top of the check above, where there is one
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            for m in members:
                top, _, rel = m.name.partition("/")
                m.name = rel
                tf.extract(m, dirs[top], **safe)
                if top == "inductor" and rel.endswith(KERNEL_SUFFIXES):
                    got["kernels"] += 1
                elif rel.endswith(".gch"):
                    got["headers"] += 1
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        why = (str(e).splitlines() or [""])[0]
        raise BadInput(f"{where}: damaged kernel section ({type(e).__name__}: {why})") from None
    return got


def unpack_kernels_meanwhile(section: bytes, where: str = "cache artifact") -> Future[dict[str, int]]:
    """`unpack_kernels` in a thread of its own, for the job to go on meanwhile with what holds no kernel:
    checking the file (an AOT function's source check imports the model's modules: ~1.5-3 s here) and
    loading the mega-cache's entries. `.result()` before anything compiles or loads a kernel. Measured
    here (2 cores): source check then unpack 2.0-2.9 s, the two side by side 1.6-2.2 s. The dirs are
    looked up here (that imports inductor's codecache): the thread imports nothing."""
    dirs = kernel_dirs()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bringup-unpack")
    try:
        return pool.submit(unpack_kernels, section, where, dirs)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task


# ---- the payloads (in the worker) ---------------------------------------------------------------
def mega_cache_bytes() -> bytes | None:
    """Everything this process compiled, as torch's mega-cache blob (None: nothing was cached)."""
    got = torch.compiler.save_cache_artifacts()
    return got[0] if got else None


def load_mega_cache(payload: bytes) -> dict[str, int]:
    """Hot-load a mega-cache blob into the (empty) cache dirs: {cache layer: entries loaded}."""
    info = torch.compiler.load_cache_artifacts(payload)
    arts = getattr(info, "artifacts", {}) if info is not None else {}
    return {str(k): len(v) for k, v in arts.items()}
