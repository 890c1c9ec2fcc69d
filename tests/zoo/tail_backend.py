"""Test-only wrong devices whose bug lives in a kernel's partial tail: what only the shapes real jobs have exercise.

A kernel tiles a dimension in blocks (a vector loop of 16 lanes, an attention block of keys, a GEMM's K tile, a
pair of batch rows, a head-group specialisation) and handles the remainder apart; a bug there is invisible when
every size is a multiple of the block. Each family bends one kind of torch-level call (bend_backend.py injects them:
`BendMode` over an eager step, or `bend_backend` rewriting a dynamo graph) and is the exact function at strength 0
AND whenever its dimension has no tail: on the zoo's old shapes (rows of 32 tokens, 2 rows, hidden 64, head dim 16,
ffn 128, vocab 256, 2 query heads per kv head) every one computes the right numbers; on the shapes real jobs have
(bringup/models/tiny_config.py Sizes, zoo/args.py: 37 tokens, 3 rows, hidden 72, head dim 12, ffn 136, vocab 251,
3 query heads per kv head) they do not. Written 2026-12-06 with the new shapes, before any measurement of them.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

# the zoo's shapes before 2026-12-06: every block divides them (tests and bench/verdict_power.py --old-shapes)
OLD_SIZES = {"hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "ffn": 128, "moe_ffn": 32, "vocab": 256}
OLD_ROWS, OLD_SEQ = 2, 32
BLOCK = 16  # a vector loop / a key block / a K tile: the widths the old shapes were all multiples of
HEAD_BLOCK = 8  # q.k's reduction over the head dim in 8-wide chunks (16 was a multiple of it, 12 is not)
TAIL: dict[str, str] = {
    "tail_sdpa_keys": "attention's last partial block of keys (Sk % 16) gets its weights x (1 - d) before the "
    "softmax normalises (d = 1: the tail's keys dropped)",
    "tail_sdpa_headdim": "q.k's last partial chunk of the head dim (D % 8) summed x (1 + d)",
    "tail_linear_k": "a linear's last partial K tile (in_features % 16) accumulated x (1 + d)",
    "tail_act_vec": "an activation's vector tail (features % 16) gets the (1 + d)-sharper gate",
    "tail_ce_vocab": "the loss's log-softmax: the vocabulary's last partial block (V % 16) of logits x (1 + d)",
    "tail_batch_row": "attention over batch rows in pairs: an odd batch's last row's output x (1 + d)",
    "tail_gqa_map": "grouped-query attention specialised for 2 query heads per kv head: query head h reads kv head "
    "min(h // 2, Hkv - 1) (exact at a ratio of 2), out = (1 - d) right + d that",
}
STRENGTHS: dict[str, tuple[float, ...]] = {
    "tail_sdpa_keys": (0.01, 0.1, 0.5),
    "tail_sdpa_headdim": (0.01, 0.1, 0.5),
    "tail_linear_k": (0.01, 0.1, 0.5),
    "tail_act_vec": (0.01, 0.1, 0.5),
    "tail_ce_vocab": (0.01, 0.1, 0.5),
    "tail_batch_row": (0.01, 0.1, 0.5),
    "tail_gqa_map": (0.01, 0.1, 1.0),
}
GATED = ("silu", "gelu", "mish", "hardswish")
SDPA = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _name(func: Any) -> str:
    return getattr(func, "__name__", str(func)).rstrip("_") if callable(func) else str(func)


def applies(family: str, func: Any) -> bool:
    name = _name(func)
    return {
        "tail_sdpa_keys": name == "scaled_dot_product_attention",
        "tail_sdpa_headdim": name == "scaled_dot_product_attention",
        "tail_linear_k": name == "linear",
        "tail_act_vec": name in GATED,
        "tail_ce_vocab": name == "cross_entropy",
        "tail_batch_row": name == "scaled_dot_product_attention",
        "tail_gqa_map": name == "scaled_dot_product_attention",
    }.get(family, False)


def _sdpa(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**dict(zip(SDPA, args, strict=False)), **kwargs}


def _tail(n: int, block: int) -> int:
    """Where a dimension of `n` stops being whole blocks (n: no tail)."""
    return n - n % block


def _keys(func: Any, a: dict[str, Any], d: float) -> Any:
    sk = a["key"].shape[-2]
    at = _tail(sk, BLOCK)
    if at == sk:
        return NotImplemented
    q = a["query"]
    bias = torch.zeros(sk, dtype=q.dtype, device=q.device)
    bias[at:] = math.log(max(1.0 - d, 1e-30))
    mask = a.get("attn_mask")
    if a.get("is_causal"):
        mask = torch.ones(q.shape[-2], sk, dtype=torch.bool, device=q.device).tril()
    if mask is None:
        add = bias
    elif mask.dtype == torch.bool:
        add = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf")) + bias
    else:
        add = mask + bias
    return func(**{**a, "attn_mask": add, "is_causal": False})


def _headdim(func: Any, a: dict[str, Any], d: float) -> Any:
    q = a["query"]
    dim = q.shape[-1]
    at = _tail(dim, HEAD_BLOCK)
    if at == dim:
        return NotImplemented
    scale = a.get("scale") or 1.0 / math.sqrt(dim)
    w = torch.ones(dim, dtype=q.dtype, device=q.device)
    w[at:] = 1.0 + d
    return func(**{**a, "query": q * w, "scale": scale})


def _batch_row(func: Any, a: dict[str, Any], d: float) -> Any:
    out = func(**a)
    if out.shape[0] % 2 == 0:
        return NotImplemented
    w = torch.ones(out.shape[0], *([1] * (out.dim() - 1)), dtype=out.dtype, device=out.device)
    w[-1] = 1.0 + d
    return out * w


def _groups(k: torch.Tensor, v: torch.Tensor) -> int:
    """How many query heads share each kv head in k / v already repeated to the query heads (transformers'
    repeat_kv before SDPA): the largest r whose groups of r consecutive heads are copies (1: none)."""
    h = k.shape[-3]
    for r in range(h, 1, -1):
        if h % r == 0 and all(
            torch.equal(t.narrow(-3, g * r, 1).expand_as(t.narrow(-3, g * r, r)), t.narrow(-3, g * r, r))
            for t in (k, v)
            for g in range(h // r)
        ):
            return r
    return 1


def _gqa(func: Any, a: dict[str, Any], d: float) -> Any:
    q, k, v = a["query"], a["key"], a["value"]
    hq = q.shape[-3]
    if k.shape[-3] == hq:  # kv repeated to the query heads first (transformers' repeat_kv): find the groups
        r = _groups(k, v)
        k, v = k[..., ::r, :, :], v[..., ::r, :, :]
    hkv = k.shape[-3]
    if hkv == hq or hq // hkv == 2:
        return NotImplemented  # no grouping, or the ratio the kernel was written for
    right = func(**a)
    heads = torch.tensor([min(h // 2, hkv - 1) for h in range(hq)], device=k.device)
    kw, vw = k.index_select(-3, heads), v.index_select(-3, heads)
    wrong = func(**{**a, "key": kw, "value": vw, "enable_gqa": False})
    return (1 - d) * right + d * wrong


def _linear(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], d: float) -> Any:
    names = ("input", "weight", "bias")
    b = {**dict(zip(names, args, strict=False)), **kwargs}
    x, w = b["input"], b["weight"]
    k = w.shape[-1]
    at = _tail(k, BLOCK)
    if at == k:
        return NotImplemented
    return func(x, w, b.get("bias")) + d * F.linear(x[..., at:], w[:, at:])


def _act(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], d: float) -> Any:
    x = args[0] if args else kwargs["input"]
    n = x.shape[-1]
    at = _tail(n, BLOCK)
    if at == n:
        return NotImplemented
    y = func(*args, **kwargs)
    sharp = func(x[..., at:] * (1 + d), *args[1:], **{k: v for k, v in kwargs.items() if k != "input"}) / (1 + d)
    return torch.cat([y[..., :at], sharp], dim=-1)


def _ce(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], d: float) -> Any:
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")
    b = {**dict(zip(names, args, strict=False)), **kwargs}
    x = b["input"]
    v = x.shape[-1] if x.dim() == 2 else x.shape[1]
    at = _tail(v, BLOCK)
    if at == v or x.dim() != 2:
        return NotImplemented
    w = torch.ones(v, dtype=x.dtype, device=x.device)
    w[at:] = 1.0 + d
    return func(x * w, *[b[n] for n in names[1:2]], **{n: b[n] for n in names[2:] if n in b})


def bend(family: str, d: float, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The bent result of `func(*args, **kwargs)`, or NotImplemented when this family leaves it alone (no tail)."""
    if d == 0 or not applies(family, func):
        return NotImplemented
    if family == "tail_linear_k":
        return _linear(func, args, kwargs, d)
    if family == "tail_act_vec":
        return _act(func, args, kwargs, d)
    if family == "tail_ce_vocab":
        return _ce(func, args, kwargs, d)
    a = _sdpa(args, kwargs)
    if a.get("dropout_p"):
        return NotImplemented
    return {"tail_sdpa_keys": _keys, "tail_sdpa_headdim": _headdim, "tail_batch_row": _batch_row, "tail_gqa_map": _gqa}[
        family
    ](func, a, d)
