"""Numerical parity of device results against a float64 CPU reference.

Starting point: the dynamo harness's `same()` (torch/_dynamo/utils.py): allclose with a tolerance,
else `rmse(fp64, res) <= multiplier * rmse(fp64, ref) + tol / 10`. We keep its float64 golden and its
"compare against how wrong a trusted run is" idea, but drop the allclose-first shortcut and the
additive tol/10 term: on tiny random-init models both let a 1% error in one operator through.

Each named tensor (loss, logits, every grad) is judged on its size and its direction; failing either
fails it (and, with measured noise, the run as a whole on its mean size):

1. Size of the error: rel_rmse = RMSE(got - ref64) / RMS(ref64), scale-free. With a trusted run at the
   same precision (cpu eager; `baseline`), the bound is `multiplier` x E, where E is the largest error a
   trusted run showed on that tensor: the baseline's own and, with `noise`, the trusted run's under
   other seeds (the idea of PyTorch's FlexAttention tests: compiled error <= fudge x eager error), never
   below `floor` (2 eps in low precision: two correct implementations may round one result apart by
   up to an ulp each; 1e-4 in fp32, where reduction order, not rounding, sets the error: see the
   table). Alone (no trusted run) it must stay under the precision's fixed `rel_rmse`.
2. Direction of the error (systematic bias): bias = <got - ref64, ref64> / <ref64, ref64>, the
   least-squares scale of the error along the reference. Rounding noise is nearly orthogonal to the
   reference; an operator whose output is off by a factor (1 + d) is not: every weight that operator
   feeds gets a gradient scaled by about (1 + d), so some grad shows bias ~ d. In bf16 a 1% error
   hides inside the rounding noise by size (check 1) but not by direction. With a trusted run, a
   correct backend's bias lies in the envelope [min(0, b_t, mean b_s), max(0, b_t, mean b_s)] (b_t: the
   trusted run's bias, b_s: the trusted biases under other seeds; a run more accurate than the trusted
   one, like inductor keeping bf16 intermediates in fp32, lands between the trusted run and 0), widened
   by a margin m = `bias_floor` + `bias_z` x sqrt(se^2 + sd_s^2): se is the standard error of the
   projection of (got - trusted) (from the spread over contiguous chunks of the tensor, so correlated
   noise counts) and sd_s the spread of the trusted bias over the seeds (how much a correct run's bias
   moves at this precision on this tensor, measured, not assumed). bias_floor is a quarter of an ulp
   (eps / 4) in low precision: correct backends round at other points than cpu eager (fused kernels,
   fp32 intermediates), which moves a tensor's bias systematically by up to a few tenths of a percent,
   and no seed spread of cpu eager measures that (float16/bfloat16 reasons); in fp32 it is 1e-5,
   the reduction order's share (the trusted seeds all use cpu eager's order, so their spread cannot
   measure a backend that reorders: see float32's reason). Alone: |bias| <= `bias` + `bias_z` se.

3. The whole run (with trusted runs and `noise`, bf16/fp16): the geometric mean over tensors of rel_rmse / the
   trusted runs' RMS rel_rmse on that tensor must stay <= AGG_FUDGE: a run that rounds more than the
   precision does everywhere (a matmul accumulating in bf16) while each tensor stays in its own 3x.

The trusted run's noise (`noise`, from trusted_noise()) is measured, not assumed: the zoo repeats the
trusted run and its float64 reference under more seeds (zoo/run.py: measure_noise), and runs the case's
own float64 step with every op result rounded once at random at the run's precision (`Noise.dither`: a
correct device that rounds at other points than cpu eager; its error joins the size bound's samples).

A reference that is zero in exact arithmetic (a key bias's gradient under softmax cancels exactly, a router
weight's under a renormalised top-k, so what any run computes is rounding residue) is measured, not guessed from
its size: `exact_zeros` compares the float64 reference with a twin of it, the same float64 computation with every
op result perturbed by TWIN_DITHER (another rounding, magnified past any inside the reference); a true zero is
residue in both and the twin's dwarfs the reference's, a real value however small moves by TWIN_DITHER of itself
(`zeros`; without a twin only an exactly-zero reference counts). Such a tensor is measured against the scale floor
(max(FLOOR_REL, FLOOR_EPS x eps) x the median RMS of all compared tensors: the size of the terms that cancel),
without a bias check; its size floor is the precision's size floor at that scale, not at the floor. Every other
tensor, however small, is judged by the rule above, its direction included: a device that zeroes a small real
gradient (a bias at 1% of the median) is off by -1 along it.
`trusted=True` judges the trusted run itself (cpu eager in the run dtype) for gross errors only (`gross`).
A NaN/inf where the reference is finite, a shape mismatch or a missing tensor always fails.
The numbers, each with its reason, are in TOLERANCES; tests/checks/test_parity.py proves the rule on
tiny models: a 1.01 scale of one aten op kind (mm, softmax, norm, activation, add, sdpa) is flagged,
eager / aot_eager / inductor are not, in fp32, amp-bf16 and bf16; bench/verdict_power.py measures it
over 30 models and 7 perturbation families (docs/zoo.md).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from bringup.precision import parse_precision

BIAS_CHUNKS = 16  # the bias' standard error is estimated from this many contiguous chunks
# Whole-run size check (with trusted runs): the geometric mean over tensors of rel_rmse / the trusted
# runs' RMS rel_rmse on that tensor. Correct backends sit at 0.7-1.05 (inductor, keeping intermediates
# in fp32, below 1); a run that is on average AGG_FUDGE x further from float64 than the trusted runs on
# every tensor rounds more than the precision does (a matmul accumulating in bf16 measures ~2.0).
AGG_FUDGE = 1.5
# ...in low precision only: there a correct run's error is rounding at the same points as the trusted
# run's; in fp32 it is reduction order, which a correct backend may change (float32's reason).
AGG_DTYPES = (torch.bfloat16, torch.float16)
AGG_MIN_TENSORS = 8  # fewer tensors: the mean of their log ratios is too noisy to judge
# a zero reference's error is measured against max(FLOOR_REL, FLOOR_EPS x eps(dtype)) x the median RMS (the scale
# of the terms that cancel in it)
FLOOR_REL = 1e-3
FLOOR_EPS = 10.0
# the twin of the float64 reference: every op result x (1 + TWIN_DITHER x N(0, 1)), whatever its dtype. Above
# float32's eps (1.2e-7): the "float64" reference holds some values in fp32 where the model's code casts them (a
# norm's statistics, rotary angles, the loss's log-softmax), so a true zero's residue there is fp32's, and the
# twin's must dwarf it; far below bf16's eps and any real value's own size: a real value moves by TWIN_DITHER
# times its conditioning, so only a value ~1e-5 of the terms that cancel in it would be taken for zero
TWIN_DITHER = 2.0**-16


@dataclass(frozen=True)
class Tolerance:
    rel_rmse: float  # max RMSE(got - ref64) / RMS(ref64) with no trusted run to compare with
    multiplier: float  # with a trusted run: allowed multiple of the largest trusted rel_rmse (the fudge)
    floor: float  # with a trusted run: rel_rmse below this always passes (2 eps: one ulp each way)
    reason: str
    bias: float = 1e-3  # with no trusted run: |bias| allowed beyond its noise (module doc)
    bias_z: float = 4.0  # noise allowance of the bias, in standard errors
    bias_floor: float = 0.0  # with a trusted run: margin added to the measured noise (eps / 4)
    gross: float = 0.5  # the trusted run itself (cpu eager): rel_rmse above this is garbage
    loss_rel: float = 1e-3  # loss curve: max per-step |got - ref| / |ref| with no baseline curve
    loss_multiplier: float = 5.0  # with a baseline curve: allowed multiple of its deviation so far
    loss_floor: float = 1e-4  # with a baseline curve: deviations below this always pass


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


# The one tolerance table. With a trusted run (the zoo, flex, smoke with a baseline) only `multiplier`,
# `floor` (2 eps), `bias_z` and `bias_floor` (eps / 4; fp32 1e-5) apply: every other allowance is the trusted
# run's own error, measured per tensor. rel_rmse / bias / loss_rel are for comparisons with no trusted
# run (a single op against float64). gross judges the trusted run itself. loss_*: relative per-step
# deviation of the loss curve. Figures: docs/zoo.md (bench/verdict_power.py measures power and false
# failures over the quick zoo + 24 causal LMs in fp32, amp-bf16 and bf16).
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(
        1e-10, 3.0, 2 * _eps(torch.float64), "float64 vs float64: only summation order differs",
        bias=1e-11, bias_floor=_eps(torch.float64) / 8, gross=1e-8, loss_rel=1e-10, loss_floor=1e-12,
    ),
    torch.float32: Tolerance(
        1e-4, 3.0, 1e-4,
        "fp32 eps 1.2e-7: correct runs of tiny models sit at rel_rmse 1e-7..4e-5 against float64 (the "
        "high end: ill-conditioned tensors, BatchNorm over a tiny batch). fp32 error is dominated by "
        "the order of reductions, which a correct backend may change (fusion, tiling): inductor's "
        "BatchNorm bias grad on timm test_resnet is 4x eager's (2.7e-5 vs 6.6e-6), so the trusted "
        "run's error does not bound it; the size floor stays 1e-4 (the largest correct-run error over "
        "the 181 causal types with inductor is 4e-5), 3x the largest trusted error above it. A 1% op "
        "error reaches >= 2e-4 by size and 1e-2 by direction. Alone: 1e-4, bias 1e-4. gross 1e-2: the "
        "cpu fp32 run is garbage past 1%. Loss curves: correct runs "
        "deviate up to ~1.3e-5 over 3 SGD steps; 5x the trusted run's deviation so far, floor 1e-4. "
        "Direction: the bias of a correct backend that reorders reductions differs from cpu eager's by "
        "~1-3e-7 (inductor over the hub-top catalogue: T5, ViT, ConvNeXt, wav2vec2 grads, 1.04-1.16x "
        "past a margin measured from same-order seeds), so the bias margin has a floor of 1e-5, a "
        "tenth of the size floor: a 0.1% scale error of one op still moves the grads it feeds by ~1e-3.",
        bias=1e-4, bias_z=4.0, bias_floor=1e-5, gross=1e-2, loss_rel=1e-4,
        loss_multiplier=5.0, loss_floor=1e-4,
    ),
    torch.bfloat16: Tolerance(
        5e-2, 3.0, 2 * _eps(torch.bfloat16),
        "bf16 eps 7.8e-3 (8 mantissa bits): a correct bf16 forward+backward lands at 0.5-3% relative, "
        "up to 30% on ill-conditioned tensors (MoE routing flips, BatchNorm over 2 samples). By size "
        "only gross errors are visible: 3x the largest trusted error (dynamo's low-precision "
        "multiplier); alone, 5e-2. By direction, against the trusted runs' measured bias spread (module "
        "doc). gross 0.5: the trusted cpu bf16 run itself can be 30% off on BatchNorm grads. Loss "
        "curves: bf16 rounding moves tiny models' losses up to ~1e-2 per step; 5e-2 alone, 5x the "
        "trusted runs' deviation so far with them (floor 5e-3). The direction margin's floor is a "
        "quarter ulp (eps / 4 = 2e-3): correct backends round at other points than cpu eager and so "
        "differ from it by systematic biases no seed spread measures (inductor, amp-bf16: +0.3% on "
        "every layer-0 weight grad of olmo, -0.9% on qwen2_moe's 64-element shared-expert gate grad; "
        "an eps / 8 floor flagged the latter, 2026-12-01).",
        bias=3e-3, bias_z=4.0, bias_floor=_eps(torch.bfloat16) / 4, gross=0.5, loss_rel=5e-2,
        loss_multiplier=5.0, loss_floor=5e-3,
    ),
    torch.float16: Tolerance(
        2e-2, 3.0, 2 * _eps(torch.float16),
        "fp16 eps 9.8e-4: 8x finer than bf16, so the fixed (no trusted run) bounds tightened ~2.5x (not "
        "8x: fp16's narrow range adds overflow-avoiding rescales); same multiplier and noise rule.",
        bias=1.5e-3, bias_z=4.0, bias_floor=_eps(torch.float16) / 4, gross=0.25, loss_rel=2e-2,
        loss_multiplier=5.0, loss_floor=2e-3,
    ),
}  # fmt: skip


def judged_dtype(precision: Any) -> torch.dtype:
    """The dtype whose tolerances judge a run: a torch.dtype as is; a Precision (or its name) by its
    compute dtype (amp-bf16 is judged as bf16: its matmuls round to bf16, its fp32 params don't help)."""
    if isinstance(precision, torch.dtype):
        return precision
    if isinstance(precision, str):
        precision = parse_precision(precision)
    return precision.compute_dtype


def tolerance_for(dtype: Any) -> Tolerance:
    return TOLERANCES.get(judged_dtype(dtype), TOLERANCES[torch.float32])


@dataclass(frozen=True)
class TensorParity:
    name: str
    ok: bool
    rel_rmse: float
    max_abs_err: float
    max_abs_over_peak: float  # max |got - ref64| / max |ref64|: the worst element against the tensor's scale
    bound: float
    why: str = ""
    bias: float = 0.0  # projection of the error on the reference (signed fraction of the reference)
    bias_lo: float = -math.inf  # the bias a correct run may have: [bias_lo, bias_hi] (margin included)
    bias_hi: float = math.inf
    margin: float = math.inf  # the noise margin inside [bias_lo, bias_hi] (its unit for the score)
    numel: int = 0

    @property
    def biased(self) -> bool:
        return not (self.bias_lo <= self.bias <= self.bias_hi)

    @property
    def score(self) -> float:
        """How close to failing: > 1 fails. max(size ratio, bias distance from the envelope's core in
        units of the margin, + 1 at the margin's edge)."""
        size = self.rel_rmse / self.bound if self.bound else (0.0 if self.rel_rmse == 0 else math.inf)
        if not math.isfinite(self.margin) or self.margin <= 0:
            return size
        core_lo, core_hi = self.bias_lo + self.margin, self.bias_hi - self.margin
        out = max(core_lo - self.bias, self.bias - core_hi, 0.0)
        return max(size, out / self.margin)


@dataclass
class ParityReport:
    ok: bool
    tensors: list[TensorParity] = field(default_factory=list)
    agg: float | None = None  # geometric mean of rel_rmse / trusted rel_rmse over tensors (None: not judged)
    agg_bound: float = AGG_FUDGE

    @property
    def agg_ok(self) -> bool:
        return self.agg is None or self.agg <= self.agg_bound

    @property
    def worst(self) -> TensorParity | None:
        bad = [t for t in self.tensors if not t.ok]
        pool = bad or self.tensors
        return max(pool, key=lambda t: t.score) if pool else None

    @property
    def max_abs_err(self) -> float:
        return max((t.max_abs_err for t in self.tensors), default=0.0)

    @property
    def rel_rmse(self) -> float:
        """The largest rel_rmse over the tensors."""
        return max((t.rel_rmse for t in self.tensors), default=0.0)

    @property
    def max_rel_err(self) -> float:
        """What suites record as the catalogued metric `max_rel_err`: the largest rel_rmse (relative RMS
        error) over the tensors, not an element-wise ratio (that is `max_abs_over_peak`)."""
        return self.rel_rmse

    @property
    def max_abs_over_peak(self) -> float:
        """The largest max |got - ref64| / max |ref64| over the tensors (the metric `max_abs_over_peak`)."""
        return max((t.max_abs_over_peak for t in self.tensors), default=0.0)

    @property
    def score(self) -> float:
        """The worst tensor's score, or the whole-run size ratio over its bound (> 1: fails)."""
        agg = self.agg / self.agg_bound if self.agg is not None else 0.0
        return max(max((t.score for t in self.tensors), default=0.0), agg)

    def summary(self) -> str:
        w = self.worst
        if w is None:
            return "no tensors compared"
        if all(t.ok for t in self.tensors) and not self.agg_ok:
            return (
                f"every tensor within its own bound, but on average {self.agg:.3g}x further from float64 than "
                f"the trusted runs over {len(self.tensors)} tensors (bound {self.agg_bound:.3g}x)"
            )
        head = "ok" if self.ok else f"{sum(not t.ok for t in self.tensors)}/{len(self.tensors)} tensors off"
        if not w.ok and w.rel_rmse <= w.bound and w.biased:
            what = (
                f"bias {w.bias:+.3g} outside [{w.bias_lo:+.3g}, {w.bias_hi:+.3g}] "
                f"(noise margin {w.margin:.3g}; rel_rmse {w.rel_rmse:.3g})"
            )
        else:
            what = f"rel_rmse {w.rel_rmse:.3g} (bound {w.bound:.3g})"
        return f"{head}; worst {w.name}: {what}{' ' + w.why if w.why else ''}"


def rms(t: torch.Tensor) -> float:
    x = t.detach().to("cpu", torch.float64)
    return torch.sqrt(torch.mean(x**2)).item() if x.numel() else 0.0


def rel_rmse(got: torch.Tensor, ref: torch.Tensor, floor: float = 0.0) -> float:
    """RMSE(got - ref) / max(RMS(ref), floor), in float64 on cpu; 0/0 -> 0, x/0 -> inf."""
    g = got.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    err = torch.sqrt(torch.mean((g - r) ** 2)).item() if g.numel() else 0.0
    scale = max(rms(r), floor)
    if scale == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / scale


def bias(got: torch.Tensor, ref: torch.Tensor) -> float:
    """<got - ref, ref> / <ref, ref>: how much of the reference itself the error contains."""
    g = got.detach().to("cpu", torch.float64).flatten()
    r = ref.detach().to("cpu", torch.float64).flatten()
    rr = torch.dot(r, r).item() if r.numel() else 0.0
    if rr == 0.0:
        return 0.0
    return torch.dot(g - r, r).item() / rr


def bias_stderr(err: torch.Tensor, ref: torch.Tensor, fallback: float) -> float:
    """Standard error of bias(): split the flattened tensor into BIAS_CHUNKS contiguous chunks, take
    each chunk's projection of `err` on `ref`, and the weighted spread of those (weights <ref_k, ref_k>).
    Contiguous chunks keep correlated neighbours (a row of a weight grad) together, so the spread
    measures the noise the projection really has. Tensors too small to split use `fallback`
    (rel_rmse / sqrt(n): the independent-noise estimate)."""
    n = err.numel()
    k = BIAS_CHUNKS
    if n < 2 * k:
        return fallback
    m = n // k * k
    rk = ref[:m].reshape(k, -1)
    ek = err[:m].reshape(k, -1)
    w = (rk * rk).sum(1)
    total = w.sum().item()
    if total == 0.0:
        return fallback
    proj = (ek * rk).sum(1)
    a = proj.sum().item() / total
    ak = proj / w.clamp_min(1e-300)
    wn = w / total
    var = ((wn**2) * (ak - a) ** 2)[w > 0].sum().item() * k / (k - 1)
    return math.sqrt(var)


def _bad(name: str, why: str, bound: float) -> TensorParity:
    return TensorParity(name, False, math.inf, math.inf, math.inf, bound, why)


@dataclass(frozen=True)
class Noise:
    """How far trusted runs at this precision were from float64 on one tensor, under other seeds (the
    same model built from another seed, on other batches): per seed, rel_rmse and bias. `dither`: the
    rel_rmse of the case's own float64 step with every op result rounded once at random at the run's
    precision (dither_noise()): what a correct device that rounds at other points than cpu eager does to
    the tensor, its conditioning measured (a gradient that nearly cancels magnifies the rounding of the
    terms it sums, whatever cpu eager's own luck). Sizes only: rounding at random has no direction."""

    rel_rmse: tuple[float, ...] = ()
    bias: tuple[float, ...] = ()
    dither: tuple[float, ...] = ()


def exact_zeros(ref: Mapping[str, torch.Tensor], twin: Mapping[str, torch.Tensor]) -> frozenset[str]:
    """The tensors of `ref` (float64) that are zero in exact arithmetic: exactly zero, or no larger than the RMS by
    which its twin (the same float64 computation, every op result perturbed by TWIN_DITHER) moves them (module
    doc). A tensor the twin lacks is zero only if exactly zero."""
    out: set[str] = set()
    for name, r in ref.items():
        r64 = r.detach().to("cpu", torch.float64).flatten()
        size = rms(r64[torch.isfinite(r64)])
        t = twin.get(name)
        if size == 0.0:
            out.add(name)
        elif t is not None and tuple(t.shape) == tuple(r.shape):
            t64 = t.detach().to("cpu", torch.float64).flatten()
            keep = torch.isfinite(r64) & torch.isfinite(t64)
            if size <= rms(t64[keep] - r64[keep]):
                out.add(name)
    return frozenset(out)


def _is_zero(name: str, r: torch.Tensor, zeros: Collection[str]) -> bool:
    return name in zeros or rms(r) == 0.0


def trusted_noise(
    samples: Iterable[tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]]],
    dtype: Any,
    zeros: Collection[str] = (),
) -> dict[str, Noise]:
    """Per tensor name, the error of each (trusted run, its float64 reference) pair: what correct runs
    at this precision look like on that tensor. Non-finite references are left out; one zero in exact
    arithmetic (`zeros`: exact_zeros) is measured against the scale floor, not by direction."""
    dt = judged_dtype(dtype)
    rels: dict[str, list[float]] = {}
    biases: dict[str, list[float]] = {}
    for got, ref in samples:
        floor = scale_floor(ref.values(), dt)
        for name, r in ref.items():
            g = got.get(name)
            if g is None or tuple(g.shape) != tuple(r.shape):
                continue
            g64 = g.detach().to("cpu", torch.float64).flatten()
            r64 = r.detach().to("cpu", torch.float64).flatten()
            keep = torch.isfinite(r64) & torch.isfinite(g64)
            g64, r64 = g64[keep], r64[keep]
            if not r64.numel():
                continue
            zero = _is_zero(name, r64, zeros)
            rels.setdefault(name, []).append(rel_rmse(g64, r64, floor if zero else 0.0))
            if not zero:
                biases.setdefault(name, []).append(bias(g64, r64))
    return {n: Noise(tuple(v), tuple(biases.get(n, ()))) for n, v in rels.items()}


