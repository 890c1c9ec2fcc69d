"""The bench's tail families (tail_backend.py) are bugs only real shapes expose: each computes the exact function on
the zoo's old shapes (rows of 32 tokens, 2 rows, widths that are powers of two, 2 query heads per kv head) and
changes the gradients on today's (bringup/models/tiny_config.py Sizes: 37 tokens, 3 rows, hidden 72, head dim 12,
ffn 136, vocab 251, 3 query heads per kv head). The issue's blind spot, shown on mistral in float64: on the old shapes
no verdict could have flagged them."""

from __future__ import annotations

import dataclasses
import sys
from functools import cache
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bend_backend as bb
import tail_backend as tb

import bringup.models  # noqa: F401  (torchvision shim before transformers)
from bringup.models import tiny as mz
from bringup.models import tiny_config as zc
from bringup.zoo.steps import RunHow, train_run

OLD = dataclasses.replace(zc.SIZES, **tb.OLD_SIZES)


def _grads(old: bool, family: str | None, d: float) -> tuple[dict[str, torch.Tensor], int]:
    if old:
        bs = mz.BatchSpec(batch=tb.OLD_ROWS, seq=tb.OLD_SEQ)
        built = mz.build_hf("mistral", bs=bs, cfg=zc.tiny_config("mistral", OLD))
    else:
        built = mz.build_hf("mistral")
    init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
    modes: list[bb.BendMode] = []

    def ctx() -> bb.BendMode:
        modes.append(bb.BendMode(family or "", d))
        return modes[-1]

    out = train_run(
        built,
        init,
        [built.make_batch(0)],
        torch.device("cpu"),
        torch.float64,
        RunHow(step_context=ctx if family else None),
    )
    return out.tensors, sum(m.calls for m in modes)


def _change(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).norm() / b[k].norm().clamp_min(1e-300)) for k in b if k.startswith("grad."))


@cache
def _clean(old: bool) -> dict[str, torch.Tensor]:
    return _grads(old, None, 0.0)[0]


@pytest.mark.parametrize("family", list(tb.TAIL))
def test_a_tail_bug_is_invisible_on_the_old_shapes_and_visible_on_real_ones(family: str) -> None:
    old, calls_old = _grads(True, family, 0.1)
    assert _change(old, _clean(True)) == 0.0 and calls_old == 0  # no tail: the exact function, nothing bent
    new, calls_new = _grads(False, family, 0.1)
    assert calls_new > 0 and _change(new, _clean(False)) > 2e-3
