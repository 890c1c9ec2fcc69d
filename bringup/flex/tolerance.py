"""Attention parity: how far a FlexAttention result may be from the float64 dense reference. Every
(batch, kv-head group) slice of out, dq, dk and dv is judged on its own (a fault in one pair is not
diluted by the others).

bf16 / fp16 (and amp-bf16 / amp-fp16, whose attention runs in them), with a trusted run: the module rule
of bringup/checks/module_rule.py (the zoo's module check; its doc gives every number's reason), calling
its judge_module_tensor on each slice. FlexAttention is one module: out = attention(q, k, v) with its score_mod
and block mask, and its gradients dq, dk, dv. The three computations of it on the same inputs are the
device's, the float64 dense reference and the trusted run at the case precision (reference.py's
trusted_attention: the output as cpu eager FlexAttention computes it, fp32 scores and softmax; the
gradients rounding every step). The rule's checks, as the zoo has them:
 1. size: rel_rmse <= 3 x max(trusted rel_rmse, eps / sqrt(12), rounding everything once), the last
    measured on the case (dither.py: the float64 attention with every op result rounded once at random);
 2. bias (the scale along the reference); 3. the mean given the reference value; 4. the scale given
    the input (COVARIATE: a gradient's own input, q for the output); 5. scale and mean per block of the
    last two axes (rows, features); 6. the error along the input, row by row;
each against the trusted run's on the same inputs, with a floor of one rounding and 6 standard errors.
Flex adds two: LANES (below), check 5 again with the rows and the features taken modulo 16; and for the
output, flex/reweight.py's check, the error along what a reweighting of the probabilities by a function
of the score or of the key's position would do (the bugs of a score and softmax path look like noise to
checks 2-6 on random inputs; that doc says why). A failing slice names its check (RuleTensor.check:
size, bias, value, input, position, lanes, along, reweight).
Without a trusted run, or in fp32 / fp64, the rule below, unchanged.

fp32 with a trusted run: the rule of bringup/checks/parity.py, per tensor: the error's size against
float64 within a fudge factor of the trusted run's (the same dense attention computed in fp32 on cpu:
PyTorch's own FlexAttention tests judge "compiled error <= fudge x eager error" the same way), and its
direction (bias: the projection of the error on the reference) inside the envelope [0, trusted bias]
widened by the measured noise (the spread of the projection over chunks of the tensor). The fudge factor
is PyTorch's own for FlexAttention (test/inductor/test_flex_attention.py): fp32 10 ("we really are less
accurate than the float32 computation, likely due to the online softmax"); the size bound is at least
the fixed 1e-4 / 1e-3 below (the fp32 math path is ~exact, 1e-7, while a correct online-softmax kernel
lands near 1e-6). (Before 2026-12-04 bf16 / fp16 were judged so too, with fudge factors 2 for out and 4 for
gradients and a size floor of 2 eps; bench/flex_power.py's rows say what that missed.)

Without a trusted run (check_attention(..., trusted=None)), the fixed bounds below (rel_rmse), with the
fixed bias bound of checks/parity.py's table.

Fixed bounds, why each number (u = unit roundoff: fp32 6e-8, fp16 4.9e-4, bf16 3.9e-3):
 * out: fp32 1e-4 -- a correct fp32 kernel lands near 1e-6 (online softmax, fp32 accumulation).
   bf16 2e-2, fp16 5e-3: output rounding plus P rounded before P@V, with headroom.
 * gradients (dq, dk, dv): 4x the out bound for bf16/fp16 and 10x for fp32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import torch

from bringup.checks.module_rule import TensorFacts, TensorVerdict, judge_module_tensor, module_tolerance
from bringup.checks.parity import CompareHow, ParityReport, TensorParity, compare_tensor, judged_dtype, scale_floor
from bringup.flex.reweight import Coefs, judge_reweighting


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
class RuleTensor(TensorParity):
    """One slice of one tensor judged by the module rule (checks/module_rule.py): parity's figures, plus
    which of the rule's checks is the worst (`check`: size, bias, value, input, position, along) and its
    score (> 1 fails; the rule's, not parity's size-and-bias score)."""

    check: str = "size"  # size | bias | value | input | position | lanes | along | reweight
    rule_score: float = 0.0
    judged: bool = True

    @property
    def score(self) -> float:
        return self.rule_score


def worst(check: ParityReport) -> TensorParity | None:
    """The tensor flex's reason names: a failing one first, then the highest score (> 1 fails)."""
    if not check.tensors:
        return None
    return max(check.tensors, key=lambda t: (not t.ok, t.score))


