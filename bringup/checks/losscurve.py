"""Loss-curve divergence: a K-step training loss curve against the float64 reference curve.

Per step i: dev_i = |got_i - ref_i| / max(|ref_i|, tiny). The report gives the largest dev (the
"loss divergence" column) and the first step whose dev passes the bound (None if none does). The
bound comes from the tolerance table in checks/parity.py (`Tolerance.loss_rel`); with a trusted
same-dtype baseline curve it becomes `loss_multiplier` x the baseline's own largest deviation (never
below `loss_floor`): a backend may be as noisy as a trusted run in its dtype, not much more.
Non-finite losses where the reference is finite diverge at that step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bringup.checks.parity import tolerance_for

_TINY = 1e-12


@dataclass(frozen=True)
class CurveReport:
    ok: bool
    max_rel_dev: float  # largest per-step relative deviation from the reference (inf: non-finite)
    first_diverging_step: int | None  # first step over the bound, None when none is
    bound: float
    steps: int
    why: str = ""

    def summary(self) -> str:
        if self.ok:
            return f"loss curve ok over {self.steps} steps (max rel dev {self.max_rel_dev:.3g} <= {self.bound:.3g})"
        return (f"loss curve diverges at step {self.first_diverging_step}: max rel dev {self.max_rel_dev:.3g} "
                f"(bound {self.bound:.3g}){' ' + self.why if self.why else ''}")  # fmt: skip


def rel_devs(got: Sequence[float], ref: Sequence[float]) -> list[float]:
    out = []
    for g, r in zip(got, ref, strict=False):
        if not math.isfinite(r):
            out.append(0.0 if (g == r or (math.isnan(g) and math.isnan(r))) else math.inf)
        elif not math.isfinite(g):
            out.append(math.inf)
        else:
            out.append(abs(g - r) / max(abs(r), _TINY))
    return out


def curve_bound(dtype: torch.dtype, baseline_dev: float | None = None, trusted: bool = False) -> tuple[float, str]:
    tol = tolerance_for(dtype)
    if trusted:  # the trusted run itself: only a gross divergence says anything
        return max(tol.loss_rel, tol.gross), "(trusted run)"
    if baseline_dev is None or not math.isfinite(baseline_dev):
        return tol.loss_rel, ""
    b = max(tol.loss_multiplier * baseline_dev, tol.loss_floor)
    return b, f"(baseline max dev {baseline_dev:.3g})"


def compare_curves(
    got: Sequence[float],
    ref: Sequence[float],
    dtype: torch.dtype,
    baseline: Sequence[float] | None = None,
    trusted: bool = False,
) -> CurveReport:
    """Compare `got` with the float64 `ref` curve (and a trusted same-dtype `baseline` curve); with
    `trusted=True`, `got` is the trusted run itself and only a gross divergence fails."""
    n = min(len(got), len(ref))
    if len(got) != len(ref):
        return CurveReport(False, math.inf, n, 0.0, n, f"curve has {len(got)} steps, reference {len(ref)}")
    devs = rel_devs(got, ref)
    base_dev = max(rel_devs(baseline, ref), default=0.0) if baseline is not None else None
    bound, why = curve_bound(dtype, base_dev, trusted)
    first = next((i for i, d in enumerate(devs) if d > bound), None)
    mx = max(devs, default=0.0)
    return CurveReport(first is None, mx, first, bound, n, why)
