"""Zero in exact arithmetic is measured, not guessed from size (checks/parity.py: exact_zeros, TWIN_DITHER).

A gradient that cancels exactly (a key bias's under softmax) is rounding residue in any run: it is judged against the
scale of the terms that cancel, by size only. A gradient that is merely small (a norm weight at 1% of the median)
is real: judged like every tensor, its direction included, so a device that zeroes it fails. The old rule called
everything under 10 eps of the median "numerically zero" (7.8% in bf16) and let such a device through."""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

import bringup.models  # noqa: F401  (torchvision shim before transformers)
from bringup.checks.parity import (
    TWIN_DITHER,
    CompareHow,
    compare_tensor,
    exact_zeros,
    floor_fraction,
    parity,
    rms,
    scale_floor,
)
from bringup.zoo import judge as zj
from bringup.zoo import run as sz
from bringup.zoo.spec import ZooSpec


def _twin(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return x * (1 + TWIN_DITHER * torch.randn(x.shape, generator=g, dtype=torch.float64))


def test_a_true_zero_is_residue_in_both_twins_and_a_small_value_is_not() -> None:
    g = torch.Generator().manual_seed(0)
    terms = torch.randn(64, 32, generator=g, dtype=torch.float64)
    cancel = terms - terms.mean(0)  # columns that sum to zero exactly
    ref = {"real": terms.sum(0), "small": 1e-3 * terms[0], "zero": cancel.sum(0), "exact": torch.zeros(5)}
    twin = {"real": _twin(terms, g).sum(0), "small": 1e-3 * _twin(terms[0:1], g)[0], "zero": _twin(cancel, g).sum(0)}
    assert exact_zeros(ref, twin) == {"zero", "exact"}  # a value 1e-3 of its terms is real; exact zeros need no twin
    assert rms(ref["zero"]) < 1e-12 * rms(ref["real"])


def test_a_device_that_zeroes_a_small_real_gradient_fails_by_its_direction() -> None:
    g = torch.Generator().manual_seed(1)
    refs = {f"w{i}": torch.randn(256, generator=g, dtype=torch.float64) for i in range(8)}
    refs["bias"] = 0.02 * torch.randn(32, generator=g, dtype=torch.float64)  # 2% of the median RMS
    trusted = {k: (v * (1 + 4e-3 * torch.randn(v.shape, generator=g, dtype=torch.float64))).to(torch.bfloat16)
               for k, v in refs.items()}  # fmt: skip
    got = {**trusted, "bias": torch.zeros(32, dtype=torch.bfloat16)}
    assert rms(refs["bias"]) < scale_floor(refs.values(), torch.bfloat16)  # the old rule's "numerically zero"
    rep = parity(got, refs, torch.bfloat16, baseline=trusted)
    bad = next(t for t in rep.tensors if t.name == "bias")
    assert not rep.ok and not bad.ok and bad.bias < -0.9, rep.summary()
    assert parity(trusted, refs, torch.bfloat16, baseline=trusted).ok
    # had it been zero in exact arithmetic, the same error would be residue measured against the floor
    floor = scale_floor(refs.values(), torch.bfloat16)
    as_zero = compare_tensor(
        "bias", got["bias"], refs["bias"], torch.bfloat16, trusted["bias"], CompareHow(scale_floor=floor, zero=True)
    )
    assert as_zero.rel_rmse < 1 and as_zero.bound >= 2 * torch.finfo(torch.bfloat16).eps / floor_fraction("bf16")


@cache
def _mixtral() -> tuple[Any, ...]:
    spec = ZooSpec(source="hf", model="mixtral", task="causal-lm", dtype="bf16", steps=2, noise_seeds=1, inputs="text")
    prep = sz.prepare(spec)
    base = sz.train_run(prep.built, prep.init, prep.batches, torch.device("cpu"), spec.prec)
    return spec, prep, base, sz.trusted_noise(spec, prep)


def test_zeroing_mixtrals_small_norm_and_router_gradients_is_flagged() -> None:
    """mixtral's post-attention norm weights and router weights have gradients at 0.7-1.7% of the median RMS: real
    (the twin moves them by ~1e-5 of themselves), so a bf16 device that returns 0 for one of them fails."""
    spec, prep, base, noise = _mixtral()
    med = sorted(rms(v) for v in prep.ref.tensors.values())[len(prep.ref.tensors) // 2]
    small = [k for k, v in prep.ref.tensors.items() if k.startswith("grad.") and 0.005 < rms(v) / med < 0.05]
    assert any("layernorm" in k for k in small) and any("mlp.gate.weight" in k for k in small), small
    assert not (set(small) & prep.zeros)
    rep, _ = zj.judge_run(base, prep.ref, base, spec.prec, noise)
    assert rep.ok, rep.summary()  # the trusted run against itself: nothing off
    for name in small:
        got = sz.RunOut({**base.tensors, name: torch.zeros_like(base.tensors[name])}, base.curve)
        rep, _ = zj.judge_run(got, prep.ref, base, spec.prec, noise)
        assert not rep.ok and rep.worst is not None and rep.worst.name == name, (name, rep.summary())


def test_big_birds_key_bias_gradient_is_zero_in_exact_arithmetic() -> None:
    spec = ZooSpec(source="hf", model="big_bird", task="causal-lm", dtype="fp32", steps=1, noise_seeds=0, inputs="text")
    prep = sz.prepare(spec)
    keys = {k for k in prep.ref.tensors if k.endswith("attention.self.key.bias")}
    assert keys and keys <= prep.zeros and len(prep.zeros) == len(keys)
