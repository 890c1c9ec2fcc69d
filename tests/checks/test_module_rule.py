"""The module rule (bringup/checks/module_rule.py) on synthetic tensors: what one module computes, three
times (device, float64, trusted cpu run at the same precision), with the rounding a bf16 kernel makes.

A bend of a function (a sharper gate, a gradient taken at the wrong point, a vector tail's wrong gate, a
norm's backward off along each row's input) is caught where the size rule (and parity.py's rule) lets it
through; rounding, per-row and per-column scale rounding, a per-row scalar rounded once and a device more
accurate than cpu eager are not flagged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bringup.checks.module_rule import MODULE_TOLERANCES, TensorFacts, judge_module_tensor
from bringup.checks.parity import compare_tensor

BF16 = torch.bfloat16


def _x(n: int = 8192, seed: int = 0, scale: float = 1.5) -> torch.Tensor:
    return torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


def _bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(BF16).double()


def test_table_reasons_and_rounding_floor() -> None:
    for dt, tol in MODULE_TOLERANCES.items():
        assert tol.reason and tol.z >= 6 and tol.multiplier > 1
        if dt != torch.float32:  # one round-to-nearest: relative RMS <= eps / sqrt(12)
            assert tol.size_floor == tol.floor == torch.finfo(dt).eps / math.sqrt(12)


def test_rounding_is_not_flagged() -> None:
    x = _bf16(_x())
    ref = F.silu(x)
    got, base = _bf16(F.silu(x.float()).double()), _bf16(ref)  # two correct kernels: one rounding each
    v = judge_module_tensor("silu", got, ref, base, BF16, TensorFacts(covariate=x))
    assert v.ok and v.judged, v.summary()


def test_a_sharper_gate_is_caught_where_size_is_not() -> None:
    """silu's gate 1% sharper, rounded to bf16: its relative RMS stays within 3x the trusted run's (and
    parity's whole-model rule passes it), but it lifts every negative output: a conditional mean."""
    x = _bf16(_x())
    ref = F.silu(x)
    base = _bf16(ref)
    bent = _bf16(x * torch.sigmoid(1.01 * x))
    v = judge_module_tensor("silu", bent, ref, base, BF16, TensorFacts(covariate=x))
    assert v.rel_rmse < v.bound, "the bend must be invisible by size for this test to mean anything"
    assert compare_tensor("silu", bent, ref, BF16, baseline=base).ok  # the old rule passes it
    assert not v.ok and v.check in ("value", "input"), v.summary()


def test_a_scale_is_caught_by_direction() -> None:
    x = _bf16(_x(seed=1))
    ref = torch.tanh(x)
    v = judge_module_tensor("tanh", _bf16(ref * 1.01), ref, _bf16(ref), BF16, TensorFacts(covariate=x))
    assert not v.ok and v.check in ("bias", "value", "input"), v.summary()


def test_a_backward_only_bend_is_caught() -> None:
    """grad_in = grad_out x f'(x): a gradient taken at 1.02x multiplies it by f'(1.02x)/f'(x), a function of
    x: a scale that varies with the input (seen within bins of x) and, where it keeps one sign, a mean
    given the value."""
    x = _bf16(_x(seed=2))
    g = _bf16(_x(seed=3, scale=1.0))
    xr = x.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(F.silu(xr), xr, g)
    xb = (x * 1.02).requires_grad_(True)
    (bent,) = torch.autograd.grad(F.silu(xb), xb, g)
    v = judge_module_tensor("grad.in.0", _bf16(bent), ref, _bf16(ref), BF16, TensorFacts(covariate=x))
    assert v.rel_rmse < v.bound and not v.ok and v.check in ("input", "value"), v.summary()


def test_per_row_scale_rounding_is_not_flagged() -> None:
    """A correct norm may round its per-row rsqrt to bf16: every element of a row shares one scale error
    (correlated noise). The design effect from contiguous chunks and the one-rounding floor absorb it."""
    gen = torch.Generator().manual_seed(4)
    ref = torch.randn(64, 128, dtype=torch.float64, generator=gen)
    rows = 1 + torch.randn(64, 1, dtype=torch.float64, generator=gen) * torch.finfo(BF16).eps / math.sqrt(12)
    got = _bf16(ref * rows)
    v = judge_module_tensor("norm", got, ref, _bf16(ref), BF16, TensorFacts(covariate=ref))
    assert v.ok, v.summary()


def test_a_bug_in_a_vector_tail_is_caught_by_position() -> None:
    """A kernel whose scalar tail (the last eighth of the features) computes a 3%-sharper gate: pooled over
    the whole tensor its error is diluted eightfold and every pooled statistic passes it; the blocks of
    the last axis see it whole (check 5)."""
    x = _bf16(_x(64 * 128, seed=6).view(64, 128))
    ref = F.silu(x)
    bent = ref.clone()
    bent[:, -16:] = x[:, -16:] * torch.sigmoid(1.03 * x[:, -16:])
    got, base = _bf16(bent), _bf16(ref)
    pooled = judge_module_tensor("silu", got, ref, base, BF16, TensorFacts(covariate=x, positional=False))
    assert pooled.ok, "the pooled checks must miss it for this test to mean anything: " + pooled.summary()
    v = judge_module_tensor("silu", got, ref, base, BF16, TensorFacts(covariate=x))
    assert not v.ok and v.check == "position" and "last axis" in v.why, v.summary()
    flat = judge_module_tensor(
        "silu", got.flatten(), ref.flatten(), base.flatten(), BF16, TensorFacts(covariate=x.flatten(), shape=(64, 128))
    )
    assert not flat.ok and flat.check == "position", "a module's stacked calls keep their layout: " + flat.summary()


def test_a_scalar_per_row_or_column_rounded_once_is_not_flagged_by_position() -> None:
    """A correct kernel may round one scalar per row (a norm's rsqrt, a softmax's sum) or per column anywhere
    in its +-half ulp: a block of one row or one column then carries up to eps / 2 of scale."""
    gen = torch.Generator().manual_seed(7)
    eps = torch.finfo(BF16).eps
    for shape in ((16, 512), (512, 16)):
        ref = torch.randn(*shape, dtype=torch.float64, generator=gen)
        rows = 1 + (torch.rand(shape[0], 1, dtype=torch.float64, generator=gen) * 2 - 1) * eps / 2
        cols = 1 + (torch.rand(1, shape[1], dtype=torch.float64, generator=gen) * 2 - 1) * eps / 2
        for scaled in (ref * rows, ref * cols):
            v = judge_module_tensor("norm", _bf16(scaled), ref, _bf16(ref), BF16, TensorFacts(covariate=ref))
            assert v.ok, f"{shape}: {v.summary()}"


def _rms_norm_grad(
    x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, d: float = 0.0, coef: torch.Tensor | None = None
) -> torch.Tensor:
    """The gradient of RMSNorm(x) * w given g, in float64: the gradient through the variance (the term that
    projects the row's own direction out) times (1 - d); `coef` multiplies that term per row (a correct
    kernel that rounds the per-row projection coefficient)."""
    xr = x.clone().requires_grad_(True)
    var = xr.pow(2).mean(-1, keepdim=True)
    var = var.detach() + (1 - d) * (var - var.detach())
    (grad,) = torch.autograd.grad(xr * torch.rsqrt(var + 1e-6) * w, xr, g)
    if coef is None:
        return grad
    plain = g * w * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)  # the gradient without the projection
    return plain + (grad - plain) * coef


