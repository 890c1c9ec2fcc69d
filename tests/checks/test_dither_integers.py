"""Rounding at random (checks/module_replay.py: Dither) moves what a rounding moves and nothing else.

The float64 reference's twin (zeros in exact arithmetic) and the noise model (every result rounded once at random)
both run a model under Dither. A small integer a computation holds as a float (a mask's 1, a count, a position) is
exact in every format judged, so no real rounding moves it; a Dither that did broke code that counts with floats:
jetmoe's router sums a scattered 1.0 per routed token and truncates, `split` then got sizes summing to 112 of 222
rows, and the hf-causal sweep reported `ref_fail` for a model whose reference runs."""

from __future__ import annotations

import pytest
import torch

from bringup.checks.module_replay import EXACT_INT, Dither
from bringup.checks.parity import TWIN_DITHER


def _router_counts(tokens: int, experts: int, top_k: int, g: torch.Generator) -> tuple[list[int], torch.Tensor]:
    """jetmoe's way of counting each expert's tokens (modeling_jetmoe.py, JetMoeTopKGating.forward)."""
    logits = torch.randn(tokens, experts, generator=g, dtype=torch.float64)
    idx = logits.topk(top_k, dim=1).indices
    gates = torch.zeros(tokens, experts, dtype=torch.float64).scatter(1, idx, 1)
    return gates.long().sum(0).tolist(), logits * 1.37


@pytest.mark.parametrize("d, every_dtype", [(TWIN_DITHER, True), (2.0**-9, False), (2.0**-25, False)])
def test_a_count_kept_in_floats_survives_and_a_real_value_still_moves(d: float, every_dtype: bool) -> None:
    tokens, top_k = 111, 2
    want, _ = _router_counts(tokens, 4, top_k, torch.Generator().manual_seed(0))
    with Dither(d, torch.Generator().manual_seed(1), every_dtype=every_dtype):
        got, scaled = _router_counts(tokens, 4, top_k, torch.Generator().manual_seed(0))
    assert got == want and sum(got) == tokens * top_k
    exact = torch.randn(tokens, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1.37
    moved = (scaled - exact).abs() / exact.abs()
    assert float(moved.max()) > d / 10  # the rounding model still rounds every value that is not a small integer


def test_only_small_integers_are_left_as_they_are() -> None:
    x = torch.tensor([0.0, 1.0, -3.0, EXACT_INT, 0.5, 1.0 + 2.0**-40, 2 * EXACT_INT, 1e6], dtype=torch.float64)
    with Dither(2.0**-9, torch.Generator().manual_seed(3)):
        y = x * 1.0  # an aten op: its result is dithered
    same = (y == x).tolist()
    assert same[:4] == [True] * 4
    assert not any(same[4:])  # a non-integer, one a hair off an integer, and integers past bf16's exact range move


def test_a_mask_minimum_stays_finite() -> None:
    """A mask's minimum (finfo.min) moved past the range became -inf; a fully masked row's softmax then turned NaN and
    the twin's gradients with it (trocr's eager attention: its key biases, zero in exact arithmetic, went unfound)."""
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        lo = torch.finfo(dtype).min
        x = torch.tensor([lo, -lo, lo / 3], dtype=dtype)
        with Dither(2.0**-9, torch.Generator().manual_seed(5), every_dtype=True):
            y = x * 1.0
        assert bool(torch.isfinite(y).all()), (dtype, y)
        scores = torch.full((2, 3), lo, dtype=dtype)  # a row whose every key is masked
        with Dither(2.0**-9, torch.Generator().manual_seed(6), every_dtype=True):
            p = torch.softmax(scores + torch.zeros_like(scores), dim=-1)
        assert bool(torch.isfinite(p).all()), (dtype, p)


def test_a_float8_result_is_dithered_too() -> None:
    """kolibri1_1 rounds its sparse keys to NVFP4 with float8_e4m3fn scales: a float8 result has no isfinite, and the
    reference raised NotImplementedError (the sweep's ref_fail). It is rounded as its own dtype rounds."""
    x = torch.tensor([0.3, 1.7, 100.0, 447.0], dtype=torch.float64)
    with Dither(2.0**-9, torch.Generator().manual_seed(7), every_dtype=False):
        y = x.float().to(torch.float8_e4m3fn).float()
    assert y.dtype == torch.float32 and bool(torch.isfinite(y).all())
    assert torch.allclose(y.double(), x, rtol=0.1)  # within e4m3's spacing (a step of 1/8 relative)
