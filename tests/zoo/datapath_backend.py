"""Test-only wrong devices whose bug lives in the data path: what only a batch like a real job's exercises.

Each family bends one kind of torch-level call (bend_backend.py injects them: `BendMode` over an eager step, or
`bend_backend` rewriting a dynamo graph), and each is the exact function at strength 0. On the zoo's old batches
(uniform ids that never repeat, full rows, positions 0..n-1, no mask) every one of them computes the right
numbers; on text batches (bringup/models/batches.py: repeated ids, padded rows with their mask, packed documents
with restarting positions) they do not. Written 2026-12-04 with the text batches, before any measurement of them;
the rules were not changed with their rows in sight.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

DATAPATH: dict[str, str] = {
    "dp_embed_lastwrite": "backward only: an embedding's scatter-add keeps the last write of a repeated id and loses "
    "a fraction d of the others (d = 1: the classic index_put without accumulate)",
    "dp_mask_causal": "attention with an explicit mask served by the causal kernel: out = (1-d) attention(mask) + d "
    "attention(is_causal) (d = 1: the mask ignored, padding and document boundaries attended)",
    "dp_pos_ignored": "positions taken as 0..n-1 whatever position_ids say: a learned position table read at "
    "(1-d) p + d arange (nearest row: d = 1 exactly arange), rotary angles computed at (1-d) p + d arange (d = 1: "
    "restarting documents and left-padded rows get the wrong positions; rotary is relative, so with the documents "
    "and pads masked its error cancels in q.k: ~1e-7 on llama)",
    "dp_ce_ignored_counted": "the loss's mean divides by the labelled tokens plus d x the ignored ones (d = 1: padding "
    "and document starts counted as tokens; on full rows only the one ignored position per row that a causal LM's "
    "shifted labels end with)",
}
STRENGTHS: dict[str, tuple[float, ...]] = {
    "dp_embed_lastwrite": (0.03, 0.1, 1.0),
    "dp_mask_causal": (0.01, 0.1, 1.0),
    "dp_pos_ignored": (0.01, 0.1, 1.0),
    "dp_ce_ignored_counted": (0.01, 0.1, 1.0),
}
IGNORE = -100


def _name(func: Any) -> str:
    return getattr(func, "__name__", str(func)).rstrip("_") if callable(func) else str(func)


def applies(family: str, func: Any) -> bool:
    name = _name(func)
    return {
        "dp_embed_lastwrite": name == "embedding",
        "dp_mask_causal": name == "scaled_dot_product_attention",
        "dp_pos_ignored": name in ("matmul", "bmm", "__matmul", "mul", "__mul", "__rmul", "embedding"),
        "dp_ce_ignored_counted": name == "cross_entropy",
    }.get(family, False)


class _BwdLastWrite(torch.autograd.Function):
    """Forward exact; backward: each repeated id keeps its last contribution and (1 - d) of the earlier ones."""

    @staticmethod
    def forward(ctx: Any, idx: torch.Tensor, w: torch.Tensor, padding_idx: Any, d: float) -> torch.Tensor:
        ctx.save_for_backward(idx)
        ctx.shape, ctx.dtype, ctx.padding_idx, ctx.d = w.shape, w.dtype, padding_idx, d
        return F.embedding(idx, w, padding_idx)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        (idx,) = ctx.saved_tensors
        flat = idx.reshape(-1)
        n = flat.numel()
        pos = torch.arange(n, device=flat.device)
        last = torch.full((int(ctx.shape[0]),), -1, dtype=torch.long, device=flat.device)
        last.scatter_reduce_(0, flat, pos, reduce="amax")  # the last position writing each id
        kept = torch.where(last[flat] == pos, 1.0, 1.0 - ctx.d)
        acc = torch.promote_types(g.dtype, torch.float32)
        gw = torch.zeros(ctx.shape, dtype=acc, device=g.device)
        gw.index_add_(0, flat, g.reshape(n, -1).to(acc) * kept.to(acc).unsqueeze(-1))
        if ctx.padding_idx is not None and ctx.padding_idx >= 0:
            gw[ctx.padding_idx] = 0
        return None, gw.to(ctx.dtype), None, None


def _sdpa_kw(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    return {**dict(zip(names, args, strict=False)), **kwargs}


def _mask_causal(func: Any, a: dict[str, Any], d: float) -> Any:
    if a.get("attn_mask") is None or a.get("dropout_p"):
        return NotImplemented  # no explicit mask: the causal kernel is the right one
    right = func(**a)
    wrong = func(**{**a, "attn_mask": None, "is_causal": a["query"].shape[-2] == a["key"].shape[-2]})
    return right if d == 0 else (1 - d) * right + d * wrong


def _position_like(p: Any, dim: int) -> bool:
    """A float tensor of non-negative whole numbers beyond 0/1 (not a mask), a singleton in `dim`: positions."""
    return (
        isinstance(p, torch.Tensor)
        and p.is_floating_point()
        and p.dim() >= 2
        and p.shape[dim] == 1
        and bool((p == p.round()).all())
        and bool((p >= 0).all())
        and float(p.max()) >= 2
    )


def _positions(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], d: float) -> Any:
    """The rotary angles: positions (B, S, 1) * inv_freq (transformers 5.25) or inv_freq (B, h, 1) @ positions
    (B, 1, S) (earlier releases), the positions bent toward 0..S-1."""
    if len(args) != 2 or kwargs or d == 0:
        return NotImplemented
    name = _name(func)
    mm = name in ("matmul", "bmm", "__matmul")
    at = 1 if mm else next((i for i, a in enumerate(args) if _position_like(a, -1)), None)
    if at is None or not _position_like(args[at], -2 if mm else -1):
        return NotImplemented
    p = args[at]
    n = p.shape[-1] if mm else p.shape[-2]
    ar = torch.arange(n, device=p.device, dtype=p.dtype)
    ar = ar.view(*([1] * (p.dim() - 1)), n) if mm else ar.view(*([1] * (p.dim() - 2)), n, 1)
    ar = ar.expand_as(p)
    if bool((p == ar).all()):
        return NotImplemented  # positions 0..n-1: nothing to ignore
    bent = list(args)
    bent[at] = (1 - d) * p + d * ar
    return func(*bent)


def _position_table(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], d: float) -> Any:
    """A learned position table (gpt2's wpe) read with position ids: rows that run 0, 1, 2, ... with restarts (packed
    documents) or a pad run (left padding), read instead at (1-d) p + d arange, rounded to a row."""
    names = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse")
    b = {**dict(zip(names, args, strict=False)), **kwargs}
    idx = b["input"]
    if d == 0 or not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.shape[-1] < 4 or idx.is_floating_point():
        return NotImplemented
    steps = (idx[:, 1:] - idx[:, :-1]) == 1
    if float(steps.float().mean()) < 0.75:
        return NotImplemented  # token ids, not positions
    ar = torch.arange(idx.shape[-1], device=idx.device).expand_as(idx)
    if bool((idx == ar).all()):
        return NotImplemented
    bent = ((1 - d) * idx + d * ar).round().long().clamp(0, b["weight"].shape[0] - 1)
    return func(bent, *[b[k] for k in names[1:2]], **{k: b[k] for k in names[2:] if k in b})


def _ce(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], d: float) -> Any:
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")
    b = {**dict(zip(names, args, strict=False)), **kwargs}
    x, t = b["input"], b["target"]
    ignore = IGNORE if b.get("ignore_index") is None else b["ignore_index"]
    if b.get("reduction", "mean") != "mean" or b.get("weight") is not None or b.get("label_smoothing"):
        return NotImplemented
    valid = t != ignore
    if bool(valid.all()) or d == 0:
        return NotImplemented  # nothing ignored: every count agrees
    total = func(x, t, ignore_index=ignore, reduction="sum")
    return total / (valid.sum() + d * (~valid).sum())


def bend(family: str, d: float, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The bent result of `func(*args, **kwargs)`, or NotImplemented when this family leaves it alone."""
    name = _name(func)
    if family == "dp_embed_lastwrite" and name == "embedding":
        names = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse")
        b = {**dict(zip(names, args, strict=False)), **kwargs}
        if b.get("max_norm") is not None or b.get("sparse") or b.get("scale_grad_by_freq") or d == 0:
            return NotImplemented
        return _BwdLastWrite.apply(b["input"], b["weight"], b.get("padding_idx"), d)
    if family == "dp_mask_causal" and name == "scaled_dot_product_attention":
        return _mask_causal(func, _sdpa_kw(args, kwargs), d)
    if family == "dp_pos_ignored" and name == "embedding":
        return _position_table(func, args, kwargs, d)
    if family == "dp_pos_ignored" and name in ("matmul", "bmm", "__matmul", "mul", "__mul", "__rmul"):
        return _positions(func, args, kwargs, d)
    if family == "dp_ce_ignored_counted" and name == "cross_entropy":
        return _ce(func, args, kwargs, d)
    return NotImplemented