def dither_noise(
    dithered: Iterable[Mapping[str, torch.Tensor]],
    ref: Mapping[str, torch.Tensor],
    dtype: Any,
    zeros: Collection[str] = (),
) -> dict[str, tuple[float, ...]]:
    """Per tensor name, the rel_rmse of each dithered float64 run (the float64 computation with every op
    result rounded once at random at the run's precision) against the exact one; a reference zero in exact
    arithmetic (`zeros`) measured against the scale floor, as compare_tensor() measures it."""
    floor = scale_floor(ref.values(), dtype)
    out: dict[str, list[float]] = {}
    for run in dithered:
        for name, r in ref.items():
            g = run.get(name)
            if g is None or tuple(g.shape) != tuple(r.shape):
                continue
            g64 = g.detach().to("cpu", torch.float64).flatten()
            r64 = r.detach().to("cpu", torch.float64).flatten()
            keep = torch.isfinite(r64) & torch.isfinite(g64)
            if bool(keep.any()):
                zero = _is_zero(name, r64[keep], zeros)
                out.setdefault(name, []).append(rel_rmse(g64[keep], r64[keep], floor if zero else 0.0))
    return {n: tuple(v) for n, v in out.items()}


@dataclass(frozen=True)
class CompareHow:
    """How compare_tensor judges one tensor (its doc): as the trusted run itself (gross errors only), a zero's
    unit (`scale_floor`), the trusted run's noise, the fudge factor when not the table's, zero in exact
    arithmetic."""

    trusted: bool = False
    scale_floor: float = 0.0
    noise: Noise | None = None
    multiplier: float | None = None
    zero: bool = False


