"""The module-level rule: one tensor a module computed (its output, the gradient of one of its inputs or
of one of its own parameters), on the same inputs, three times: by the device (`got`), in float64 on
cpu (`ref`) and by the trusted run, cpu eager at the run's precision (`base`). Where the whole-model
rule (checks/parity.py) sees rounding piled up through every layer and the backward, here the error
is the module's own: one to a few roundings, so a bend of one function stands out.

A correct implementation rounds: its error is noise, zero-mean given anything about the value it
rounds. A wrong one computes another function: its error is a function of the inputs, so it has a
mean where that noise has none. Six checks, each with its standard error measured on the tensor:

1. Size: rel_rmse(got) = RMSE(got - ref) / RMS(ref) <= `multiplier` x max(rel_rmse(base), `rounding`,
   amplified rounding). `rounding` = eps / sqrt(12) (bf16/fp16): the relative RMS of one
   round-to-nearest (the error is uniform over +-half an ulp; relative to the value it is at most
   eps / sqrt(12)): a module the trusted run computes exactly (an embedding lookup) may still be rounded
   once by a correct device. Amplified rounding: the float64 module with its inputs, output gradients
   and every intermediate result of every op (forward and backward) perturbed by one rounding (relative
   N(0, eps / sqrt(12)): a stochastic model of a computation that rounds everything once; a value the
   module's own code casts to fp32, an RMSNorm's statistics, is rounded as fp32 rounds, since the run
   holds it there too), against float64: the largest of DITHERS draws. A well-conditioned module keeps it
   near a few roundings; an ill-conditioned one (BatchNorm's backward over 8 values per channel)
   multiplies it, and a correct backend that rounds at other points than cpu eager (inductor's
   decomposed BatchNorm backward: 4x cpu's error on a timm block's conv grad) pays that multiple.
   fp32: floor 1e-4 (the order of reductions, not rounding, sets fp32's error: parity.py's reason).
   A module a low-precision run computes in fp32 throughout (amp's norms and rotary angles: the
   trusted run's every op result and the device's tensors fp32) is judged with fp32's tolerance
   (module_check.ModuleCheck._fp32_throughout).
2. Direction (the scale along the reference, parity.py's bias): <got - ref, ref> / <ref, ref>.
3. Conditional mean given the reference value: the elements sorted by ref into Q equal-count bins,
   in each bin mean(got - ref) / RMS(ref). A sharper gate, a temperature or an epsilon moves whole
   ranges of values one way (silu's 2%-sharper gate lifts every negative output); rounding does not.
4. Conditional scale given the module's input (tensors shaped like one of its inputs: an activation's
   output, the gradient of that input): in Q bins of that input's value, <got - ref, ref> / <ref, ref>
   within the bin. An error only in backward multiplies the gradient by a function of the input
   (grad_out x f'(x)); since grad_out has either sign, only a per-bin scale sees it.

5. Conditional scale and mean given the position along the tensor's last two axes (features / columns,
   and tokens / rows): the axis cut into Q contiguous blocks, in each block <got - ref, ref> / <ref, ref>
   and mean(got - ref) / RMS(ref). Rounding does not depend on where an element sits; a kernel bug in a
   vector loop's tail, one tile of a matmul or attention, one head, or some positions does, and pooled
   over the whole tensor it is diluted by the share it touches. Its floor is a whole rounding, eps / 2
   (not eps / sqrt(12)): one block may be a single column or row whose scalar (a per-row normaliser, a
   per-column scale) a correct device rounds once, anywhere in its +-half ulp. Judged on activations (a
   module's outputs and its inputs' gradients), not on parameter gradients (module_check says why).

6. The error along the module's input, row by row (rows: the last axis; tensors shaped like one of its
   inputs): in each row the input's direction with the reference's own direction taken out, the error's
   component along it, pooled over rows as a relative RMS. A wrong function of a row's values (a norm's
   backward with its projection term off, a wrong constant in a per-row reduction) puts its whole error
   there, with a sign that changes from row to row, so 2-5, which average, see nothing; rounding leaves
   1 / sqrt(row length) of itself there. Allowed: the trusted run's, one rounding of a per-row scalar
   (eps / sqrt(12) as an RMS over rows) and the device's own noise there (`_along_input`).

2-5 are judged like parity's bias: the device's statistic must lie in [min(0, trusted's),
max(0, trusted's)] (a device more accurate than cpu eager lands between the trusted run and 0)
widened by `floor` x the bin's RMS(ref) / RMS(ref) + `z` standard errors. The floor is a scale a
correct implementation may carry, a constant or a per-row statistic (a norm's rsqrt, an attention
scale) rounded once: `rounding`, eps / sqrt(12) relative; so a scale-like difference up to one rounding
passes, and what is judged tightly is the error's shape, which no rounding has. fp32: 1e-5 (the
reduction-order share, parity.py's fp32 reason). The standard error of each statistic is measured:
from the spread of the error around the statistic within its bin, times a design effect (>= 1) from 16
contiguous chunks of the tensor pooled over the bins (errors shared by a row, a token, a head: a
per-token scale rounded once moves a whole row), for the device's and the trusted run's statistics
together. The spread is taken over the bin's independent draws of the noise, which are not always its
elements (`_stat`): copies of one computation (elements with the same reference value: a repeated token's
row, an elementwise function of the same low-precision input) are one draw, summed before squaring; each
draw's residual is measured against the statistic fitted without it (the leave-one-out jackknife: the
draw that carries most of a bin's weight, the one nonzero gradient among a padded stretch's exact zeros
or a few large elements of a heavy-tailed gradient, has its own error fitted away by the statistic, and the
others' spread says nothing about it; a bin that is one draw has no measurable noise and is not judged);
and where a bin's effective number of draws n_eff (Kish's, over the statistic's weights) is under 2 z^2,
the standard error's own uncertainty, z sqrt(2 / n_eff) of it, is the margin's unit instead. Without
these, a bin whose weight one element carries showed a spread near 0 and a correct inductor in bf16 was
flagged on glm's and mixtral's MLP input gradients (-0.9% and +0.27% against a margin of one rounding).
`z` = 6: a module check makes ~30 statistics per tensor, ~5 tensors per module, ~30 modules per run and
the verdict is re-made on thousands of runs; a normal tail beyond 6 sigma is 2e-9.

A reference zero in exact arithmetic (parity.exact_zeros: against a float64 twin replay whose every op
result is perturbed by parity.TWIN_DITHER) is judged against the scale floor (parity.scale_floor over the
module's tensors) by size only; every other tensor, however small, by all six checks. A trusted run that is
itself grossly off float64 on a tensor (rel_rmse over `gross`, parity's table) makes that tensor
ill-conditioned at this precision: reported, not judged.
Non-finite values where the reference is finite, and a shape mismatch, fail.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bringup.checks.parity import judged_dtype, tolerance_for

CHUNKS = 16  # contiguous chunks for the design effect (parity.BIAS_CHUNKS' reason)
# float64 replays with every input and intermediate rounded once at random (module_replay's dither): one
# such replay's error is one draw; on an ill-conditioned tensor (few effective values: BatchNorm over 8)
# draws vary by 2x, so the size bound takes the largest of this many
DITHERS = 2
# elements per bin at least (Q = n // BIN_SIZE bins, 2..MAX_BINS): a bin's standard error is measured from
# the spread within it, and with >= 128 independent draws that estimate is within ~12% (sqrt(2/128)), so a
# 6-sigma margin is off by under one sigma; a bin whose draws are fewer (copies, a few elements carrying its
# weight: `_stat`) has its margin widened to keep that
BIN_SIZE = 128
# at most 16 bins: enough to follow a function's shape over its input range (a gate's knee, a softmax's tail)
# and few enough statistics per tensor that z (below) covers them all (~30 per tensor with 3 checks)
MAX_BINS = 16


def one_rounding(dtype: torch.dtype) -> float:
    """The relative RMS of one round-to-nearest to `dtype`: eps / sqrt(12)."""
    return torch.finfo(dtype).eps / math.sqrt(12)


@dataclass(frozen=True)
class ModuleTolerance:
    # size: allowed multiple of max(trusted rel_rmse, size_floor, amplified rounding): 3, parity.py's (dynamo's
    # low-precision fudge factor): cpu eager is one correct implementation, another may round 3x as far
    multiplier: float
    size_floor: float  # a correct computation's rel_rmse even where the trusted run is exact
    floor: float  # a scale-like systematic difference a correct implementation may carry (relative)
    z: float  # noise allowance of the statistics, in standard errors
    reason: str
    dither: float = 0.0  # one rounding (relative RMS): the module's inputs perturbed by this measure its conditioning
    whole_rounding: float = 0.0  # eps / 2: the largest relative error of one round-to-nearest (check 5's floor)


MODULE_TOLERANCES: dict[torch.dtype, ModuleTolerance] = {
    torch.float32: ModuleTolerance(
        3.0, 1e-4, 1e-5, 6.0,
        "fp32: the order of reductions sets the error (parity.py's float32 reason): size floor 1e-4, "
        "scale floor 1e-5 (a backend that reorders shifts a tensor's bias by ~1e-7..1e-6)",
        dither=one_rounding(torch.float32), whole_rounding=torch.finfo(torch.float32).eps / 2,
    ),
    torch.bfloat16: ModuleTolerance(
        3.0, one_rounding(torch.bfloat16), one_rounding(torch.bfloat16), 6.0,
        "bf16: one round-to-nearest has relative RMS <= eps/sqrt(12) = 2.3e-3; a correct device may round "
        "once where cpu eager is exact, and may carry a scale rounded once",
        dither=one_rounding(torch.bfloat16), whole_rounding=torch.finfo(torch.bfloat16).eps / 2,
    ),
    torch.float16: ModuleTolerance(
        3.0, one_rounding(torch.float16), one_rounding(torch.float16), 6.0,
        "fp16: as bf16, eps/sqrt(12) = 2.8e-4", dither=one_rounding(torch.float16),
        whole_rounding=torch.finfo(torch.float16).eps / 2,
    ),
}  # fmt: skip


def module_tolerance(precision: Any) -> ModuleTolerance:
    return MODULE_TOLERANCES.get(judged_dtype(precision), MODULE_TOLERANCES[torch.float32])


@dataclass(frozen=True)
class TensorVerdict:
    name: str
    ok: bool
    rel_rmse: float
    bound: float
    trusted_rel_rmse: float
    score: float  # > 1 fails: max(size / bound, worst statistic's distance past its margin / the margin's noise part)
    check: str  # the worst check: size | bias | value | input | position | along
    stat: float = 0.0  # the worst statistic's value (fraction of RMS(ref); a relative scale for bias / input)
    trusted_stat: float = 0.0
    margin: float = 0.0  # its floor + z standard errors
    numel: int = 0
    judged: bool = True  # False: ill-conditioned (trusted run grossly off float64), not judged
    why: str = ""

    def summary(self) -> str:
        if not self.judged:
            return f"{self.name}: not judged ({self.why})"
        if self.check == "size":
            return (
                f"{self.name}: rel_rmse {self.rel_rmse:.3g} (bound {self.bound:.3g}; trusted "
                f"{self.trusted_rel_rmse:.3g})"
            )
        what = {
            "bias": "bias",
            "value": "conditional mean given the reference value",
            "input": "conditional scale given the input",
            "position": "scale or mean of one block",
            "along": "error along the input, row by row (relative RMS)",
        }[self.check]
        return (
            f"{self.name}: {what} {self.stat:+.3g} vs trusted {self.trusted_stat:+.3g} (margin {self.margin:.3g}; "
            f"rel_rmse {self.rel_rmse:.3g}){' ' + self.why if self.why else ''}"
        )


def _bins(key: torch.Tensor, q: int) -> torch.Tensor:
    n = key.numel()
    order = torch.argsort(key, stable=True)
    out = torch.empty(n, dtype=torch.long)
    out[order] = torch.arange(n) * q // n
    return out


def _sum(bins: torch.Tensor, q: int, v: torch.Tensor) -> torch.Tensor:
    return torch.zeros(q, dtype=torch.float64).index_add_(0, bins, v)


@dataclass(frozen=True)
class _Stat:
    got: torch.Tensor  # per bin
    base: torch.Tensor
    var: torch.Tensor  # variance of got - base's noise, per bin (design effect and the estimate's own spread included)
    floor: torch.Tensor


def _values(r: torch.Tensor) -> torch.Tensor:
    """Per element, the id of its reference value: elements whose reference has the same nonzero value (to
    float32's resolution) are copies of one computation (a repeated token's row, an elementwise function of
    the same low-precision input value: a correct device rounds them alike, a wrong one errs alike), one
    draw of the noise; an exact zero of the reference (a padded or masked position, a dead unit) is its own."""
    n = r.numel()
    bits = r.to(torch.float32).view(torch.int32).to(torch.int64) + 2**31
    key = torch.where(r != 0, bits, 2**32 + torch.arange(n))
    return torch.unique(key, return_inverse=True)[1]


def _copies(vid: torch.Tensor, bins: torch.Tensor, q: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(per element its cluster: the copies of one value within one bin, per cluster its bin)."""
    if int(vid.max()) + 1 == vid.numel():  # every value distinct: each element its own
        return torch.arange(vid.numel()), bins
    key, cl = torch.unique(vid * q + bins, return_inverse=True)
    return cl, key % q


