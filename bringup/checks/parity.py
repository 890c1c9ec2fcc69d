"""Numerical parity of device results against a float64 CPU reference.

Starting point: the dynamo harness's `same()` (torch/_dynamo/utils.py): allclose with a tolerance,
else `rmse(fp64, res) <= multiplier * rmse(fp64, ref) + tol / 10`. We keep its float64 golden and its
"compare against how wrong a trusted run is" idea, but drop the allclose-first shortcut and the
additive tol/10 term: on tiny random-init models both let a 1% error in one operator through.
Instead every tensor is judged by its RMSE relative to the reference's RMS (scale-free), against a
per-dtype bound, and, when a trusted baseline in the same dtype is given, against a multiple of the
baseline's own error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Tolerance:
    rel_rmse: float  # max RMSE(got - ref64) / RMS(ref64) on its own
    multiplier: float  # with a baseline: allowed multiple of the baseline's rel_rmse
    floor: float  # with a baseline: rel_rmse below this always passes (baseline may be ~exact)
    reason: str


# The one tolerance table. Numbers are relative RMSE against float64, per tensor.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(1e-10, 2.0, 1e-12, "float64 vs float64: only summation order differs"),
    torch.float32: Tolerance(
        1e-4, 2.0, 1e-5,
        "fp32 eps 1.2e-7; a few hundred chained ops on tiny models stay near 1e-6 relative. 1e-4 leaves "
        "100x headroom for reduction-order changes (fusion, tiling) yet flags a 1% error in one op.",
    ),
    torch.bfloat16: Tolerance(
        5e-2, 3.0, 1e-2,
        "bf16 eps 7.8e-3 (8 mantissa bits): a correct bf16 forward+backward lands at 0.5-3% relative. "
        "Alone, only gross errors are visible; with a same-dtype baseline, 3x its error (dynamo's "
        "multiplier for low precision).",
    ),
    torch.float16: Tolerance(
        2e-2, 3.0, 2e-3,
        "fp16 eps 9.8e-4: 8x finer than bf16, so 2.5x tighter than the bf16 bound; same multiplier.",
    ),
}  # fmt: skip


def tolerance_for(dtype: torch.dtype) -> Tolerance:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


@dataclass(frozen=True)
class TensorParity:
    name: str
    ok: bool
    rel_rmse: float
    max_abs_err: float
    max_rel_err: float
    bound: float
    why: str = ""


@dataclass
class ParityReport:
    ok: bool
    tensors: list[TensorParity] = field(default_factory=list)

    @property
    def worst(self) -> TensorParity | None:
        bad = [t for t in self.tensors if not t.ok]
        pool = bad or self.tensors
        return max(pool, key=lambda t: t.rel_rmse / t.bound if t.bound else math.inf) if pool else None

    @property
    def max_abs_err(self) -> float:
        return max((t.max_abs_err for t in self.tensors), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((t.rel_rmse for t in self.tensors), default=0.0)

    def summary(self) -> str:
        w = self.worst
        if w is None:
            return "no tensors compared"
        head = "ok" if self.ok else f"{sum(not t.ok for t in self.tensors)}/{len(self.tensors)} tensors off"
        return f"{head}; worst {w.name}: rel_rmse {w.rel_rmse:.3g} (bound {w.bound:.3g}){' ' + w.why if w.why else ''}"


def rel_rmse(got: torch.Tensor, ref: torch.Tensor) -> float:
    """RMSE(got - ref) / RMS(ref), in float64 on cpu; 0/0 -> 0, x/0 -> inf."""
    g = got.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    err = torch.sqrt(torch.mean((g - r) ** 2)).item() if g.numel() else 0.0
    scale = torch.sqrt(torch.mean(r**2)).item() if r.numel() else 0.0
    if scale == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / scale


def compare_tensor(
    name: str,
    got: torch.Tensor,
    ref64: torch.Tensor,
    dtype: torch.dtype,
    baseline: torch.Tensor | None = None,
) -> TensorParity:
    tol = tolerance_for(dtype)
    if tuple(got.shape) != tuple(ref64.shape):
        return TensorParity(name, False, math.inf, math.inf, math.inf, tol.rel_rmse,
                            f"shape {tuple(got.shape)} != {tuple(ref64.shape)}")  # fmt: skip
    g = got.detach().to("cpu", torch.float64)
    r = ref64.detach().to("cpu", torch.float64)
    nan_g, nan_r = torch.isnan(g), torch.isnan(r)
    if not torch.equal(nan_g, nan_r):
        return TensorParity(name, False, math.inf, math.inf, math.inf, tol.rel_rmse, "NaN where reference has none")
    g, r = g[~nan_r], r[~nan_r]
    inf_r = torch.isinf(r)
    if not torch.equal(torch.isinf(g), inf_r) or not torch.equal(g[inf_r], r[inf_r]):
        return TensorParity(name, False, math.inf, math.inf, math.inf, tol.rel_rmse, "inf mismatch")
    g, r = g[~inf_r], r[~inf_r]
    diff = (g - r).abs()
    max_abs = diff.max().item() if diff.numel() else 0.0
    denom = r.abs().max().item() if r.numel() else 0.0
    max_rel = max_abs / denom if denom else (0.0 if max_abs == 0 else math.inf)
    err = rel_rmse(g, r)
    bound = tol.rel_rmse
    why = ""
    if baseline is not None:
        b = baseline.detach().to("cpu", torch.float64)[~nan_r][~inf_r] if baseline.shape == got.shape else None
        if b is not None:
            base_err = rel_rmse(b, r)
            bound = min(tol.rel_rmse, max(tol.multiplier * base_err, tol.floor))
            why = f"(baseline {base_err:.3g})"
    return TensorParity(name, err <= bound, err, max_abs, max_rel, bound, why)


def parity(
    got: Mapping[str, torch.Tensor],
    ref64: Mapping[str, torch.Tensor],
    dtype: torch.dtype,
    baseline: Mapping[str, torch.Tensor] | None = None,
) -> ParityReport:
    """Compare every named tensor; a tensor missing on either side is a failure."""
    out: list[TensorParity] = []
    for name, r in ref64.items():
        if name not in got:
            out.append(TensorParity(name, False, math.inf, math.inf, math.inf, 0.0, "missing"))
            continue
        out.append(compare_tensor(name, got[name], r, dtype, None if baseline is None else baseline.get(name)))
    for name in got.keys() - ref64.keys():
        out.append(TensorParity(name, False, math.inf, math.inf, math.inf, 0.0, "not in reference"))
    return ParityReport(all(t.ok for t in out), out)
