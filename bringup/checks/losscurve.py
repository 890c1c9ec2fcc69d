"""Loss-curve divergence: a K-step training loss curve against the float64 reference curve.

Per step i: dev_i = |got_i - ref_i| / max(|ref_i|, tiny). The report gives the largest dev (the
"loss divergence" column) and the first step whose dev passes its bound (None if none does). Bounds
come from the tolerance table in checks/parity.py: with a trusted same-dtype baseline curve, step i
may deviate `loss_multiplier` x the most the baseline deviated up to step i (never below
`loss_floor`): a backend may be as noisy as a trusted run in its dtype, not much more. With `noise`
(the trusted run and its float64 reference under other seeds), the trusted deviation at step i is the
largest of all those runs', so one lucky trusted curve does not make the bound too tight. Without a
trusted curve, `loss_rel`. A systematic error that per-tensor parity of step 0 cannot see (a dropped
bias whose init is zero, a perturbation of a term that only grows with training) shows here as a
deviation that keeps growing past the trusted runs'. Non-finite losses where the reference is finite
diverge at that step.

Chaos: when the trusted run's own deviation grows by more than CHAOTIC over the steps, rounding noise
is being amplified so much that two correct runs part by amounts no bound can tell from a bug; such a
curve is reported (`chaotic`) but not judged. The per-tensor parity of step 0 is judged regardless.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bringup.checks.parity import judged_dtype, tolerance_for

_TINY = 1e-12
CHAOTIC = 100.0


@dataclass(frozen=True)
class CurveReport:
    ok: bool
    max_rel_dev: float  # largest per-step relative deviation from the reference (inf: non-finite)
    first_diverging_step: int | None  # first step over its bound, None when none is
    bound: float  # the bound at the first diverging step (else the largest bound)
    steps: int
    why: str = ""
    chaotic: bool = False  # the trusted run's deviation grew past CHAOTIC: reported, not judged

    def summary(self) -> str:
        if self.chaotic:
            return f"loss curve not judged: {self.why} (max rel dev {self.max_rel_dev:.3g})"
        if self.ok:
            return f"loss curve ok over {self.steps} steps (max rel dev {self.max_rel_dev:.3g} <= {self.bound:.3g})"
        return (
            f"loss curve diverges at step {self.first_diverging_step}: max rel dev {self.max_rel_dev:.3g} "
            f"(bound {self.bound:.3g}){' ' + self.why if self.why else ''}"
        )


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


def amplification(base_devs: Sequence[float], dtype: Any) -> float:
    """How much the trusted run's deviation grew over the steps (>= 1), from its first step's
    deviation or the dtype's eps, whichever is larger."""
    if not base_devs or not all(math.isfinite(d) for d in base_devs):
        return math.inf
    start = max(base_devs[0], torch.finfo(judged_dtype(dtype)).eps)
    return max(1.0, max(base_devs) / start)


def compare_curves(
    got: Sequence[float],
    ref: Sequence[float],
    dtype: Any,
    baseline: Sequence[float] | None = None,
    trusted: bool = False,
    noise: Sequence[tuple[Sequence[float], Sequence[float]]] = (),
) -> CurveReport:
    """Compare `got` with the float64 `ref` curve (and a trusted same-dtype `baseline` curve); with
    `trusted=True`, `got` is the trusted run itself and only a gross divergence fails."""
    tol = tolerance_for(dtype)
    n = min(len(got), len(ref))
    if len(got) != len(ref):
        return CurveReport(False, math.inf, n, 0.0, n, f"curve has {len(got)} steps, reference {len(ref)}")
    devs = rel_devs(got, ref)
    mx = max(devs, default=0.0)
    if trusted:
        bounds = [max(tol.loss_rel, tol.gross)] * n
        why = "(trusted run)"
    elif baseline is None or len(baseline) != n:
        bounds = [tol.loss_rel] * n
        why = ""
    else:
        base = rel_devs(baseline, ref)
        others = [rel_devs(t, r) for t, r in noise if len(t) == n and len(r) == n]
        others = [o for o in others if all(math.isfinite(d) for d in o)]
        amp = amplification(base, judged_dtype(dtype))
        if amp > CHAOTIC and all(math.isfinite(d) for d in devs):
            why = f"chaotic training: the trusted run's own deviation grew {amp:.0f}x in {n} steps"
            return CurveReport(True, mx, None, math.inf, n, why, chaotic=True)
        running, bounds = 0.0, []
        for i, d in enumerate(base):
            running = max(running, d, *(o[i] for o in others))
            bounds.append(max(tol.loss_multiplier * running, tol.loss_floor))
        more = f", {len(others)} more seed(s)" if others else ""
        why = f"(baseline max dev {max(base, default=0.0):.3g}{more})"
    first = next((i for i, (d, b) in enumerate(zip(devs, bounds, strict=True)) if d > b), None)
    bound = bounds[first] if first is not None else max(bounds, default=0.0)
    return CurveReport(first is None, mx, first, bound, n, why)