def _variances(
    bins: torch.Tensor,
    q: int,
    contrib: torch.Tensor,
    lev: torch.Tensor,
    cl: torch.Tensor,
    cq: torch.Tensor,
    chunk: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per bin: the variance of sum(contrib) from its clusters of copies, each cluster's sum divided by
    (1 - its leverage) (the leave-one-cluster-out jackknife: a cluster that carries most of the bin's
    weight has its residual fitted away, and its own error measured against the others' fit instead;
    one that carries all of it leaves the noise unmeasurable: infinite), and the chunk-clustered one."""
    c = int(cq.numel())
    s = torch.zeros(c, dtype=torch.float64).index_add_(0, cl, contrib) / (1 - lev).clamp_min(1e-300)
    s = torch.where(lev < 1, s, math.inf)
    iid = _sum(cq, q, s * s)
    ch = torch.zeros(q * k, dtype=torch.float64).index_add_(0, bins * k + chunk, contrib).view(q, k)
    return iid, (ch**2).sum(1) * k / max(k - 1, 1)


@dataclass(frozen=True)
class TensorFacts:
    """What a caller knows about the tensor beyond its three runs (judge_module_tensor's doc)."""

    covariate: torch.Tensor | None = None
    scale_floor: float = 0.0
    dithered: Sequence[torch.Tensor] = ()
    shape: Sequence[int] | None = None
    positional: bool = True
    zero: bool = False


@dataclass(frozen=True)
class _Errors:
    """One tensor's errors in float64, flattened, with the elements whose reference or trusted value is not
    finite left out (`keep`): the device's (e) and the trusted run's (eb) against the reference (r); x: the
    aligned module input, if any; scale: what the errors are relative to."""

    e: torch.Tensor
    eb: torch.Tensor
    r: torch.Tensor
    x: torch.Tensor | None
    keep: torch.Tensor
    scale: float
    zero: bool  # judged against the scale floor, by size only


@dataclass(frozen=True)
class _Draws:
    """How a statistic's noise is measured: the contiguous chunks (design effect), each element's reference
    value id (copies: `_values`) and the margin in standard errors."""

    chunk: torch.Tensor
    k: int
    vid: torch.Tensor
    z: float

    @staticmethod
    def of(r: torch.Tensor, z: float) -> _Draws:
        n = int(r.numel())
        k = min(CHUNKS, n // 2) if n >= 4 else 1
        return _Draws(torch.arange(n) * k // n, k, _values(r), z)


def _stat(
    kind: str,
    d: _Errors,
    w: _Draws,
    bins: torch.Tensor,
    q: int,
    floor: float,
) -> _Stat:
    """kind "mean": per bin mean(error) / scale; "proj": per bin <error, r> / <r, r> (a relative scale). Its
    variance from the bins' clusters of copies (_copies), leave-one-cluster-out (module doc)."""
    e, eb, r, scale = d.e, d.eb, d.r, d.scale
    if kind == "mean":
        wt = torch.ones_like(r)
        cnt = _sum(bins, q, wt).clamp_min(1)
        coef = 1.0 / (cnt[bins] * scale)
        tg, tb = _sum(bins, q, e) / cnt / scale, _sum(bins, q, eb) / cnt / scale
        rg, rb = e - (tg * scale)[bins], eb - (tb * scale)[bins]
        fl = floor * (_sum(bins, q, r * r) / cnt).sqrt() / scale
    else:
        wt = r * r
        rr = _sum(bins, q, wt).clamp_min(1e-300)
        coef = r / rr[bins]
        tg, tb = _sum(bins, q, e * r) / rr, _sum(bins, q, eb * r) / rr
        rg, rb = e - tg[bins] * r, eb - tb[bins] * r
        fl = torch.full((q,), floor, dtype=torch.float64)
    return _Stat(tg, tb, _stat_variance(w, bins, q, coef * rg, coef * rb, wt), fl)


def _stat_variance(
    w: _Draws, bins: torch.Tensor, q: int, cg_: torch.Tensor, cb_: torch.Tensor, wt: torch.Tensor
) -> torch.Tensor:
    """Per bin, the variance of the device's minus the trusted statistic: the clusters' leave-one-out
    variance (`_variances`, contributions cg_ and cb_, weights wt) times the design effect and the estimate's
    own spread where the bin has few effective draws."""
    cl, cq = _copies(w.vid, bins, q)
    c = int(cq.numel())
    wc = torch.zeros(c, dtype=torch.float64).index_add_(0, cl, wt)  # each cluster's weight in its bin's statistic
    tot = _sum(cq, q, wc)
    lev = (wc / tot[cq].clamp_min(1e-300)).clamp_max(1.0)
    ig, cg = _variances(bins, q, cg_, lev, cl, cq, w.chunk, w.k)
    ib, cb = _variances(bins, q, cb_, lev, cl, cq, w.chunk, w.k)
    iid = ig + ib
    fin = torch.isfinite(iid)
    deff = max(1.0, float((cg[fin].sum() + cb[fin].sum()) / iid[fin].sum().clamp_min(1e-300)))
    # the effective number of draws the statistic averages (Kish: (sum w)^2 / sum w^2 over the clusters); its
    # standard error, measured on them, is known to sqrt(2 / n_eff) of itself: where z times that exceeds one
    # standard error (n_eff < 2 z^2 = 72: BIN_SIZE's premise, a z-sigma margin off by under one sigma, no longer
    # holds), the margin is z times that uncertainty instead
    neff = tot * tot / _sum(cq, q, wc * wc).clamp_min(1e-300)
    spread = (w.z * (2.0 / neff.clamp_min(1e-300)).sqrt()).clamp_min(1.0)
    return iid * deff * spread * spread


def judge_module_tensor(
    name: str,
    got: torch.Tensor,
    ref: torch.Tensor,
    base: torch.Tensor,
    precision: Any,
    facts: TensorFacts = TensorFacts(),
) -> TensorVerdict:
    """The module rule on one tensor (module doc), a step per check: the shapes and non-finite values, the
    size, then the statistics. `facts.covariate`: the module input this tensor is elementwise aligned with
    (same shape), if any; `facts.zero`: the reference is zero in exact arithmetic (an exactly-zero one is,
    whatever is passed), so its error is measured against `facts.scale_floor` and by size only;
    `facts.dithered`: float64 results with every input and intermediate perturbed by one rounding (the
    tolerance's `dither`, DITHERS seeds), whose largest distance from `ref` is what rounding everything once
    costs here; `facts.shape`: the layout of the tensors when they come flattened (a module's calls stacked),
    for check 5's axes; `facts.positional`: False leaves check 5 out (a parameter's gradient: module_check
    says why)."""
    tol = module_tolerance(precision)
    d = _errors(name, got, ref, base, facts)
    if isinstance(d, TensorVerdict):
        return d
    n = int(d.r.numel())
    if n == 0 or d.scale == 0.0:
        same = bool((d.e == 0).all())  # got == ref: both finite here
        bad = 0.0 if same else math.inf
        return TensorVerdict(name, same, bad, 0.0, 0.0, bad, "size", numel=n)
    size = _size(name, d, ref, facts, tol)
    gross = tolerance_for(precision).gross
    if size.trusted_rel_rmse > gross:
        why = f"the trusted run is itself {size.trusted_rel_rmse:.3g} off float64 here: ill-conditioned"
        return dataclasses.replace(size, ok=True, score=0.0, judged=False, why=why)
    if d.zero:  # zero in exact arithmetic: its direction means nothing
        return size
    layout = (
        tuple(facts.shape) if facts.shape is not None and math.prod(facts.shape) == ref.numel() else tuple(ref.shape)
    )
    tests = _stat_tests(d, tol, layout if facts.positional else None)
    worst = size
    along = _along_input(layout, d, tol, size)
    if along is not None and along.score > worst.score:
        worst = along
    worst = _worst_stat(name, tests, tol.z, size, worst)
    if worst is size:
        return size
    return dataclasses.replace(worst, ok=worst.ok and size.ok)


def _errors(
    name: str, got: torch.Tensor, ref: torch.Tensor, base: torch.Tensor, facts: TensorFacts
) -> _Errors | TensorVerdict:
    """The three runs flattened to float64 and their errors (_Errors); a failing verdict where the shapes differ
    or the device has NaN / inf where the reference has none (or another one)."""
    if tuple(got.shape) != tuple(ref.shape) or tuple(base.shape) != tuple(ref.shape):
        why = f"shape {tuple(got.shape)} != {tuple(ref.shape)}"
        return TensorVerdict(name, False, math.inf, 0.0, math.nan, math.inf, "size", why=why)
    g = got.detach().to("cpu", torch.float64).flatten()
    r = ref.detach().to("cpu", torch.float64).flatten()
    b = base.detach().to("cpu", torch.float64).flatten()
    inf_r = torch.isinf(r)
    if (
        not torch.equal(torch.isnan(g), torch.isnan(r))
        or not torch.equal(torch.isinf(g), inf_r)
        or not torch.equal(g[inf_r], r[inf_r])
    ):
        why = "NaN / inf where the reference has none (or another one)"
        return TensorVerdict(name, False, math.inf, 0.0, math.nan, math.inf, "size", numel=g.numel(), why=why)
    keep = torch.isfinite(r) & torch.isfinite(b)
    g, r, b = g[keep], r[keep], b[keep]
    x = None
    if facts.covariate is not None and tuple(facts.covariate.shape) == tuple(ref.shape):
        x = facts.covariate.detach().to("cpu", torch.float64).flatten()[keep]
    rms_r = float(r.pow(2).mean().sqrt()) if r.numel() else 0.0
    zero = facts.zero or rms_r == 0.0
    scale = max(rms_r, facts.scale_floor) if zero else rms_r
    return _Errors(g - r, b - r, r, x, keep, scale, zero)


def _size(name: str, d: _Errors, ref: torch.Tensor, facts: TensorFacts, tol: ModuleTolerance) -> TensorVerdict:
    """Check 1: the device's relative RMS error against `multiplier` x max(the trusted run's, the size floor,
    the amplified rounding: the largest of the dithered replays')."""
    err = float(d.e.pow(2).mean().sqrt()) / d.scale
    berr = float(d.eb.pow(2).mean().sqrt()) / d.scale
    amplified = 0.0
    for dt in facts.dithered:
        if tuple(dt.shape) == tuple(ref.shape):
            x = dt.detach().to("cpu", torch.float64).flatten()[d.keep]
            if bool(torch.isfinite(x).all()):
                amplified = max(amplified, float((x - d.r).pow(2).mean().sqrt()) / d.scale)
    bound = tol.multiplier * max(berr, tol.size_floor, amplified)
    return TensorVerdict(name, err <= bound, err, bound, berr, err / bound, "size", numel=int(d.r.numel()))


def _stat_tests(d: _Errors, tol: ModuleTolerance, layout: tuple[int, ...] | None) -> list[tuple[str, _Stat]]:
    """Checks 2-5: the bias; the conditional mean given the reference value; the conditional scale given the
    input (where there is one); the position blocks along `layout`'s last two axes (None: check 5 left out)."""
    n = int(d.r.numel())
    w = _Draws.of(d.r, tol.z)
    tests = [("bias", _stat("proj", d, w, torch.zeros(n, dtype=torch.long), 1, tol.floor))]
    q = max(1, min(MAX_BINS, n // BIN_SIZE))
    if q >= 2:
        tests.append(("value", _stat("mean", d, w, _bins(d.r, q), q, tol.floor)))
        if d.x is not None:
            tests.append(("input", _stat("proj", d, w, _bins(d.x, q), q, tol.floor)))
    if layout is not None:
        tests += _position_tests(layout, d, w, max(tol.floor, tol.whole_rounding))
    return tests


def _worst_stat(
    name: str, tests: list[tuple[str, _Stat]], z: float, size: TensorVerdict, worst: TensorVerdict
) -> TensorVerdict:
    """The statistic furthest past its margin (in units of the margin's noise part) if it beats `worst`: each
    must lie in [min(0, trusted's), max(0, trusted's)] widened by its floor and z standard errors."""
    for check, st in tests:
        se = st.var.sqrt()
        lo = torch.minimum(st.base, torch.zeros_like(st.base)) - st.floor
        hi = torch.maximum(st.base, torch.zeros_like(st.base)) + st.floor
        past = torch.maximum(lo - st.got, st.got - hi).clamp_min(0.0)
        noise = (z * se).clamp_min(1e-300)
        score = past / noise
        i = int(torch.argmax(score))
        s = float(score[i])
        if s > worst.score:
            kind, _, where = check.partition(":")
            worst = dataclasses.replace(
                size,
                ok=s <= 1.0,
                score=s,
                check=kind,
                stat=float(st.got[i]),
                trusted_stat=float(st.base[i]),
                margin=float(st.floor[i] + noise[i]),
                why=f"({where}, block {i + 1}/{len(st.got)})" if where else "",
            )
    return worst


# check 6 needs rows of at least this many features (a projection per row; shorter rows leave the
# error's direction too little room to differ from noise) and at least this many rows (the noise part's
# relative spread, 1 / sqrt(2 x rows), under a fifth)
ALONG_MIN_FEATURES = 8
ALONG_MIN_ROWS = 16


def _along_input(
    layout: tuple[int, ...], d: _Errors, tol: ModuleTolerance, size: TensorVerdict
) -> TensorVerdict | None:
    """Check 6: the error along the module's input, row by row (rows: the last axis). In each row the
    input's direction with the reference's own direction and the constant one taken out (u: x, both
    centred, minus its projection on ref, unit length), the error's component c = <e, u>;
    S = sqrt(sum c^2 / (n scale^2)) is the relative RMS of
    the error that lies along the input and that no per-row scale of the output explains.

    A wrong function of a row's values (a norm's backward with its projection term off, a wrong epsilon
    or temperature inside a per-row reduction) puts its whole error there, with a sign that changes from
    row to row (so checks 2-5, which average it, see nothing), while rounding spreads over all of a row's
    h directions and leaves 1 / sqrt(h) of its size along u. Allowed: the trusted run's S, one rounding of
    a per-row scalar (`floor`, eps / sqrt(12) RMS over rows: a projection coefficient a correct device
    rounds once, on a term no larger than the row; a per-row scale or mean, e.g. a normaliser, lies along
    the reference or the constant and is taken out), and the device's own noise along u
    (sum of e_i^2 u_i^2 per row: what independent errors put there, heavy tails included), widened by z
    times its relative spread 1 / sqrt(2 rows). None where the tensor has no input of its shape, NaN/inf
    elements, rows under ALONG_MIN_FEATURES or fewer than ALONG_MIN_ROWS rows."""
    keep, e, eb, r, x, scale = d.keep, d.e, d.eb, d.r, d.x, d.scale
    if x is None or len(layout) < 2:
        return None
    h = layout[-1]
    if not bool(keep.all()):  # rows left out whole (a fully masked attention row) keep the others' layout
        kr = keep.view(-1, h) if h and keep.numel() % h == 0 else None
        if kr is None or not bool((kr.all(1) | ~kr.any(1)).all()):
            return None
    n = int(r.numel())
    rows = n // h if h else 0
    if h < ALONG_MIN_FEATURES or rows < ALONG_MIN_ROWS:
        return None
    rr, xx = r.view(rows, h), x.view(rows, h)
    rc, xc = rr - rr.mean(1, keepdim=True), xx - xx.mean(1, keepdim=True)  # the constant direction out too
    proj = (xc * rc).sum(1, keepdim=True) / (rc * rc).sum(1, keepdim=True).clamp_min(1e-300)
    xo = xc - proj * rc
    norm = xo.norm(dim=1, keepdim=True)
    ok = norm.squeeze(1) > 1e-6 * xx.norm(dim=1)  # > 0 too: a row whose input is all along ref and 1 is left out
    m = int(ok.sum())
    if m < ALONG_MIN_ROWS:
        return None
    u = (xo / norm.clamp_min(1e-300))[ok]
    denom = n * scale * scale

    def along(err_: torch.Tensor) -> tuple[float, float]:
        ee = err_.view(rows, h)[ok]
        c = (ee * u).sum(1)
        return math.sqrt(float(c.pow(2).sum()) / denom), math.sqrt(float((ee * ee * u * u).sum()) / denom)

    s_got, noise_got = along(e)
    s_base, _ = along(eb)
    noise = noise_got * (1.0 + tol.z / math.sqrt(2 * m))
    margin = s_base + tol.floor + noise
    past = max(0.0, s_got - margin + noise)
    score = past / max(noise, 1e-300)
    why = f"(rows of {h}, {m} rows)"
    return dataclasses.replace(
        size, ok=score <= 1.0, score=score, check="along", stat=s_got, trusted_stat=s_base, margin=margin, why=why
    )


def _position_tests(shape: tuple[int, ...], d: _Errors, w: _Draws, floor: float) -> list[tuple[str, _Stat]]:
    """Check 5: per contiguous block of the last and the second-to-last axis, the scale and the mean."""
    out: list[tuple[str, _Stat]] = []
    n = int(d.r.numel())
    for axis in (-1, -2):
        if len(shape) < -axis:
            continue
        size = shape[axis]
        q = min(MAX_BINS, size, n // BIN_SIZE)
        if q < 2:
            continue
        view = [1] * len(shape)
        view[axis] = size
        coord = torch.arange(size).view(view).expand(shape).reshape(-1)[d.keep]
        bins = coord * q // size
        label = f"position:{'last axis' if axis == -1 else 'second-to-last axis'}"
        out.append((f"{label}, scale", _stat("proj", d, w, bins, q, floor)))
        out.append((f"{label}, mean", _stat("mean", d, w, bins, q, floor)))
    return out