@dataclass(frozen=True)
class _Band:
    """The size bound and the bias band [lo, hi] (its margin) a tensor is judged within, and why."""

    bound: float
    lo: float
    hi: float
    margin: float
    why: str = ""


def compare_tensor(
    name: str,
    got: torch.Tensor,
    ref64: torch.Tensor,
    dtype: Any,
    baseline: torch.Tensor | None = None,
    how: CompareHow = CompareHow(),
) -> TensorParity:
    """One tensor. `how.zero`: its reference is zero in exact arithmetic (exact_zeros; an exactly-zero reference
    is, whatever is passed): errors are then relative to `how.scale_floor`, and its direction means nothing (no
    bias check). `how.noise`: the trusted run's errors on this tensor under other seeds (widens nothing without a
    baseline); `how.multiplier`: the fudge factor on the trusted error, when not the table's (one attention
    kernel)."""
    tol = tolerance_for(dtype)
    if tuple(got.shape) != tuple(ref64.shape):
        return _bad(name, f"shape {tuple(got.shape)} != {tuple(ref64.shape)}", tol.rel_rmse)
    g = got.detach().to("cpu", torch.float64).flatten()
    r = ref64.detach().to("cpu", torch.float64).flatten()
    nan_g, nan_r = torch.isnan(g), torch.isnan(r)
    if not torch.equal(nan_g, nan_r):
        return _bad(name, "NaN where reference has none", tol.rel_rmse)
    keep = ~nan_r
    inf_r = torch.isinf(r)
    if not torch.equal(torch.isinf(g), inf_r) or not torch.equal(g[inf_r], r[inf_r]):
        return _bad(name, "inf mismatch", tol.rel_rmse)
    keep &= ~inf_r
    g, r = g[keep], r[keep]
    diff = (g - r).abs()
    max_abs = diff.max().item() if diff.numel() else 0.0
    denom = r.abs().max().item() if r.numel() else 0.0
    over_peak = max_abs / denom if denom else (0.0 if max_abs == 0 else math.inf)
    zero = how.zero or rms(r) == 0.0  # e.g. the grad of a key bias: zero in exact arithmetic
    unit = how.scale_floor if zero else 0.0  # a zero's error is measured against the terms that cancel in it
    err = rel_rmse(g, r, unit)
    n = int(r.numel())
    if how.trusted:  # the trusted run itself (cpu eager): only gross errors say anything
        return TensorParity(name, err <= tol.gross, err, max_abs, over_peak, tol.gross, "(trusted run)", numel=n)
    b_err = 0.0 if zero else bias(g, r)
    noise_err = err if math.isfinite(err) else 0.0
    margin = tol.bias + tol.bias_z * bias_stderr(g - r, r, noise_err / math.sqrt(max(n, 1)))
    band = _Band(tol.rel_rmse, -margin, margin, margin)
    if baseline is not None and tuple(baseline.shape) == tuple(got.shape):
        b = baseline.detach().to("cpu", torch.float64).flatten()[keep]
        band = _trusted_band(g, r, b, replace(how, zero=zero), tol, noise_err) or band
    if zero:
        # What cancels is not the tensor but its terms (a key bias's gradient sums per-query softmax gradients
        # whose rows sum to zero), so a correct run's residue is a few roundings of terms the size of the
        # other tensors, whose median RMS the scale floor is the fraction floor_fraction() of: the
        # precision's size floor applies at that scale (fp32: 1e-4 x the median = 0.1 x the scale floor),
        # not at the floor itself (1e-4 x the floor: ~1 eps of the median, under the residue of a sum of a
        # few dozen fp32 terms: inductor's key-bias grad on big_bird, 1.7e-7 x the median, 3.6x cpu eager's).
        bound = max(band.bound, tol.floor / floor_fraction(dtype)) if baseline is not None else band.bound
        why = f"{band.why} (reference zero in exact arithmetic: error relative to {how.scale_floor:.3g})".strip()
        band = _Band(bound, -math.inf, math.inf, math.inf, why)
    t = TensorParity(name, True, err, max_abs, over_peak, band.bound, band.why, b_err, band.lo, band.hi, band.margin, n)
    return replace(t, ok=err <= band.bound and not t.biased)


