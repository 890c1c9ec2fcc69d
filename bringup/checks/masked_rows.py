"""What the mathematics leaves to the kernel: an attention query row whose every key is masked.

Softmax over an empty set of keys has no value. PyTorch's SDPA gives such a row 0 (its cpu paths); a kernel that
adds a finite minimum to the masked scores (transformers' own eager attention, many fused kernels) gives a uniform
row over all the keys, because the real scores are absorbed by the minimum; a kernel that computes 0 / 0 gives NaN.
Under a causal + padding mask these are the pad queries of a left-padded row. A training job reads none of them:
its loss ignores the pads' outputs (and, in a left-padded row, the first real token's label, which the last pad
would predict: bringup/models/batches.py), and no real query attends to a pad. So a verdict:

- never compares what a fully masked row holds, only that it is finite (a NaN there reaches the next layer's
  keys, where NaN + (-inf) stays NaN and real rows turn NaN: it fails where it leaks, and is named where it is);
- says which convention the device chose (`describe`), so a team knows without a failure to chase.

`dead_rows(mask, ...)`: the fully masked query rows of an attention mask; `call_dead_rows(args, kwargs)`: those
of a recorded module call (its `attention_mask`); `UniformRows`: a TorchFunctionMode in which SDPA gives such rows
the uniform convention (the float64 reference run under it is what a uniform-convention device computes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
MASK_NAMES = ("attention_mask", "attn_mask", "mask")
# the conventions told apart (describe)
ZERO, UNIFORM, OTHER, NON_FINITE = "0", "uniform", "another finite value", "non-finite"


def keep_of(mask: torch.Tensor) -> torch.Tensor:
    """Which (query, key) pairs a mask keeps: a bool mask as is; an additive float mask where it is above half its
    dtype's minimum (transformers fills masked scores with finfo.min; -inf counts as masked too)."""
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2


def dead_rows(mask: torch.Tensor, is_causal: bool = False, q: int | None = None) -> torch.Tensor:
    """(..., q) True where a query row keeps no key (an attention mask (..., q, k); `is_causal` adds the causal
    mask on top, as SDPA does)."""
    keep = keep_of(mask)
    if is_causal:
        qn, kn = q or keep.shape[-2], keep.shape[-1]
        keep = keep & torch.ones(qn, kn, dtype=torch.bool, device=keep.device).tril()
    return ~keep.any(-1)


def call_dead_rows(args: Iterable[Any], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """A recorded module call's fully masked query rows, (batch, q) (True: every head's row is masked), from its 4-d
    attention mask (batch, heads or 1, q, k); None when it has none or none is fully masked."""
    mask = next((kwargs[k] for k in MASK_NAMES if isinstance(kwargs.get(k), torch.Tensor)), None)
    if mask is None:
        mask = next((a for a in args if isinstance(a, torch.Tensor) and a.dim() == 4 and a.dtype == torch.bool), None)
    if mask is None or mask.dim() != 4 or mask.shape[-2] < 2:
        return None
    dead = dead_rows(mask).all(1)  # (batch, q): masked for every head
    return dead if bool(dead.any()) else None


def _sdpa_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**dict(zip(SDPA_ARGS, args, strict=False)), **kwargs}


def uniform_rows(out: torch.Tensor, a: dict[str, Any]) -> tuple[torch.Tensor, int]:
    """SDPA's output `out` with its fully masked rows replaced by the mean of V over every key (the uniform
    convention), and how many rows that replaced."""
    mask = a.get("attn_mask")
    if mask is None:
        return out, 0
    dead = dead_rows(mask, bool(a.get("is_causal")), out.shape[-2])
    dead = dead.expand(*out.shape[:-1]) if dead.dim() == out.dim() - 1 else dead
    n = int(dead.sum())
    if not n:
        return out, 0
    mean = a["value"].mean(-2, keepdim=True)
    if mean.shape[-3] != out.shape[-3]:  # grouped-query attention: one kv head serves several query heads
        mean = mean.repeat_interleave(out.shape[-3] // mean.shape[-3], dim=-3)
    return torch.where(dead.unsqueeze(-1), mean.expand_as(out), out), n


class UniformRows(TorchFunctionMode):
    """Every SDPA call gives its fully masked rows the uniform convention (`rows`: how many it replaced; with
    `replace=False` it only counts them, and changes nothing)."""

    def __init__(self, replace: bool = True) -> None:
        super().__init__()
        self.rows = 0
        self.replace = replace

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is F.scaled_dot_product_attention and isinstance(out, torch.Tensor):
            new, n = uniform_rows(out, _sdpa_call(tuple(args), kwargs))
            self.rows += n
            out = new if self.replace else out
        return out


def _dist(a: torch.Tensor, b: torch.Tensor) -> float:
    x, y = a.detach().to("cpu", torch.float64), b.detach().to("cpu", torch.float64)
    scale = float(y.pow(2).mean().sqrt()) if y.numel() else 0.0
    return float((x - y).pow(2).mean().sqrt()) / scale if scale else math.inf


# a run whose pads are this close to the float64 reference's (relative RMS) follows its convention, 0: no need to
# compute the uniform one (a correct fp32 run sits at 1e-7..1e-5 there; the two conventions differ by ~20-35%)
SAME = 1e-3


def describe(
    got: torch.Tensor, zero: torch.Tensor, uniform: torch.Tensor | Callable[[], torch.Tensor | None] | None
) -> str:
    """Which convention a run's outputs at positions no loss reads follow: ZERO (those of the float64 reference, on
    PyTorch's SDPA), UNIFORM (those of the float64 reference under UniformRows), OTHER (neither: nearer to neither
    than a third of their distance apart) or NON_FINITE. `uniform`: those pads, or how to compute them (called only
    when the run is not within SAME of the reference); None: the reference saw no fully masked SDPA row, so the
    model's own code decides what its pads hold (nothing to name)."""
    if not bool(torch.isfinite(got).all()):
        return NON_FINITE
    if uniform is None or tuple(zero.shape) != tuple(got.shape):
        return ""
    d0 = _dist(got, zero)
    if d0 <= SAME:
        return ZERO
    uniform = uniform() if callable(uniform) else uniform
    if uniform is None or tuple(uniform.shape) != tuple(got.shape):
        return ""
    apart = _dist(uniform, zero)
    du = _dist(got, uniform)
    if min(d0, du) > apart / 3:
        return OTHER
    return ZERO if d0 <= du else UNIFORM


def sentence(by_run: dict[str, str]) -> str:
    """What a case says: 'fully masked attention rows: compiled uniform, eager 0 (torch SDPA gives 0)'."""
    named = {k: v for k, v in by_run.items() if v}
    if not named:
        return ""
    return "fully masked attention rows: " + ", ".join(f"{k} {v}" for k, v in named.items()) + " (torch SDPA gives 0)"
