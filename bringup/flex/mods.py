"""FlexAttention mods: each mask/score mod is a tiny pure function named for what it does (attn-gym's
definitions where it has them: github.com/pytorch-labs/attention-gym, attn_gym/masks and attn_gym/mods),
and each built-in mod also has a dense float64 reference: the same mask/bias written as plain tensor
math over a (heads, q, kv) block of scores, run on cpu by reference.py.

A mod is built per case by a factory `(shape, device) -> FlexMod`, because some mods depend on the
shape (alibi's slopes on the head count, document_mask's documents on the sequence length) and some
capture tensors that must live on the device (document ids, a bias table).

User mods: `module:function` or `path/to/file.py:function`, where function is such a factory (or a
FlexMod object). A FlexMod without `dense` is judged against its own score_mod/mask_mod evaluated
densely in float64 on cpu (the factory is called again with device cpu for that).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor
from torch.nn.attention.flex_attention import and_masks, or_masks

ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]  # (score, b, h, q_idx, kv_idx)
MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]  # (b, h, q_idx, kv_idx) -> bool
# Dense reference: (scores[H', Q', KV] float64, b, h[H',1,1], q[1,Q',1], kv[1,1,KV]) -> scores with the
# bias applied and -inf where masked. Index tensors are int64 and broadcast against the scores.
DenseRef = Callable[[Tensor, int, Tensor, Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class AttnShape:
    batch: int
    seq: int
    q_heads: int
    kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class FlexMod:
    """What one case runs: score_mod and/or mask_mod (None = plain attention) and the dense reference.
    `settings` are the mod's chosen parameters (window, prefix length, ...), reported with the case.
    `mask_broadcast`: the mask_mod ignores b and h, so one block mask is built and broadcast over
    batch and heads (False, the safe default for user mods: one mask per batch and head)."""

    name: str
    score_mod: ScoreMod | None = None
    mask_mod: MaskMod | None = None
    dense: DenseRef | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    mask_broadcast: bool = False


ModFactory = Callable[[AttnShape, torch.device], FlexMod]
NEG_INF = float("-inf")


# ---- the mods (flex side) ------------------------------------------------------------------------
def causal_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """attn_gym.masks.causal_mask."""
    return q_idx >= kv_idx


def generate_sliding_window(window_size: int) -> MaskMod:
    """attn_gym.masks.generate_sliding_window: causal, looking back at most window_size tokens."""

    def sliding_window(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return q_idx - kv_idx <= window_size

    mask = and_masks(sliding_window, causal_mask)
    mask.__name__ = f"sliding_window_{window_size}"
    return mask


def generate_prefix_lm_mask(prefix_length: int) -> MaskMod:
    """attn_gym.masks.generate_prefix_lm_mask: full attention to the prefix, causal after it."""

    def prefix_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return kv_idx < prefix_length

    mask = or_masks(prefix_mask, causal_mask)
    mask.__name__ = f"prefix_lm_causal_mask_{prefix_length}"
    return mask


def generate_doc_mask_mod(mask_mod: MaskMod, offsets: Tensor) -> MaskMod:
    """attn_gym.masks.generate_doc_mask_mod: documents packed in one sequence attend only within
    themselves; `mask_mod` applies inside each document on document-local positions.
    `offsets` = cumulative document lengths, [0, l0, l0+l1, ..., seq]."""
    counts = offsets[1:] - offsets[:-1]
    document_id = torch.repeat_interleave(torch.arange(len(counts), device=offsets.device, dtype=torch.int32), counts)

    def doc_mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        same_doc = document_id[q_idx] == document_id[kv_idx]
        q_logical = q_idx - offsets[document_id[q_idx]]
        kv_logical = kv_idx - offsets[document_id[kv_idx]]
        return same_doc & mask_mod(b, h, q_logical, kv_logical)

    return doc_mask_mod


def generate_alibi_bias(num_heads: int) -> ScoreMod:
    """attn_gym.mods.generate_alibi_bias: a per-head linear penalty on distance (slopes 2^(-8(h+1)/H))."""

    def alibi_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        scale = torch.exp2(-((h + 1) * 8.0 / num_heads))
        return score + (kv_idx - q_idx) * scale

    return alibi_mod


def generate_tanh_softcap(soft_cap: float) -> ScoreMod:
    """attn_gym.mods.generate_tanh_softcap (approx=False; the approx variant is CUDA-only PTX)."""

    def tanh_softcap(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return soft_cap * torch.tanh(score / soft_cap)

    tanh_softcap.__name__ = f"tanh_softcap_{soft_cap:g}"
    return tanh_softcap


def generate_head_bias(table: Tensor) -> ScoreMod:
    """Not in attn-gym: a captured (heads x kv) bias table, score + table[h, kv_idx] (a learned per-head
    key bias). A scalar per-head bias would cancel in the softmax and test nothing; the table exercises
    loads from a captured buffer indexed by head and key position inside the kernel."""

    def head_bias(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return score + table[h, kv_idx]

    return head_bias


# ---- shape-derived settings (pure, so the planner and the worker agree) ------------------------------
def sliding_window_size(seq: int) -> int:
    """256 tokens (FlexAttention's usual demo window) or a quarter of short sequences."""
    return max(1, min(256, seq // 4))


def prefix_length(seq: int) -> int:
    return max(1, seq // 4)


def document_lengths(seq: int) -> list[int]:
    """Deterministic, uneven document lengths summing to seq: 2 documents per 512 tokens (2..32), cut
    at points drawn from a generator seeded with seq."""
    n = max(1, min(32, seq // 256, seq))
    n = max(n, min(2, seq))
    cuts = sorted(random.Random(seq).sample(range(1, seq), n - 1)) if n > 1 else []
    bounds = [0, *cuts, seq]
    return [bounds[i + 1] - bounds[i] for i in range(n)]


SOFTCAP = 4.0  # small enough that the cap bends the N(0, 1) scores of the test inputs measurably
HEAD_BIAS_SEED = 1234


def head_bias_table(shape: AttnShape) -> Tensor:
    """(q_heads, seq) float64 on cpu, N(0, 1), seeded: the same values in the worker and the reference."""
    g = torch.Generator().manual_seed(HEAD_BIAS_SEED)
    return torch.randn(shape.q_heads, shape.seq, generator=g, dtype=torch.float64)


# ---- the built-in factories, each with its dense reference --------------------------------------------
def _causal(q: Tensor, kv: Tensor) -> Tensor:
    return kv <= q


def noop(shape: AttnShape, device: torch.device) -> FlexMod:
    return FlexMod("noop", dense=lambda s, b, h, q, kv: s)


def causal(shape: AttnShape, device: torch.device) -> FlexMod:
    return FlexMod(
        "causal",
        mask_mod=causal_mask,
        mask_broadcast=True,
        dense=lambda s, b, h, q, kv: s.masked_fill(~_causal(q, kv), NEG_INF),
    )


def sliding_window(shape: AttnShape, device: torch.device) -> FlexMod:
    w = sliding_window_size(shape.seq)

    def dense(s: Tensor, b: int, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        return s.masked_fill(~(_causal(q, kv) & (kv >= q - w)), NEG_INF)

    return FlexMod(
        "sliding_window", mask_mod=generate_sliding_window(w), dense=dense, mask_broadcast=True, settings={"window": w}
    )


def prefix_lm(shape: AttnShape, device: torch.device) -> FlexMod:
    p = prefix_length(shape.seq)

    def dense(s: Tensor, b: int, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        return s.masked_fill(~(_causal(q, kv) | (kv < p)), NEG_INF)

    return FlexMod(
        "prefix_lm", mask_mod=generate_prefix_lm_mask(p), dense=dense, mask_broadcast=True, settings={"prefix": p}
    )


def document_mask(shape: AttnShape, device: torch.device) -> FlexMod:
    lengths = document_lengths(shape.seq)
    ends = torch.tensor(lengths, dtype=torch.int64).cumsum(0)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), ends]).to(torch.int32)

    def dense(s: Tensor, b: int, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        doc_q = torch.searchsorted(ends, q, right=True)
        doc_kv = torch.searchsorted(ends, kv, right=True)
        return s.masked_fill(~((doc_q == doc_kv) & _causal(q, kv)), NEG_INF)

    mask = generate_doc_mask_mod(causal_mask, offsets.to(device))
    return FlexMod(
        "document_mask", mask_mod=mask, dense=dense, settings={"documents": len(lengths)}, mask_broadcast=True
    )


def alibi(shape: AttnShape, device: torch.device) -> FlexMod:
    """ALiBi with the causal mask, as attn-gym's alibi demo runs it (and as causal LMs use it)."""
    n = shape.q_heads

    def dense(s: Tensor, b: int, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        # in the scores' dtype, as the kernel's score_mod computes it (float64 in the reference; fp32 where
        # flex/dither.py holds the scores in fp32, so its dither rounds the bias as fp32 rounds)
        slope = torch.pow(2.0, -(h.to(s.dtype) + 1) * 8.0 / n)
        return (s + (kv - q).to(s.dtype) * slope).masked_fill(~_causal(q, kv), NEG_INF)

    return FlexMod("alibi", score_mod=generate_alibi_bias(n), mask_mod=causal_mask, dense=dense, mask_broadcast=True)


def softcap(shape: AttnShape, device: torch.device) -> FlexMod:
    cap = SOFTCAP
    return FlexMod(
        "softcap",
        score_mod=generate_tanh_softcap(cap),
        settings={"soft_cap": cap},
        dense=lambda s, b, h, q, kv: torch.tanh(s / cap) * cap,
    )


def head_bias(shape: AttnShape, device: torch.device) -> FlexMod:
    table64 = head_bias_table(shape)
    table = table64.to(torch.float32).to(device)  # fp32 like the kernel's scores
    ref = table64.to(torch.float32)  # the very values the device sees, held in fp32 as the kernel holds them

    def dense(s: Tensor, b: int, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        return s + ref[h, kv].to(s.dtype)  # fp32 values: exact in float64 and fp32 scores

    return FlexMod("head_bias", score_mod=generate_head_bias(table), dense=dense)


BUILTIN_MODS: Mapping[str, ModFactory] = MappingProxyType(
    {
        "noop": noop,
        "causal": causal,
        "sliding_window": sliding_window,
        "prefix_lm": prefix_lm,
        "document_mask": document_mask,
        "alibi": alibi,
        "softcap": softcap,
        "head_bias": head_bias,
    }
)


# ---- user mods -------------------------------------------------------------------------------------
class ModError(ValueError):
    """A mod spec that can't be resolved: unknown name, module that doesn't import, not a factory."""


def is_user_mod(spec: str) -> bool:
    return ":" in spec


def normalize_mod_spec(spec: str) -> str:
    """Built-in names as they are; a file path in `file.py:function` made absolute (workers may run
    elsewhere). Raises ModError for names that are neither."""
    spec = spec.strip()
    if not is_user_mod(spec):
        if spec not in BUILTIN_MODS:
            raise ModError(f"unknown mod {spec!r}; built-in mods: {', '.join(BUILTIN_MODS)}; or module:function")
        return spec
    mod, _, fn = spec.rpartition(":")
    if not mod or not fn or not fn.replace(".", "_").isidentifier():
        raise ModError(f"bad user mod {spec!r}: expected module:function or path/to/file.py:function")
    if mod.endswith(".py") or "/" in mod:
        p = Path(mod).expanduser()
        if not p.is_file():
            raise ModError(f"user mod {spec!r}: no such file {mod}")
        return f"{p.resolve()}:{fn}"
    return spec


def display_name(spec: str) -> str:
    """What tables show: the built-in name, `module:function`, or `file.py:function` without its folder."""
    if not is_user_mod(spec):
        return spec
    mod, _, fn = spec.rpartition(":")
    return f"{Path(mod).name}:{fn}" if (mod.endswith(".py") or "/" in mod) else spec


def _import_user_module(mod: str) -> Any:
    if mod.endswith(".py") or "/" in mod:
        path = Path(mod).resolve()
        name = "bringup_user_mod_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ModError(f"cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    return importlib.import_module(mod)


def resolve_mod(spec: str) -> ModFactory:
    """The factory for a mod spec. User code errors propagate as ModError (with the first line)."""
    if not is_user_mod(spec):
        try:
            return BUILTIN_MODS[spec]
        except KeyError:
            raise ModError(f"unknown mod {spec!r}; built-in mods: {', '.join(BUILTIN_MODS)}") from None
    mod, _, fn = spec.rpartition(":")
    try:
        obj: Any = _import_user_module(mod)
    except ModError:
        raise
    except BaseException as e:  # a user module may raise anything, SystemExit included
        raise ModError(f"user mod {spec!r}: importing {mod} failed: {type(e).__name__}: {e}".splitlines()[0]) from e
    for part in fn.split("."):
        if not hasattr(obj, part):
            raise ModError(f"user mod {spec!r}: {mod} has no attribute {fn!r}")
        obj = getattr(obj, part)
    if isinstance(obj, FlexMod):
        fixed = obj
        return lambda shape, device: fixed
    if not callable(obj):
        raise ModError(f"user mod {spec!r}: {fn} is not callable (expected a factory (shape, device) -> FlexMod)")
    return obj


def build_mod(spec: str, shape: AttnShape, device: torch.device) -> FlexMod:
    """Resolve and call the factory; a factory that returns anything but a FlexMod is a ModError."""
    got = resolve_mod(spec)(shape, device)
    if not isinstance(got, FlexMod):
        raise ModError(f"user mod {spec!r} returned {type(got).__name__}, not bringup.flex.mods.FlexMod")
    if got.score_mod is None and got.mask_mod is None and got.dense is None and is_user_mod(spec):
        raise ModError(f"user mod {spec!r} has neither score_mod, mask_mod nor dense")
    return got


def derived_dense(mod: FlexMod) -> DenseRef:
    """A dense reference made from the mod's own functions, evaluated with broadcasting in float64.
    For user mods without `dense` (the mod is then only checked for what the device does with it)."""

    def dense(s: Tensor, b: int, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        bt = torch.tensor(b, dtype=torch.int64)
        if mod.score_mod is not None:
            s = torch.broadcast_to(mod.score_mod(s, bt, h, q, kv).to(torch.float64), s.shape)
        if mod.mask_mod is not None:
            keep = torch.broadcast_to(mod.mask_mod(bt, h, q, kv).to(torch.bool), s.shape)
            s = s.masked_fill(~keep, NEG_INF)
        return s

    return dense


def reference_for(spec: str, shape: AttnShape) -> tuple[DenseRef, str]:
    """The dense reference of a mod and where it comes from ("dense": written separately; "derived":
    the mod's own functions evaluated densely on cpu)."""
    mod = build_mod(spec, shape, torch.device("cpu"))
    if mod.dense is not None:
        return mod.dense, "dense"
    return derived_dense(mod), "derived"


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
