"""Attention tolerances: how far a FlexAttention result may be from the float64 dense reference.

Same measure as bringup/checks/parity.py (RMSE of the error over RMS of the reference, per tensor,
scale-free) but attention's own bounds, because one attention call is a single fused kernel, not a
model's chain of ops: its error budget is a couple of roundings, so the model-sized bf16 bound (5e-2)
would let a wrong mask through. The reference sees the same rounded inputs as the device, so only
the kernel's own error counts. max abs / max rel error are kept for the report.

Why each number (u = unit roundoff: fp32 6e-8, fp16 4.9e-4, bf16 3.9e-3):
 * out: fp32 1e-4 -- a correct fp32 kernel lands near 1e-6 (online softmax, fp32 accumulation); 100x
   headroom for tiling/reduction order, yet a window off by one token at seq 1024 (~4e-3) fails.
   bf16 2e-2 -- output rounding (u) plus P rounded to bf16 before P@V (u) give ~2-5e-3; measured
   here on cpu, compiled, causal, seq 256: 1.9e-3. 2e-2 is 4-10x that and still fails a 2% error.
   fp16 5e-3 -- the same two roundings at u = 4.9e-4 give ~5e-4 (measured 2.4e-4): 10-20x headroom.
 * gradients (dq, dk, dv): 4x the out bound for bf16/fp16 and 10x for fp32: the backward computes
   dS = P * (dP - delta), a difference of nearly equal numbers, so gradients keep less relative
   precision than the output.
These are derived, not yet measured on an accelerator: re-check them on the first real device run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch


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


@dataclass(frozen=True)
class TensorCheck:
    name: str
    ok: bool
    rel_rmse: float
    max_abs_err: float
    max_rel_err: float
    bound: float
    why: str = ""


@dataclass
class AttnCheck:
    ok: bool
    tensors: list[TensorCheck] = field(default_factory=list)

    @property
    def worst(self) -> TensorCheck | None:
        if not self.tensors:
            return None
        return max(self.tensors, key=lambda t: (not t.ok, t.rel_rmse / t.bound if t.bound else math.inf))

    @property
    def max_abs_err(self) -> float:
        return max((t.max_abs_err for t in self.tensors), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((t.max_rel_err for t in self.tensors), default=0.0)

    @property
    def rel_rmse(self) -> float:
        return max((t.rel_rmse for t in self.tensors), default=0.0)

    def summary(self) -> str:
        w = self.worst
        if w is None:
            return "nothing compared"
        head = "ok" if self.ok else f"{w.name} off"
        extra = f" ({w.why})" if w.why else ""
        return (f"{head}: rel_rmse {w.rel_rmse:.3g} (bound {w.bound:.3g}), max_abs_err {w.max_abs_err:.3g}"
                f"{extra}")  # fmt: skip


def check_tensor(name: str, got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> TensorCheck:
    bound = bound_for(name, dtype)
    if tuple(got.shape) != tuple(ref.shape):
        return TensorCheck(name, False, math.inf, math.inf, math.inf, bound, f"shape {tuple(got.shape)}")
    g = got.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    if not torch.isfinite(r).all():
        return TensorCheck(name, False, math.inf, math.inf, math.inf, bound, "reference not finite")
    if not torch.isfinite(g).all():
        n = int((~torch.isfinite(g)).sum())
        return TensorCheck(name, False, math.inf, math.inf, math.inf, bound, f"{n} non-finite values")
    diff = (g - r).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    peak = float(r.abs().max()) if r.numel() else 0.0
    max_rel = max_abs / peak if peak else (0.0 if max_abs == 0 else math.inf)
    rms = float(torch.sqrt(torch.mean(r**2))) if r.numel() else 0.0
    err = float(torch.sqrt(torch.mean((g - r) ** 2))) if r.numel() else 0.0
    rel = err / rms if rms else (0.0 if err == 0 else math.inf)
    return TensorCheck(name, rel <= bound, rel, max_abs, max_rel, bound)


def check_attention(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], dtype: torch.dtype) -> AttnCheck:
    out = []
    for name, r in ref.items():
        if name not in got:
            out.append(TensorCheck(name, False, math.inf, math.inf, math.inf, bound_for(name, dtype), "missing"))
        else:
            out.append(check_tensor(name, got[name], r, dtype))
    return AttnCheck(all(t.ok for t in out), out)
