"""Portable warm caches: a file that starts a new job warm on another machine (or in another cache dir).

A file is one header line, one JSON line, then the payload:

    BRINGUP-CACHE-ARTIFACT v1\\n
    {"kind": "mega-cache" | "aot-function", "torch": "2.13.0+cpu", "device_type": "cpu",
     "backend": "inductor", "mode": "compile", "model": "qwen3-tiny", "dtype": "fp32", "batch": 4,
     "seq": 256, "nproc": 1, "overrides": [], "bytes": N, "made": "<UTC time>"}\\n
    <payload>

mega-cache: `torch.compiler.save_cache_artifacts()` after a run (PGO, AOTAutograd, FX graph and
autotuning caches in one blob), loaded with `torch.compiler.load_cache_artifacts()` before anything
compiles. aot-function: `torch.compile(fn, fullgraph=True).aot_compile(...)` saved with
`save_compiled_function`, loaded with `torch.compiler.load_compiled_function`.

A file made with another torch version, device type or compile backend, or for other graphs (model,
shapes, dtype, mode, ranks), would be ignored by torch's caches and the job would start cold without a
word: `check` refuses it with one line naming the difference (BadInput: exit 2).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.errors import BadInput

MAGIC = b"BRINGUP-CACHE-ARTIFACT v1\n"
KIND_MEGA, KIND_AOT = "mega-cache", "aot-function"
# What the file's graphs were made for: a difference in any of these means torch's caches would miss.
STACK_KEYS = ("torch", "device_type", "backend")
GRAPH_KEYS = ("mode", "model", "overrides", "dtype", "batch", "seq", "nproc")


@dataclass(frozen=True)
class Artifact:
    header: dict[str, Any]
    payload: bytes


def header_for(spec: Any, device_type: str, kind: str) -> dict[str, Any]:
    import torch

    return {"kind": kind, "torch": torch.__version__, "device_type": device_type, "backend": spec.backend,
            "mode": spec.mode, "model": spec.model, "overrides": list(spec.overrides), "dtype": spec.dtype,
            "batch": spec.batch, "seq": spec.seq, "nproc": spec.nproc}  # fmt: skip


def encode(header: dict[str, Any], payload: bytes) -> bytes:
    h = {**header, "bytes": len(payload), "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return MAGIC + json.dumps(h, sort_keys=True).encode() + b"\n" + payload


def write(path: Path, header: dict[str, Any], payload: bytes) -> None:
    from bringup.files import atomic_write_bytes

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, encode(header, payload))


def read(path: str | Path) -> Artifact:
    """The file's header and payload; BadInput (one line) for a missing, unreadable or foreign file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise BadInput(f"cache artifact {path}: cannot read it: {e.strerror or e}") from None
    if not data.startswith(MAGIC):
        raise BadInput(f"cache artifact {path}: not a bringup cache artifact (no '{MAGIC.decode().strip()}' "
                       "header); make one with `bringup train --save-cache-artifact PATH`")  # fmt: skip
    line, sep, payload = data[len(MAGIC) :].partition(b"\n")
    try:
        header = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        header = None
    if not sep or not isinstance(header, dict) or header.get("kind") not in (KIND_MEGA, KIND_AOT):
        raise BadInput(f"cache artifact {path}: damaged header")
    if header.get("bytes") != len(payload):
        raise BadInput(f"cache artifact {path}: truncated ({len(payload)} of {header.get('bytes')} payload bytes)")
    return Artifact(header, payload)


def mismatch(header: dict[str, Any], want: dict[str, Any]) -> str:
    """'' when the file fits this run, else what differs (the file's value -> this run's)."""
    diffs = [f"{k} {header.get(k)!r} (this run: {want.get(k)!r})" for k in STACK_KEYS + GRAPH_KEYS
             if _norm(header.get(k)) != _norm(want.get(k))]  # fmt: skip
    return ", ".join(diffs)


def _norm(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def check(path: str | Path, spec: Any, device_type: str) -> dict[str, Any]:
    """Read the file and refuse it (BadInput, one line) when it was made for another stack or graphs.
    Returns its header."""
    art = read(path)
    want = header_for(spec, device_type, art.header["kind"])
    if diff := mismatch(art.header, want):
        raise BadInput(f"cache artifact {path} does not fit this run: {diff}; torch's caches would miss and the "
                       "job would start cold: make one on this stack with --save-cache-artifact")  # fmt: skip
    return art.header


# ---- the payloads (in the worker) ---------------------------------------------------------------
def mega_cache_bytes() -> bytes | None:
    """Everything this process compiled, as torch's mega-cache blob (None: nothing was cached)."""
    import torch

    got = torch.compiler.save_cache_artifacts()
    return got[0] if got else None


def load_mega_cache(payload: bytes) -> dict[str, int]:
    """Hot-load a mega-cache blob into the (empty) cache dirs: {cache layer: entries loaded}."""
    import torch

    info = torch.compiler.load_cache_artifacts(payload)
    arts = getattr(info, "artifacts", {}) if info is not None else {}
    return {str(k): len(v) for k, v in arts.items()}
