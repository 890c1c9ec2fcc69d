"""FlexAttention matrices: the default 96 cases, the quick cpu/CI matrix, and YAML/JSON matrix files.

A matrix file is a mapping. Either a grid (every axis a value or a list of values; mods required):

    mods: [causal, alibi, my_pkg.mods:window_512]
    batch: [1, 4]
    seq: [1024, 8192]
    heads: [[16, 16], [16, 2]]      # [q_heads, kv_heads]; also "16/2" or 16 (= 16/16)
    head_dim: 128
    dtype: bf16                     # optional: fp32 | bf16 | fp16
    backward: auto                  # optional: auto | on | off

or explicit cases, with top-level single values as defaults for keys a case leaves out:

    head_dim: 64
    cases:
      - {mod: causal, batch: 4, seq: 8192, heads: [16, 2]}
      - {mod: softcap, batch: 1, seq: 1024, heads: 16}

Anything else (unknown key, wrong type, heads that don't divide, empty lists) is a MatrixError, which
the suite reports as one line and exit code 2.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bringup.flex.mods import BUILTIN_MODS, AttnShape, ModError, display_name, normalize_mod_spec
from bringup.flex.spec import DTYPES  # the precisions a flex case runs in (one list)

BACKWARD = ("auto", "on", "off")
_AXES = ("mods", "batch", "seq", "heads", "head_dim")
_SCALARS = ("dtype", "backward")
_CASE_KEYS = ("mod", "batch", "seq", "heads", "head_dim", "dtype", "backward")


class MatrixError(ValueError):
    pass


@dataclass(frozen=True)
class CaseSpec:
    """One FlexAttention case before the device is known (dtype/backward may still be None = default)."""

    mod: str
    batch: int
    seq: int
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype: str | None = None
    backward: str | None = None  # auto | on | off (None: the command's default)

    @property
    def shape(self) -> AttnShape:
        return AttnShape(self.batch, self.seq, self.q_heads, self.kv_heads, self.head_dim)


@dataclass(frozen=True)
class Matrix:
    name: str
    cases: tuple[CaseSpec, ...]

    def with_mods(self, mods: Sequence[str]) -> Matrix:
        """--mods: these mods at every shape the matrix has (for a grid: its mods axis replaced)."""
        shapes: list[tuple[Any, ...]] = []
        for c in self.cases:
            key = (c.batch, c.seq, c.q_heads, c.kv_heads, c.head_dim, c.dtype, c.backward)
            if key not in shapes:
                shapes.append(key)
        return Matrix(self.name, tuple(CaseSpec(m, *k) for m in dict.fromkeys(mods) for k in shapes))


def grid(
    name: str,
    mods: Sequence[str],
    batch: Sequence[int],
    seq: Sequence[int],
    heads: Sequence[tuple[int, int]],
    head_dim: Sequence[int],
    dtype: str | None = None,
    backward: str | None = None,
) -> Matrix:
    cases = [
        CaseSpec(m, b, s, hq, hkv, d, dtype, backward)
        for m, b, s, (hq, hkv), d in itertools.product(mods, batch, seq, heads, head_dim)
    ]
    return Matrix(name, tuple(cases))


ALL_MODS: tuple[str, ...] = tuple(BUILTIN_MODS)


def default_matrix() -> Matrix:
    """The seeds' matrix: 8 mods x batch {1, 4} x seq {1024, 4096, 8192} x heads {16/16, 16/2}, d 128 = 96."""
    return grid("default", ALL_MODS, (1, 4), (1024, 4096, 8192), ((16, 16), (16, 2)), (128,))


def quick_matrix() -> Matrix:
    """For cpu and CI: every built-in mod once at batch 2, seq 256, 4 q heads over 2 kv heads (GQA),
    head dim 64, fp32; plus causal at batch 1, seq 512, 4/4 heads (no GQA, more blocks). 9 cases,
    each its own compile: ~1-2 min on 2 cpu cores from a cold compile cache, with pooled workers."""
    cases = [CaseSpec(m, 2, 256, 4, 2, 64, "fp32") for m in ALL_MODS]
    cases.append(CaseSpec("causal", 1, 512, 4, 4, 64, "fp32"))
    return Matrix("quick", tuple(cases))


# ---- files -----------------------------------------------------------------------------------------
def load_matrix_file(path: str) -> Matrix:
    p = Path(path)
    where = f"matrix file {path}"
    if not p.is_file():
        raise MatrixError(f"{where}: no such file (use quick, default or a YAML/JSON file)")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise MatrixError(f"{where}: cannot read: {e}") from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        kind = "JSON" if p.suffix.lower() == ".json" else "YAML"
        raise MatrixError(f"{where}: not valid {kind}: {' '.join(str(e).split())[:200]}") from None
    return parse_matrix(data, where)


def parse_matrix(data: Any, where: str = "matrix") -> Matrix:
    if not isinstance(data, dict):
        raise MatrixError(
            f"{where}: expected a mapping with mods/batch/seq/heads/head_dim or cases, got {type(data).__name__}"
        )
    unknown = set(data) - set(_AXES) - set(_SCALARS) - {"cases"}
    if unknown:
        raise MatrixError(
            f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
            f"allowed: {', '.join((*_AXES, *_SCALARS, 'cases'))}"
        )
    name = Path(where.removeprefix("matrix file ")).stem or "file"
    dtype = _dtype(data.get("dtype"), f"{where}: dtype")
    backward = _backward(data.get("backward"), f"{where}: backward")
    if "cases" in data:
        return Matrix(name, tuple(_dedupe(_listed_cases(data, where, dtype, backward))))
    if "mods" not in data:
        raise MatrixError(f"{where}: needs mods (a grid) or cases (a list)")
    return _grid(data, where, name, dtype, backward)


