"""The bench's data-path families (datapath_backend.py) are bugs only a job's batches expose: each computes the exact
function on the zoo's old batches (uniform ids that never repeat, full rows, positions 0..n-1, no mask) and changes
the gradients on its text batches (bringup/models/batches.py). This is the issue's blind spot, shown on llama in
float64: on the old inputs no verdict could have flagged them."""

from __future__ import annotations

import dataclasses
import sys
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


def _grads(inputs: str, family: str | None, d: float, model: str = "llama") -> dict[str, torch.Tensor]:
    if inputs == "text":
        built = mz.build_hf(model, bs=mz.BatchSpec(inputs=inputs))
    else:  # the zoo's old layout, as it was: 2 rows of 16 uniform ids over the old vocabulary (no id repeats here)
        bs = mz.BatchSpec(batch=2, seq=16, inputs=inputs)
        built = mz.build_hf(model, bs=bs, cfg=zc.tiny_config(model, dataclasses.replace(zc.SIZES, **tb.OLD_SIZES)))
    init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
    ctx = None if family is None else (lambda: bb.BendMode(family, d))
    out = train_run(built, init, [built.make_batch(0)], torch.device("cpu"), torch.float64, RunHow(step_context=ctx))
    return out.tensors


def _change(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).norm() / b[k].norm().clamp_min(1e-300)) for k in b if k.startswith("grad."))


@pytest.fixture(scope="module")
def clean() -> dict[str, dict[str, torch.Tensor]]:
    return {f"{m}/{i}": _grads(i, None, 0.0, m) for m in ("llama", "gpt2") for i in ("text", "uniform")}


@pytest.mark.parametrize(
    ("family", "model"), [("dp_embed_lastwrite", "llama"), ("dp_mask_causal", "llama"), ("dp_pos_ignored", "gpt2")]
)
def test_a_data_path_bug_is_invisible_on_the_old_batches_and_visible_on_text_batches(
    family: str, model: str, clean: dict[str, dict[str, torch.Tensor]]
) -> None:
    assert _change(_grads("uniform", family, 1.0, model), clean[f"{model}/uniform"]) == 0.0
    assert _change(_grads("text", family, 0.0, model), clean[f"{model}/text"]) == 0.0  # strength 0: the exact function
    assert _change(_grads("text", family, 1.0, model), clean[f"{model}/text"]) > 1e-2


def test_rotary_positions_ignored_cancel_where_documents_and_pads_are_masked(
    clean: dict[str, dict[str, torch.Tensor]],
) -> None:
    """Rotary embeddings are relative: q.k depends on position differences, which restarting documents and a
    left pad run keep within what each token may attend to. A rotary that ignores position_ids is then (nearly)
    the right function: no verdict can or should flag it on llama (learned absolute positions, gpt2, above)."""
    assert _change(_grads("text", "dp_pos_ignored", 1.0), clean["llama/text"]) < 1e-6


def test_a_loss_that_counts_ignored_tokens_moves_more_on_padded_and_packed_batches(
    clean: dict[str, dict[str, torch.Tensor]],
) -> None:
    """Full rows leave one ignored position per row (a causal LM's shifted labels), padding and document starts
    many more: the same bug moves the old batches' gradients by 1 / seq, the text batches' by their share."""
    family = "dp_ce_ignored_counted"
    assert _change(_grads("text", family, 0.0), clean["llama/text"]) == 0.0
    old, new = (
        _change(_grads("uniform", family, 1.0), clean["llama/uniform"]),
        _change(_grads("text", family, 1.0), clean["llama/text"]),
    )
    assert new > 2 * old > 0