def _trusted_band(
    g: torch.Tensor, r: torch.Tensor, b: torch.Tensor, how: CompareHow, tol: Any, noise_err: float
) -> _Band | None:
    """With a trusted run `b`: the size bound from the trusted errors (its own, other seeds', rounded once at
    random) times the multiplier, and the bias band around the trusted biases (None: the trusted run is not
    finite here)."""
    unit = how.scale_floor if how.zero else 0.0
    base_err = rel_rmse(b, r, unit)
    if not math.isfinite(base_err):
        return None
    noise = how.noise
    seeds_err = [e for e in (noise.rel_rmse if noise else ()) if math.isfinite(e)]
    dither_err = [e for e in (noise.dither if noise else ()) if math.isfinite(e)]
    worst = max([base_err, *seeds_err, *dither_err])
    bound = max(tol.floor, (how.multiplier or tol.multiplier) * worst)
    base_bias = 0.0 if how.zero else bias(b, r)
    seeds_bias = [x for x in (noise.bias if noise else ()) if math.isfinite(x)]
    samples = [base_bias, *seeds_bias]
    mean = sum(samples) / len(samples)
    sd = math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - 1)) if len(samples) > 1 else 0.0
    se = bias_stderr(g - b, r, math.hypot(noise_err, base_err) / math.sqrt(max(int(r.numel()), 1)))
    margin = tol.bias_floor + tol.bias_z * math.hypot(se, sd)
    why = (
        f"(trusted rel_rmse {base_err:.3g}, bias {base_bias:+.3g}"
        + (
            f"; over {len(seeds_err)} more seed(s): max rel_rmse {max(seeds_err):.3g}, bias sd {sd:.3g}"
            if seeds_err
            else ""
        )
        + (f"; rounded once at random: {max(dither_err):.3g}" if dither_err else "")
        + ")"
    )
    return _Band(bound, min(0.0, base_bias, mean) - margin, max(0.0, base_bias, mean) + margin, margin, why)