def attn_reason(check: ParityReport) -> str:
    """flex's one-line verdict on a check_attention() report: 'ok: ...' or '<tensor> off: ...'; a tensor
    judged by the module rule names the check that failed (or came closest) and its figures."""
    w = worst(check)
    if w is None:
        return "nothing compared"
    if isinstance(w, RuleTensor):
        head = f"{w.name} off ({w.check})" if not check.ok else f"ok; closest {w.name} ({w.check}, score {w.score:.2g})"
        return f"{head}: {w.why}"
    head = "ok" if check.ok else f"{w.name} off"
    extra = f" ({w.why})" if w.why else ""
    return f"{head}: rel_rmse {w.rel_rmse:.3g} (bound {w.bound:.3g}), max_abs_err {w.max_abs_err:.3g}{extra}"


def failed_checks(check: ParityReport, limit: int = 20) -> list[dict[str, str]]:
    """What a case records of its failing tensors judged by the module rule: tensor, check, why."""
    return [
        {"tensor": t.name, "check": t.check, "why": t.why}
        for t in check.tensors
        if isinstance(t, RuleTensor) and not t.ok
    ][:limit]


# fudge factors x the trusted run's error (module doc): (out, grads); bf16 / fp16 go by the module rule
FUDGE: Mapping[torch.dtype, tuple[float, float]] = MappingProxyType(
    {torch.float64: (10.0, 10.0), torch.float32: (10.0, 10.0)}
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


def check_attention(
    got: dict[str, torch.Tensor],
    ref: dict[str, torch.Tensor],
    dtype: Any,
    trusted: dict[str, torch.Tensor] | None = None,
    dithered: Sequence[dict[str, torch.Tensor]] = (),
    inputs: dict[str, torch.Tensor] | None = None,
    reweights: Sequence[dict[str, Coefs]] = (),
) -> ParityReport:
    """Every tensor of `ref` (float64) against `got`, one (batch, kv-head group) slice at a time (dim 0 of
    the stacked tensors: a fault in one pair is judged in that pair, not diluted by the others). In bf16 /
    fp16 with `trusted` (the same attention at the case precision): the module rule (module doc;
    `dithered`: flex/dither.py's draws, `inputs`: q, k, v stacked like the gradients, the covariates,
    `reweights`: flex/reweight.py's coefficients of the output per slice, "device" and "trusted"); in
    fp32 with `trusted`, checks/parity.py's rule with the FUDGE factors and the fixed fp32 floor; without
    it, the fixed bounds + parity's fixed bias bound. The report is checks/parity.py's ParityReport (its
    tensors TensorParity, RuleTensor under the module rule, named out[i], dq[i], ...); `attn_reason()`
    words flex's verdict."""
    dt = judged_dtype(dtype)
    if trusted is not None and dt in MODULE_RULE_DTYPES:
        return _module_rule(got, ref, dt, trusted, dithered, inputs or {}, reweights)
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


def _check_one(
    label: str,
    g: torch.Tensor,
    r: torch.Tensor,
    b: torch.Tensor | None,
    dt: torch.dtype,
    floor: float,
    kind: str | None = None,
) -> TensorParity:
    kind = kind or label
    fixed = check_tensor(kind, g, r, dt)
    fixed = replace(fixed, name=label)
    if not fixed.ok and not math.isfinite(fixed.rel_rmse):
        return fixed  # shape, non-finite
    fudge = FUDGE.get(dt, (10.0, 10.0))[0 if kind == "out" else 1]
    t = compare_tensor(label, g, r, dt, b, CompareHow(scale_floor=floor, multiplier=fudge))
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
    return replace(
        t,
        name=label,
        ok=ok,
        bound=bound,
        why=why,
        max_abs_err=fixed.max_abs_err,
        max_abs_over_peak=fixed.max_abs_over_peak,
    )


# ---- bf16 / fp16: the module rule ----------------------------------------------------------------------
# the precisions judged by the module rule (module doc); fp32 keeps parity's rule with its fixed floor
MODULE_RULE_DTYPES = (torch.bfloat16, torch.float16)
# each tensor's covariate for the rule's checks 4 and 6 (conditional scale given the input, the error along
# the input row by row): the input it is elementwise aligned with. A gradient's own input (the zoo's rule);
# for the output, q: out has q's layout, row for row (q row i makes out row i)
COVARIATE: Mapping[str, str] = MappingProxyType({"out": "q", "dq": "q", "dk": "k", "dv": "v"})
# tensors made per q head (out, dq: (rep, S, D) per slice, each head's rows its own): judged per slice and per
# q head, so that one head's fault (a score_mod's term for one head index, one head's scale) is not diluted by
# the rep - 1 heads that share its kv head (16/2 heads: 8 per slice). dk / dv sum over the heads: per slice.
Q_SIDE = ("out", "dq")


def _module_rule(
    got: dict[str, torch.Tensor],
    ref: dict[str, torch.Tensor],
    dt: torch.dtype,
    trusted: dict[str, torch.Tensor],
    dithered: Sequence[dict[str, torch.Tensor]],
    inputs: dict[str, torch.Tensor],
    reweights: Sequence[dict[str, Coefs]],
) -> ParityReport:
    """judge_module_tensor on every slice of every tensor; numerically zero is judged among tensors of one kind
    (the output among outputs, gradients among gradients), as the zoo's module check does."""
    floors = {
        kind: scale_floor([r for n, r in ref.items() if (n == "out") == (kind == "out")], dt)
        for kind in ("out", "grad")
    }
    out: list[TensorParity] = []
    for name, r in ref.items():
        g, b = got.get(name), trusted.get(name)
        if g is None or b is None:
            why = "missing" if g is None else "no trusted run"
            out.append(TensorParity(name, False, math.inf, math.inf, math.inf, bound_for(name, dt), why))
            continue
        if tuple(g.shape) != tuple(r.shape) or r.dim() < 2:
            out.append(_rule_tensor(name, name, _Judged(g, r, b), dt, 0.0))
            continue
        x = inputs.get(COVARIATE.get(name, ""))
        floor = floors["out" if name == "out" else "grad"]
        for i in range(r.shape[0]):
            label = name if r.shape[0] < 2 else f"{name}[{i}]"
            cov = x[i] if x is not None and tuple(x.shape) == tuple(r.shape) else None
            draws = [d[name][i] for d in dithered if name in d and tuple(d[name].shape) == tuple(r.shape)]
            rw = reweights[i] if name == "out" and i < len(reweights) else {}
            t = _rule_tensor(label, name, _Judged(g[i], r[i], b[i], cov, draws), dt, floor)
            out.append(_with_reweighting(t, rw, dt))
            if name not in Q_SIDE or r.dim() != 4 or r.shape[1] < 2:
                continue
            for h in range(r.shape[1]):  # each q head alone: a head's own fault is not diluted by the others'
                hc = None if cov is None else cov[h]
                one = _Judged(g[i][h], r[i][h], b[i][h], hc, [d[h] for d in draws])
                th = _rule_tensor(f"{label}.h{h}", name, one, dt, floor)
                out.append(_with_reweighting(th, rw, dt, f".h{h}"))
    return ParityReport(all(t.ok for t in out), out)


def _with_reweighting(t: RuleTensor, coefs: dict[str, Coefs], dt: torch.dtype, head: str = "") -> RuleTensor:
    """The output's slice (or one q head of it: head ".h<j>") with flex/reweight.py's check: the worse of the
    two names the check."""
    dev, tr = coefs.get(f"device{head}"), coefs.get(f"trusted{head}")
    if dev is None or tr is None or not t.judged:
        return t
    tol = module_tolerance(dt)
    w = judge_reweighting(dev, tr, tol.floor, tol.z)
    if w.score <= t.score:
        return t
    why = f"{w.summary()}; rel_rmse {t.rel_rmse:.3g}"
    return replace(t, ok=t.ok and w.score <= 1.0, why=why, check="reweight", rule_score=w.score)


@dataclass(frozen=True)
class _Judged:
    """One slice of one tensor as the rule judges it: the device's (g), the float64 reference (r), the
    trusted run (b), the covariate (the input it may scale with) and the dithered draws."""

    g: torch.Tensor
    r: torch.Tensor
    b: torch.Tensor
    cov: torch.Tensor | None = None
    draws: list[torch.Tensor] = field(default_factory=list)


def _rule_tensor(label: str, kind: str, t: _Judged, dt: torch.dtype, floor: float) -> RuleTensor:
    """One slice through module_rule.judge_module_tensor, once as laid out and once with its last two axes in lane
    order (LANES), with the element-wise figures of the fixed check."""
    g, r, b, cov, draws = t.g, t.r, t.b, t.cov, t.draws
    v: TensorVerdict = judge_module_tensor(
        label, g, r, b, dt, TensorFacts(covariate=cov, scale_floor=floor, dithered=draws)
    )
    fixed = check_tensor(kind, g, r, dt) if tuple(g.shape) == tuple(r.shape) else None
    why = v.summary().removeprefix(f"{label}: ")
    check = v.check
    lanes = _lane_verdict(label, g, r, b, dt, cov, floor, draws) if fixed is not None and v.judged else None
    if lanes is not None and lanes.check == "position" and lanes.score > v.score:
        check, why = "lanes", lanes.summary().removeprefix(f"{label}: ").replace("one block", "one lane")
        v = lanes
    return RuleTensor(
        label,
        v.ok,
        v.rel_rmse,
        math.inf if fixed is None else fixed.max_abs_err,
        math.inf if fixed is None else fixed.max_abs_over_peak,
        v.bound,
        why,
        numel=v.numel,
        check=check,
        rule_score=v.score,
        judged=v.judged,
    )


# Lanes: the rule's check 5 (scale and mean per block of the last two axes) again with each of those axes
# reordered by position modulo LANES (all of residue 0, then residue 1, ...), so that its 16 blocks are the
# 16 residues. Rounding depends on a position neither by block nor by residue; a kernel bug in one lane of
# a vector or a warp (one of every 8 or 16 rows or features: a remainder mask, a shuffle, an unrolled
# loop's last iteration) does, and check 5's contiguous blocks see it spread over every block. 16: check
# 5's most blocks (module_rule.MAX_BINS), so one lane is one block; a pattern of period 8 is two lanes.
LANES = 16


def _lane_axes(shape: tuple[int, ...]) -> list[int]:
    """Which of the last two axes have lanes: a length divisible by LANES, at least 2 x LANES."""
    return [a for a in (-1, -2) if len(shape) >= -a and shape[a] >= 2 * LANES and shape[a] % LANES == 0]


def _lane_order(t: torch.Tensor) -> torch.Tensor:
    """t with each of its lane axes reordered by position modulo LANES."""
    for axis in _lane_axes(tuple(t.shape)):
        n = t.shape[axis]
        t = t.index_select(axis, torch.arange(n).view(n // LANES, LANES).T.reshape(-1))
    return t


def _lane_verdict(
    label: str,
    g: torch.Tensor,
    r: torch.Tensor,
    b: torch.Tensor,
    dt: torch.dtype,
    cov: torch.Tensor | None,
    floor: float,
    draws: list[torch.Tensor],
) -> TensorVerdict | None:
    """judge_module_tensor on the lane-ordered slice (None when neither axis can be); only its position check is
    new (sizes, scales and means pooled or by value are the same numbers in another order)."""
    if not _lane_axes(tuple(r.shape)):
        return None
    lo = _lane_order
    return judge_module_tensor(
        label,
        lo(g),
        lo(r),
        lo(b),
        dt,
        TensorFacts(covariate=None if cov is None else lo(cov), scale_floor=floor, dithered=[lo(d) for d in draws]),
    )
