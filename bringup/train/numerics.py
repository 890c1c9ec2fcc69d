"""The loss-curve band: a compiled mode's loss at every step must stay within a relative band of the
eager loss at the same step (same seed, same data, same optimizer). Out of the band: `fail_numeric`.

Why relative to eager and not to a float64 run: compile is judged against the program it compiles, on
the same device, in the same dtype; the device itself is judged by smoke/zoo against float64.
Data: `synthetic_batches(learnable=True)` (a bigram chain the model learns in a few steps), so the loss
falls and a wrong gradient changes the curve. AdamW ignores a uniform gradient scale, so the band
catches wrong directions and noise, not a constant factor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bringup.precision import parse_precision


@dataclass(frozen=True)
class LossBand:
    rel: float  # max |loss_mode - loss_eager| / |loss_eager| at any step
    reason: str


# Measured on cpu (torch 2.13, qwen3-tiny, batch 4 x 128, AdamW lr 1e-3, 12 steps, learnable data):
#   fp32: compile / regional vs eager at most 4e-7 relative; eager with 30% noise added to the MLP
#         gradients 4e-4; with the MLP gradients negated 1.6e-2.
#   bf16: compile / regional vs eager at most 2.7e-4; 30% gradient noise 1.4e-3; negated 1.8e-2.
LOSS_BANDS: dict[torch.dtype, LossBand] = {
    torch.float32: LossBand(
        1e-4, "fp32: compiled vs eager differ only by reduction order (~1e-6 relative after 12 steps); "
        "1e-4 leaves 100x for longer runs and other kernels yet flags 30% gradient noise (4e-4).",
    ),
    torch.bfloat16: LossBand(
        5e-3, "bf16: inductor keeps fp32 inside fused kernels where eager rounds every op to bf16 (2.7e-4 "
        "measured on 4 layers; a 28-64 layer model accumulates more, not measured here): 5e-3 leaves "
        "~20x and still flags a wrong-sign gradient (0.7% at step 2, 1.8% at step 12).",
    ),
    torch.float16: LossBand(
        2.5e-3, "fp16: 8x finer mantissa than bf16, so half the bf16 band (the rounding gap is smaller).",
    ),
}  # fmt: skip


def band_for(dtype: str, override: float | None = None) -> LossBand:
    if override is not None:
        return LossBand(override, "--loss-rtol")
    return LOSS_BANDS.get(parse_precision(dtype).compute_dtype, LOSS_BANDS[torch.float32])  # amp-bf16: bf16's


@dataclass(frozen=True)
class BandReport:
    ok: bool
    max_rel_dev: float
    first_bad_step: int | None  # 1-based
    band: float

    def summary(self, mode: str) -> str:
        if self.ok:
            return f"{mode} loss within {self.band:g} of eager (max {self.max_rel_dev:.2g})"
        return (
            f"{mode} loss leaves the band at step {self.first_bad_step}: {self.max_rel_dev:.3g} relative "
            f"to eager (band {self.band:g})"
        )


def rel_dev(got: float, ref: float) -> float:
    if not (math.isfinite(got) and math.isfinite(ref)):
        return 0.0 if got == ref else math.inf
    return abs(got - ref) / max(abs(ref), 1e-12)


def compare(got: Sequence[float], eager: Sequence[float], band: LossBand) -> BandReport:
    devs = [rel_dev(g, r) for g, r in zip(got, eager, strict=False)]
    if len(got) != len(eager):
        devs.append(math.inf)
    first = next((i + 1 for i, d in enumerate(devs) if not d <= band.rel), None)
    return BandReport(first is None, max(devs, default=0.0), first, band.rel)


def first_nonfinite(losses: Sequence[float]) -> int | None:
    return next((i + 1 for i, x in enumerate(losses) if not math.isfinite(x)), None)