def floor_fraction(dtype: Any) -> float:
    """The scale floor as a fraction of the median RMS of the reference tensors: max(FLOOR_REL, FLOOR_EPS x eps)."""
    return max(FLOOR_REL, FLOOR_EPS * torch.finfo(judged_dtype(dtype)).eps)


def scale_floor(refs: Iterable[torch.Tensor], dtype: Any) -> float:
    """max(FLOOR_REL, FLOOR_EPS x eps(dtype)) x the median RMS of the reference tensors: the unit a reference
    zero in exact arithmetic is measured against (a gradient that cancels exactly, like a key bias's under
    softmax: its computed value is rounding residue of terms the size of the other grads), not against ~0."""
    scales = sorted(rms(r) for r in refs if r.numel() and bool(torch.isfinite(r).all()))
    if not scales:
        return 0.0
    return floor_fraction(dtype) * scales[len(scales) // 2]


def agg_term(err: float, trusted_errs: Sequence[float]) -> float | None:
    """A tensor's term of the whole-run check: log(err / the trusted runs' RMS rel_rmse), err >= 1e-3 of it."""
    e = math.sqrt(sum(x * x for x in trusted_errs) / len(trusted_errs))
    return math.log(max(err, 1e-3 * e) / e) if e > 0 and math.isfinite(e) else None


def parity(
    got: Mapping[str, torch.Tensor],
    ref64: Mapping[str, torch.Tensor],
    dtype: Any,
    baseline: Mapping[str, torch.Tensor] | None = None,
    trusted: bool = False,
    noise: Mapping[str, Noise] | None = None,
    zeros: Collection[str] = (),
) -> ParityReport:
    """Compare every named tensor; a tensor missing on either side is a failure. `dtype`: a torch.dtype
    or a Precision (judged by its compute dtype). `baseline`: a trusted run at the same precision (cpu
    eager) on the same inputs, whose own error sets the bounds; `noise`: trusted_noise() of that trusted
    run under other seeds (makes the bounds measured rather than one sample); `trusted=True`: `got` IS
    the trusted run, judged only for gross errors (non-finite, shape, rel_rmse over `gross`); `zeros`: the
    tensors zero in exact arithmetic (exact_zeros against a twin of the reference; else only exact zeros)."""
    dt = judged_dtype(dtype)
    out: list[TensorParity] = []
    floor = scale_floor(ref64.values(), dt)
    logs: list[float] = []
    for name, r in ref64.items():
        if name not in got:
            out.append(_bad(name, "missing", 0.0))
            continue
        b = None if baseline is None else baseline.get(name)
        nz = None if noise is None else noise.get(name)
        zero = _is_zero(name, r, zeros)
        t = compare_tensor(name, got[name], r, dt, b, CompareHow(trusted, floor, nz, zero=zero))
        out.append(t)
        if b is not None and not trusted and math.isfinite(t.rel_rmse) and tuple(b.shape) == tuple(r.shape):
            term = agg_term(t.rel_rmse, [rel_rmse(b, r, floor if zero else 0.0), *(nz.rel_rmse if nz else ())])
            logs += [] if term is None else [term]
    for name in got.keys() - ref64.keys():
        out.append(_bad(name, "not in reference", 0.0))
    judge_agg = noise is not None and dt in AGG_DTYPES and len(logs) >= AGG_MIN_TENSORS
    agg = math.exp(sum(logs) / len(logs)) if judge_agg else None
    rep = ParityReport(all(t.ok for t in out), out, agg)
    rep.ok = rep.ok and rep.agg_ok
    return rep
