"""Numerical parity of device results against a float64 CPU reference.

Starting point: the dynamo harness's `same()` (torch/_dynamo/utils.py): allclose with a tolerance,
else `rmse(fp64, res) <= multiplier * rmse(fp64, ref) + tol / 10`. We keep its float64 golden and its
"compare against how wrong a trusted run is" idea, but drop the allclose-first shortcut and the
additive tol/10 term: on tiny random-init models both let a 1% error in one operator through.

Each named tensor (loss, logits, every grad) is judged twice; failing either fails it:

1. Size of the error: rel_rmse = RMSE(got - ref64) / RMS(ref64), scale-free. Alone it must stay under
   the dtype's `rel_rmse`; with a trusted baseline run in the same dtype (cpu eager), under
   `multiplier` x the baseline's own rel_rmse (never below `floor`; no cap: a bf16 BatchNorm grad
   of a correct run can be 30% off float64, and a backend may be as far off as the trusted run).
2. Direction of the error (systematic bias): bias = <got - ref64, ref64> / <ref64, ref64>, the
   least-squares scale of the error along the reference. Rounding noise is nearly orthogonal to the
   reference; an operator whose output is off by a factor (1 + d) is not: every weight that operator
   feeds gets a gradient scaled by about (1 + d), so some grad shows bias ~ d. In bf16 a 1% error
   hides inside the rounding noise by size (check 1) but not by direction. A tensor is biased when
   |bias| passes `bias` + `bias_z` standard errors (the standard error estimated from the spread of
   the projection over contiguous chunks of the tensor, so correlated noise counts as it should) AND,
   with a baseline, |bias - baseline's bias| passes the same kind of bound: a run more accurate than
   the trusted one (inductor keeps bf16 intermediates in fp32) is never flagged for differing from
   the trusted run's own bias, and a bias the trusted run shares is not the backend's fault.

A reference that is numerically zero (RMS under max(FLOOR_REL, FLOOR_EPS x eps) x the median RMS of
all compared tensors: a key bias's gradient under softmax cancels exactly, so what any run computes is
rounding residue) is judged against that floor, without a bias check. `trusted=True` judges the
trusted run itself (cpu eager in the run dtype) for gross errors only (`gross`).
A NaN/inf where the reference is finite, a shape mismatch or a missing tensor always fails.
The numbers, each with its reason, are in TOLERANCES; tests/checks/test_parity.py proves the rule on
tiny models: a 1.01 scale of one aten op kind (mm, softmax, norm, activation, add, sdpa) is flagged,
eager / aot_eager / inductor are not, in fp32 and in bf16.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import torch

BIAS_CHUNKS = 16  # the bias' standard error is estimated from this many contiguous chunks
# a reference RMS under max(FLOOR_REL, FLOOR_EPS x eps(dtype)) x the median RMS is numerically zero
FLOOR_REL = 1e-3
FLOOR_EPS = 10.0


@dataclass(frozen=True)
class Tolerance:
    rel_rmse: float  # max RMSE(got - ref64) / RMS(ref64) with no baseline to compare with
    multiplier: float  # with a baseline: allowed multiple of the baseline's rel_rmse
    floor: float  # with a baseline: rel_rmse below this always passes (baseline may be ~exact)
    reason: str
    bias: float = 1e-3  # bias (and bias beyond the baseline's) allowed beyond its noise (module doc)
    bias_z: float = 4.0  # noise allowance of the bias, in standard errors
    gross: float = 0.5  # the trusted run itself (cpu eager): rel_rmse above this is garbage
    loss_rel: float = 1e-3  # loss curve: max per-step |got - ref| / |ref| with no baseline curve
    loss_multiplier: float = 5.0  # with a baseline curve: allowed multiple of its deviation so far
    loss_floor: float = 1e-4  # with a baseline curve: deviations below this always pass


# The one tolerance table. rel_rmse / floor / gross: relative RMSE against float64, per tensor. bias: a
# fraction of the reference (1e-2 = the error contains 1% of the reference itself). loss_*: relative
# per-step deviation of the loss curve. Figures measured on tiny random-init models (llama, gpt2,
# qwen3_moe, timm test_vit and test_resnet; docs/zoo.md has the table): correct fp32 runs reach
# rel_rmse <= 4e-5 and bias differences <= 1e-6; correct bf16 runs rel_rmse up to 0.3 (MoE routing
# flips, BatchNorm over a batch of 2) and bias differences within ~0.5 of the bound; a 1% error in
# one op gives a bias difference of 0.7-1% on the grads of the weights that op feeds.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(
        1e-10, 2.0, 1e-12, "float64 vs float64: only summation order differs",
        bias=1e-11, gross=1e-8, loss_rel=1e-10, loss_floor=1e-12,
    ),
    torch.float32: Tolerance(
        1e-4, 3.0, 1e-4,
        "fp32 eps 1.2e-7: correct runs of tiny models sit at rel_rmse 1e-7..4e-5 (the high end: "
        "BatchNorm over a tiny batch); 1e-4 (or 3x the baseline's) leaves headroom for reduction-order "
        "changes (fusion, tiling), while a 1% op error reaches >= 3e-3 in some grad. bias 1e-4: "
        "correct runs differ by <= 1e-6, a 1% op error by ~1e-2. gross 1e-2: the cpu fp32 run is "
        "garbage past 1%. Loss curves: correct runs deviate up to ~1.3e-5 over 3 SGD steps (the 181 "
        "causal types with inductor); 5x the trusted run's deviation so far (different rounding, "
        "amplified alike), floor 1e-4.",
        bias=1e-4, bias_z=4.0, gross=1e-2, loss_rel=1e-4, loss_multiplier=5.0, loss_floor=1e-4,
    ),
    torch.bfloat16: Tolerance(
        5e-2, 3.0, 1e-2,
        "bf16 eps 7.8e-3 (8 mantissa bits): a correct bf16 forward+backward lands at 0.5-3% relative, "
        "up to 30% on ill-conditioned tensors (MoE routing flips, BatchNorm over 2 samples). By size "
        "only gross errors are visible: with a same-dtype baseline, 3x its error (dynamo's multiplier "
        "for low precision); alone, 5e-2. By direction: correct backends (eager, aot_eager, inductor) "
        "differ from cpu eager by <= 3e-3 in bias, a 1% op error by 7e-3..1e-2 on the grads it feeds: "
        "bias bound 3e-3 + 4 standard errors. gross 0.5: the trusted cpu bf16 run itself can be 30% "
        "off on BatchNorm grads. Loss curves: bf16 rounding moves tiny models' losses up to ~1e-2 per "
        "step; 5e-2 alone, 5x the baseline's deviation so far with one (floor 5e-3).",
        bias=3e-3, bias_z=4.0, gross=0.5, loss_rel=5e-2, loss_multiplier=5.0, loss_floor=5e-3,
    ),
    torch.float16: Tolerance(
        2e-2, 3.0, 2e-3,
        "fp16 eps 9.8e-4: 8x finer than bf16, so the bf16 bounds tightened ~2.5x (not 8x: fp16's "
        "narrow range adds overflow-avoiding rescales); same multiplier.",
        bias=1.5e-3, bias_z=4.0, gross=0.25, loss_rel=2e-2, loss_multiplier=5.0, loss_floor=2e-3,
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
    bias: float = 0.0  # projection of the error on the reference (signed fraction of the reference)
    bias_bound: float = math.inf
    bias_excess: float = 0.0  # bias minus the baseline's bias (= bias without a baseline)
    excess_bound: float = math.inf
    numel: int = 0

    @property
    def biased(self) -> bool:
        return abs(self.bias) > self.bias_bound and abs(self.bias_excess) > self.excess_bound

    @property
    def score(self) -> float:
        """How close to failing: > 1 fails. max(size ratio, min(bias ratios))."""
        size = self.rel_rmse / self.bound if self.bound else (0.0 if self.rel_rmse == 0 else math.inf)
        b1 = abs(self.bias) / self.bias_bound if self.bias_bound else math.inf
        b2 = abs(self.bias_excess) / self.excess_bound if self.excess_bound else math.inf
        return max(size, min(b1, b2))


@dataclass
class ParityReport:
    ok: bool
    tensors: list[TensorParity] = field(default_factory=list)

    @property
    def worst(self) -> TensorParity | None:
        bad = [t for t in self.tensors if not t.ok]
        pool = bad or self.tensors
        return max(pool, key=lambda t: t.score) if pool else None

    @property
    def max_abs_err(self) -> float:
        return max((t.max_abs_err for t in self.tensors), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((t.rel_rmse for t in self.tensors), default=0.0)

    @property
    def score(self) -> float:
        """The worst tensor's score (> 1: fails)."""
        return max((t.score for t in self.tensors), default=0.0)

    def summary(self) -> str:
        w = self.worst
        if w is None:
            return "no tensors compared"
        head = "ok" if self.ok else f"{sum(not t.ok for t in self.tensors)}/{len(self.tensors)} tensors off"
        if not w.ok and w.rel_rmse <= w.bound and w.biased:
            what = (
                f"bias {w.bias:+.3g} (bound {w.bias_bound:.3g}; {w.bias_excess:+.3g} beyond the baseline's, "
                f"bound {w.excess_bound:.3g}; rel_rmse {w.rel_rmse:.3g})"
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


def compare_tensor(
    name: str,
    got: torch.Tensor,
    ref64: torch.Tensor,
    dtype: torch.dtype,
    baseline: torch.Tensor | None = None,
    trusted: bool = False,
    scale_floor: float = 0.0,
) -> TensorParity:
    """One tensor. `scale_floor`: the RMS below which the reference counts as numerically zero (errors
    are then relative to the floor, and its direction means nothing: no bias check)."""
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
    max_rel = max_abs / denom if denom else (0.0 if max_abs == 0 else math.inf)
    err = rel_rmse(g, r, scale_floor)
    n = int(r.numel())
    if trusted:  # the trusted run itself (cpu eager): only gross errors say anything
        return TensorParity(name, err <= tol.gross, err, max_abs, max_rel, tol.gross, "(trusted run)", numel=n)
    zero = rms(r) < scale_floor  # e.g. the grad of a key bias: zero in exact arithmetic
    b_err = 0.0 if zero else bias(g, r)
    noise = err if math.isfinite(err) else 0.0
    sqn = math.sqrt(max(n, 1))
    bias_bound = tol.bias + tol.bias_z * bias_stderr(g - r, r, noise / sqn)
    bound, excess, excess_bound, why = tol.rel_rmse, b_err, bias_bound, ""
    if baseline is not None and tuple(baseline.shape) == tuple(got.shape):
        b = baseline.detach().to("cpu", torch.float64).flatten()[keep]
        base_err = rel_rmse(b, r, scale_floor)
        if math.isfinite(base_err):
            base_bias = 0.0 if zero else bias(b, r)
            bound = max(tol.floor, tol.multiplier * base_err)
            excess = b_err - base_bias
            excess_bound = tol.bias + tol.bias_z * bias_stderr(g - b, r, math.hypot(noise, base_err) / sqn)
            why = f"(baseline rel_rmse {base_err:.3g}, bias {base_bias:+.3g})"
    if zero:
        bias_bound = excess_bound = math.inf
        why = f"{why} (reference ~0: error relative to {scale_floor:.3g})".strip()
    t = TensorParity(name, True, err, max_abs, max_rel, bound, why, b_err, bias_bound, excess, excess_bound, n)
    return replace(t, ok=err <= bound and not t.biased)


def scale_floor(refs: Iterable[torch.Tensor], dtype: torch.dtype) -> float:
    """max(FLOOR_REL, FLOOR_EPS x eps(dtype)) x the median RMS of the reference tensors: a tensor whose
    reference is smaller than that is numerically zero at this precision (a gradient that cancels
    exactly, like a key bias's under softmax: its computed value is rounding residue of terms the size
    of the other grads), so its error is measured against the floor, not against ~0."""
    scales = sorted(rms(r) for r in refs if r.numel() and bool(torch.isfinite(r).all()))
    if not scales:
        return 0.0
    return max(FLOOR_REL, FLOOR_EPS * torch.finfo(dtype).eps) * scales[len(scales) // 2]


def parity(
    got: Mapping[str, torch.Tensor],
    ref64: Mapping[str, torch.Tensor],
    dtype: torch.dtype,
    baseline: Mapping[str, torch.Tensor] | None = None,
    trusted: bool = False,
) -> ParityReport:
    """Compare every named tensor; a tensor missing on either side is a failure. `baseline`: a trusted
    run in the same dtype (cpu eager) whose own error sets the bounds; `trusted=True`: `got` IS that
    trusted run, judged only for gross errors (non-finite, shape, rel_rmse over `gross`)."""
    out: list[TensorParity] = []
    floor = scale_floor(ref64.values(), dtype)
    for name, r in ref64.items():
        if name not in got:
            out.append(_bad(name, "missing", 0.0))
            continue
        b = None if baseline is None else baseline.get(name)
        out.append(compare_tensor(name, got[name], r, dtype, b, trusted, floor))
    for name in got.keys() - ref64.keys():
        out.append(_bad(name, "not in reference", 0.0))
    return ParityReport(all(t.ok for t in out), out)