def _norm_rows(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = _bf16(torch.randn(256, 64, dtype=torch.float64, generator=gen) * 1.5)
    w = _bf16(1 + 0.1 * torch.randn(64, dtype=torch.float64, generator=gen))
    g = _bf16(torch.randn(256, 64, dtype=torch.float64, generator=gen))
    return x, w, g


def test_a_norms_backward_off_along_the_input_is_caught_row_by_row() -> None:
    """RMSNorm's backward with its variance term 4% short: the error in each row lies along that row's input,
    with a sign that changes from row to row. Its size is within 3x the trusted run's and every pooled or
    blockwise statistic (checks 2-5) averages it away; along the input, row by row (check 6), it is the
    whole error against rounding's 1 / sqrt(64) of it."""
    x, w, g = _norm_rows(8)
    ref = _rms_norm_grad(x, w, g)
    got, base = _bf16(_rms_norm_grad(x, w, g, d=0.04)), _bf16(ref)
    v = judge_module_tensor("grad.in.0", got, ref, base, BF16, TensorFacts(covariate=x))
    assert v.rel_rmse < v.bound, "the bend must be invisible by size for this test to mean anything"
    assert not v.ok and v.check == "along", v.summary()


def test_a_per_row_scalar_rounded_once_is_not_flagged_along_the_input() -> None:
    """A correct kernel may round the per-row projection coefficient of a norm's backward (anywhere in its
    +-half ulp) or a forward norm's per-row rsqrt: the first moves each row along its input by one rounding
    of a term no larger than the row, the second along the output (which check 6 takes out)."""
    eps = torch.finfo(BF16).eps
    x, w, g = _norm_rows(9)
    ref = _rms_norm_grad(x, w, g)
    coef = 1 + (torch.rand(256, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(10)) * 2 - 1) * eps / 2
    v = judge_module_tensor(
        "grad.in.0", _bf16(_rms_norm_grad(x, w, g, coef=coef)), ref, _bf16(ref), BF16, TensorFacts(covariate=x)
    )
    assert v.ok, v.summary()
    out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    v = judge_module_tensor("out.0", _bf16(out * coef), out, _bf16(out), BF16, TensorFacts(covariate=x))
    assert v.ok, v.summary()


def test_more_accurate_than_the_trusted_run_is_not_flagged() -> None:
    """cpu eager rounds an intermediate that a fused kernel keeps in fp32: the trusted run carries a
    systematic error the device does not; the device lands between the trusted run and 0."""
    x = _bf16(_x(seed=5))
    ref = F.gelu(x)
    base = _bf16(F.gelu(x) * (1 + 0.004 * torch.tanh(x)))  # the trusted kernel's own systematic error
    got = _bf16(ref)
    assert judge_module_tensor("gelu", got, ref, base, BF16, TensorFacts(covariate=x)).ok


def test_non_finite_shape_zero_and_ill_conditioned() -> None:
    ref = _x(1024, seed=6)
    nan = ref.clone()
    nan[3] = math.nan
    assert not judge_module_tensor("t", nan, ref, ref, BF16).ok
    assert not judge_module_tensor("t", ref[:512], ref, ref, BF16).ok
    tiny = ref * 1e-9  # zero in exact arithmetic (its twin says so: parity.exact_zeros): against the floor, by size
    assert judge_module_tensor("t", tiny * 1.5, tiny, tiny, BF16, TensorFacts(scale_floor=1e-3, zero=True)).ok
    assert not judge_module_tensor(
        "t", tiny * 1.5, tiny, tiny, BF16, TensorFacts(scale_floor=1e-3)
    ).ok  # small but real: 50% off
    garbage = judge_module_tensor("t", ref, ref, -ref, BF16)  # the trusted run itself is off: not judged
    assert garbage.ok and not garbage.judged and "ill-conditioned" in garbage.summary()


def _padded(kind: str, err: float) -> tuple[torch.Tensor, ...]:
    """(device, float64, trusted, input) of an input's gradient (64 rows of 64) on a text batch: 8 padded rows
    whose input is exactly 0 (the first two of 16 bins of the input), the other inputs in (0, 2]; every element
    carries one correct rounding of noise. The padded rows' bins then hold:
      "one":    a gradient exactly 0 but one element (an input exactly 0 in a live row: glm bf16's MLP), that
                element off by `err` (an element of a cancelling sum rounded elsewhere);
      "few":    two large elements (3x the others' RMS, the others 50x smaller: a heavy-tailed gradient, mixtral's
                expert weights) off by about `err`;
      "copies": one value, computed once and copied to every padded position (a repeated token's row), off by
                `err` on every copy;
      "wrong":  the same scale `err` on the bins' 512 distinct elements: a function of the input."""
    gen = torch.Generator().manual_seed(0)
    x = _bf16(torch.rand(64, 64, dtype=torch.float64, generator=gen) * 2 + 0.01)
    x[:8] = 0.0
    ref = torch.randn(64, 64, dtype=torch.float64, generator=gen) * 1e-4
    one = torch.finfo(BF16).eps / math.sqrt(12)

    def rounded(t: torch.Tensor, seed: int) -> torch.Tensor:
        return t * (1 + one * torch.randn(t.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))

    got, base = rounded(ref, 1), rounded(ref, 2)
    if kind == "one":
        ref[:8] = got[:8] = base[:8] = 0.0
        ref[7, 63] = 3e-4
        got[7, 63], base[7, 63] = ref[7, 63] * (1 + err), ref[7, 63] * (1 - 0.0008)
    elif kind == "few":
        ref[:8] *= 0.02
        got[:8], base[:8] = rounded(ref[:8], 3), rounded(ref[:8], 4)
        for (i, j), f in (((5, 10), 1.0), ((6, 20), 0.9)):
            ref[i, j] = 3e-4
            got[i, j], base[i, j] = ref[i, j] * (1 + err * f), ref[i, j] * (1 - 0.0008 * f)
    elif kind == "copies":
        ref[:8] = 1e-4
        got[:8], base[:8] = 1e-4 * (1 + err), 1e-4 * (1 - 0.0008)
    else:
        got[:8] += ref[:8] * err
    return got, ref, base, x


def test_a_bin_carried_by_one_computation_is_not_flagged_a_function_of_the_input_is() -> None:
    """A per-bin statistic's standard error is measured from the spread of the bin's elements, as independent
    draws of the noise. Two things make a bin's effective draws far fewer than its elements: one element, or a
    few large ones, carrying the bin's weight (the others' residuals say nothing about its error, and its own
    is fitted away: the spread measured was ~0, so glm's and mixtral's MLP input gradients in bf16 had a
    correct inductor flagged at -0.9% and +0.27% against one rounding's margin), and copies of one computation
    (a repeated token's row: one draw, as many times as it repeats). The rule counts copies once and measures
    each cluster's error against the others' fit (leave one out; a bin that is one computation is not
    measurable); a scale of the same size over the bin's many distinct elements, what a wrong function of the
    input makes, is still caught."""
    for kind in ("one", "few", "copies"):
        for err in (-0.009, 0.009):
            got, ref, base, x = _padded(kind, err)
            v = judge_module_tensor("grad.in.0", got, ref, base, BF16, TensorFacts(covariate=x))
            assert v.ok, f"{kind} {err}: {v.summary()}"
    for err in (-0.009, 0.009):
        got, ref, base, x = _padded("wrong", err)
        v = judge_module_tensor("grad.in.0", got, ref, base, BF16, TensorFacts(covariate=x))
        assert v.rel_rmse < v.bound and not v.ok and v.check == "input", v.summary()
