"""Attention parity: how far a FlexAttention result may be from the float64 dense reference.

With a trusted run (the default; flex/case.py computes it): the rule of bringup/checks/parity.py,
per tensor (out, dq, dk, dv, every (batch, head) pair): the error's size against float64 must stay
within a fudge factor of the trusted run's (the same dense attention computed in the case dtype on
cpu, rounding scores, probabilities and outputs like an eager math path: PyTorch's own FlexAttention
tests judge "compiled error <= fudge x eager error" the same way), and its direction (bias: the
projection of the error on the reference) inside the envelope [0, trusted bias] widened by the
measured noise (the spread of the projection over chunks of the tensor). The fudge factors are
PyTorch's own for FlexAttention (test/inductor/test_flex_attention.py): fp32 10 ("we really are less
accurate than the float32 computation, likely due to the online softmax"), low precision ~1 for the
output; we take 2 for bf16/fp16 out (our trusted run is cpu math, not the device's own eager path) and
4 for gradients (dS = P * (dP - delta) is a difference of nearly equal numbers).

Without a trusted run (check_attention(..., trusted=None)), the fixed bounds below (rel_rmse), with the
fixed bias bound of checks/parity.py's table. In fp32 the size bound is the larger of the two: the fp32
math path is ~exact (1e-7) while a correct online-softmax kernel lands near 1e-6.

Fixed bounds, why each number (u = unit roundoff: fp32 6e-8, fp16 4.9e-4, bf16 3.9e-3):
 * out: fp32 1e-4 -- a correct fp32 kernel lands near 1e-6 (online softmax, fp32 accumulation).
   bf16 2e-2, fp16 5e-3: output rounding plus P rounded before P@V, with headroom.
 * gradients (dq, dk, dv): 4x the out bound for bf16/fp16 and 10x for fp32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import torch

from bringup.checks.parity import ParityReport, TensorParity, compare_tensor, judged_dtype, scale_floor


@dataclass(frozen=True)
class AttnTolerance:
    out: float
    grad: float


ATTN_TOLERANCES: Mapping[torch.dtype, AttnTolerance] = MappingProxyType(
    {
        torch.float64: AttnTolerance(1e-10, 1e-9),
        torch.float32: AttnTolerance(1e-4, 1e-3),
        torch.bfloat16: AttnTolerance(2e-2, 8e-2),
        torch.float16: AttnTolerance(5e-3, 2e-2),
    }
)


def bound_for(name: str, dtype: torch.dtype) -> float:
    tol = ATTN_TOLERANCES.get(dtype, ATTN_TOLERANCES[torch.float32])
    return tol.out if name == "out" else tol.grad


def worst(check: ParityReport) -> TensorParity | None:
    """The tensor flex's reason names: a failing one first, then the largest rel_rmse over its bound."""
    if not check.tensors:
        return None
    return max(check.tensors, key=lambda t: (not t.ok, t.rel_rmse / t.bound if t.bound else math.inf))


def attn_reason(check: ParityReport) -> str:
    """flex's one-line verdict on a check_attention() report: 'ok: ...' or '<tensor> off: ...'."""
    w = worst(check)
    if w is None:
        return "nothing compared"
    head = "ok" if check.ok else f"{w.name} off"
    extra = f" ({w.why})" if w.why else ""
    return (f"{head}: rel_rmse {w.rel_rmse:.3g} (bound {w.bound:.3g}), max_abs_err {w.max_abs_err:.3g}"
            f"{extra}")  # fmt: skip


# fudge factors x the trusted run's error (module doc): (out, grads)
FUDGE: Mapping[torch.dtype, tuple[float, float]] = MappingProxyType(
    {torch.float64: (10.0, 10.0), torch.float32: (10.0, 10.0), torch.bfloat16: (2.0, 4.0), torch.float16: (2.0, 4.0)}
)