def _listed_cases(data: dict[str, Any], where: str, dtype: str | None, backward: str | None) -> list[CaseSpec]:
    """A file's `cases:` list, each case's missing axes from the top-level single values (the defaults)."""
    raw = data["cases"]
    if not isinstance(raw, list) or not raw:
        raise MatrixError(f"{where}: cases must be a non-empty list of mappings")
    defaults = {k: data[k] for k in _AXES if k in data}
    for k, v in defaults.items():
        if isinstance(v, list) and not (k == "heads" and _is_pair(v)):
            raise MatrixError(f"{where}: with cases, top-level {k} must be a single value (a default)")
    return [_listed_case(c, f"{where}: cases[{i}]", defaults, dtype, backward) for i, c in enumerate(raw)]


def _listed_case(c: Any, cw: str, defaults: dict[str, Any], dtype: str | None, backward: str | None) -> CaseSpec:
    if not isinstance(c, dict):
        raise MatrixError(f"{cw}: expected a mapping, got {type(c).__name__}")
    bad = set(c) - set(_CASE_KEYS)
    if bad:
        raise MatrixError(f"{cw}: unknown key(s) {', '.join(sorted(map(str, bad)))}; allowed: {', '.join(_CASE_KEYS)}")
    merged = {"mod": c.get("mod", defaults.get("mods")), **{k: c.get(k, defaults.get(k)) for k in _AXES[1:]}}
    for k, v in merged.items():
        if v is None:
            raise MatrixError(f"{cw}: missing {k}")
    hq, hkv = _heads(merged["heads"], f"{cw}: heads")
    return CaseSpec(
        _mod(merged["mod"], f"{cw}: mod"),
        _pos(merged["batch"], f"{cw}: batch"),
        _pos(merged["seq"], f"{cw}: seq"),
        hq,
        hkv,
        _pos(merged["head_dim"], f"{cw}: head_dim"),
        _dtype(c.get("dtype"), f"{cw}: dtype") or dtype,
        _backward(c.get("backward"), f"{cw}: backward") or backward,
    )


def _grid(data: dict[str, Any], where: str, name: str, dtype: str | None, backward: str | None) -> Matrix:
    """A file's grid: every mod x batch x seq x heads x head_dim (each a value or a list)."""
    mods = [_mod(m, f"{where}: mods") for m in _as_list(data["mods"], f"{where}: mods")]
    batch = [_pos(v, f"{where}: batch") for v in _as_list(data.get("batch", 1), f"{where}: batch")]
    seq = [_pos(v, f"{where}: seq") for v in _as_list(data.get("seq", 1024), f"{where}: seq")]
    raw_heads = data.get("heads", [[16, 16]])
    heads_list = [raw_heads] if _is_pair(raw_heads) or not isinstance(raw_heads, list) else raw_heads
    if not heads_list:
        raise MatrixError(f"{where}: heads must not be empty")
    heads = [_heads(h, f"{where}: heads") for h in heads_list]
    dims = [_pos(v, f"{where}: head_dim") for v in _as_list(data.get("head_dim", 128), f"{where}: head_dim")]
    return grid(name, _unique(mods), _unique(batch), _unique(seq), _unique(heads), _unique(dims), dtype, backward)


def _unique(xs: list[Any]) -> list[Any]:
    out: list[Any] = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


def _dedupe(cases: list[CaseSpec]) -> list[CaseSpec]:
    return _unique(cases)


def _as_list(v: Any, where: str) -> list[Any]:
    if isinstance(v, list):
        if not v:
            raise MatrixError(f"{where}: must not be an empty list")
        return v
    return [v]


def _is_pair(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def _pos(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise MatrixError(f"{where}: expected a positive integer, got {v!r}")
    return v


def _heads(v: Any, where: str) -> tuple[int, int]:
    if isinstance(v, str) and "/" in v:
        a, _, b = v.partition("/")
        try:
            hq, hkv = int(a), int(b)
        except ValueError:
            raise MatrixError(f"{where}: expected Q/KV like 16/2, got {v!r}") from None
    elif _is_pair(v):
        hq, hkv = v
    elif isinstance(v, int) and not isinstance(v, bool):
        hq = hkv = v
    else:
        raise MatrixError(f"{where}: expected [q_heads, kv_heads], 'Q/KV' or an integer, got {v!r}")
    if hq <= 0 or hkv <= 0:
        raise MatrixError(f"{where}: head counts must be positive, got {hq}/{hkv}")
    if hq % hkv:
        raise MatrixError(f"{where}: q_heads {hq} is not a multiple of kv_heads {hkv}")
    return hq, hkv


def _mod(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise MatrixError(f"{where}: expected a mod name or module:function, got {v!r}")
    try:
        return normalize_mod_spec(v)
    except ModError as e:
        raise MatrixError(f"{where}: {e}") from None


def _dtype(v: Any, where: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or v.strip().lower() not in DTYPES:
        raise MatrixError(f"{where}: expected one of {', '.join(DTYPES)}, got {v!r}")
    return v.strip().lower()


def _backward(v: Any, where: str) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):  # YAML reads `on`/`off` as booleans
        return "on" if v else "off"
    if not isinstance(v, str) or v.strip().lower() not in BACKWARD:
        raise MatrixError(f"{where}: expected one of {', '.join(BACKWARD)}, got {v!r}")
    return v.strip().lower()


def case_label(mod: str, batch: int, seq: int, q_heads: int, kv_heads: int, head_dim: int) -> str:
    return f"{display_name(mod)} b{batch} s{seq} h{q_heads}/{kv_heads} d{head_dim}"