def check_tensor(name: str, got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> TensorParity:
    """The fixed bound alone (no trusted run): rel_rmse against float64 within ATTN_TOLERANCES; any
    non-finite value or a shape mismatch fails."""
    bound = bound_for(name, dtype)
    if tuple(got.shape) != tuple(ref.shape):
        return TensorParity(name, False, math.inf, math.inf, math.inf, bound, f"shape {tuple(got.shape)}")
    g = got.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    if not torch.isfinite(r).all():
        return TensorParity(name, False, math.inf, math.inf, math.inf, bound, "reference not finite")
    if not torch.isfinite(g).all():
        n = int((~torch.isfinite(g)).sum())
        return TensorParity(name, False, math.inf, math.inf, math.inf, bound, f"{n} non-finite values")
    diff = (g - r).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    peak = float(r.abs().max()) if r.numel() else 0.0
    over_peak = max_abs / peak if peak else (0.0 if max_abs == 0 else math.inf)
    rms = float(torch.sqrt(torch.mean(r**2))) if r.numel() else 0.0
    err = float(torch.sqrt(torch.mean((g - r) ** 2))) if r.numel() else 0.0
    rel = err / rms if rms else (0.0 if err == 0 else math.inf)
    return TensorParity(name, rel <= bound, rel, max_abs, over_peak, bound)


def check_attention(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], dtype: Any,
                    trusted: dict[str, torch.Tensor] | None = None) -> ParityReport:  # fmt: skip
    """Every tensor of `ref` (float64) against `got`, one (batch, kv-head group) slice at a time (dim 0 of
    the stacked tensors: a fault in one pair is judged in that pair, not diluted by the others); with
    `trusted` (the same attention at the case precision), by checks/parity.py's rule with the FUDGE
    factors; else by the fixed bounds + parity's fixed bias bound. The report is checks/parity.py's
    ParityReport (its tensors TensorParity, named out[i], dq[i], ...); `attn_reason()` words flex's verdict."""
    dt = judged_dtype(dtype)
    floor = scale_floor(ref.values(), dt)
    out = []
    for name, r in ref.items():
        if name not in got:
            out.append(TensorParity(name, False, math.inf, math.inf, math.inf, bound_for(name, dt), "missing"))
            continue
        g, b = got[name], None if trusted is None else trusted.get(name)
        if tuple(g.shape) != tuple(r.shape) or r.dim() < 2 or r.shape[0] < 2:
            out.append(_check_one(name, g, r, b, dt, floor))
            continue
        for i in range(r.shape[0]):
            out.append(_check_one(f"{name}[{i}]", g[i], r[i], None if b is None else b[i], dt, floor, name))
    return ParityReport(all(t.ok for t in out), out)


def _check_one(label: str, g: torch.Tensor, r: torch.Tensor, b: torch.Tensor | None, dt: torch.dtype,
               floor: float, kind: str | None = None) -> TensorParity:  # fmt: skip
    kind = kind or label
    fixed = check_tensor(kind, g, r, dt)
    fixed = replace(fixed, name=label)
    if not fixed.ok and not math.isfinite(fixed.rel_rmse):
        return fixed  # shape, non-finite
    fudge = FUDGE.get(dt, (10.0, 10.0))[0 if kind == "out" else 1]
    t = compare_tensor(label, g, r, dt, b, scale_floor=floor, multiplier=fudge)
    if b is None or dt in (torch.float32, torch.float64):
        # no trusted run, or fp32: a fp32 math path is ~exact (1e-7) while a correct online-softmax kernel
        # lands near 1e-6, so the fixed fp32 bound (itself 100x under a 1% error) stays the size bound
        bound = max(fixed.bound, t.bound) if b is not None else fixed.bound
        ok = t.rel_rmse <= bound and not t.biased
    else:
        ok, bound = t.ok, t.bound
    why = t.why
    if t.biased:
        why = f"bias {t.bias:+.3g} outside [{t.bias_lo:+.3g}, {t.bias_hi:+.3g}] {why}".strip()
    # parity's figures, with flex's verdict (ok, bound, why) and the element-wise figures of the fixed check
    return replace(t, name=label, ok=ok, bound=bound, why=why, max_abs_err=fixed.max_abs_err,
                   max_abs_over_peak=fixed.max_abs_over_peak)  # fmt: skip
