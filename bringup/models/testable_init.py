"""Initialisation that makes every operator of a tiny zoo model matter to its result.

transformers draws Linear weights from N(0, initializer_range = 0.02). At the zoo's hidden size (64)
each projection then shrinks its input ~6x (sqrt(64) x 0.02 = 0.16): attention logits have a standard
deviation of ~0.03, attention is uniform whatever its scale, and an MLP's activation sees inputs so small
that gelu is linear. A device whose softmax temperature is 1% off, or whose gelu is, computes nearly the
same numbers as a correct one, and no parity rule can tell them apart. A trained model is not like that.

`fan_in_init` redraws the weight of every Linear (and transformers' Conv1D, gpt2's transposed Linear)
from N(0, 1 / fan_in) (LeCun): each projection keeps its input's scale, so attention logits have a
standard deviation of ~1 and activations see inputs of unit size, as in a trained model. The output
head (tied to the input embeddings in most LMs) keeps its init, so the first loss stays ~log(vocab).
Seeded; returns how many weights were drawn. Measured effect (bench/verdict_power.py, bf16): a 1%
attention-scale error flagged on 9 of 14 causal LMs instead of 0; a 1% activation error on 13 of 14
instead of 10.
"""

from __future__ import annotations

import math

import torch


def _output_weight(model: torch.nn.Module) -> torch.Tensor | None:
    get = getattr(model, "get_output_embeddings", None)
    try:
        head = get() if callable(get) else None
    except (AttributeError, NotImplementedError):
        head = None
    w = getattr(head, "weight", None)
    return w if isinstance(w, torch.Tensor) else None


def _fan_in(m: torch.nn.Module, w: torch.Tensor) -> int | None:
    if isinstance(m, torch.nn.Linear):
        return int(w.shape[1])
    if type(m).__name__ == "Conv1D" and w.dim() == 2:  # transformers.pytorch_utils.Conv1D: (in, out)
        return int(w.shape[0])
    return None


def fan_in_init(model: torch.nn.Module, seed: int = 0) -> int:
    """Redraw every Linear / Conv1D weight of `model` from N(0, 1/fan_in), except the output head."""
    g = torch.Generator().manual_seed(seed * 7 + 5)
    head = _output_weight(model)
    n = 0
    with torch.no_grad():
        for m in model.modules():
            w = getattr(m, "weight", None)
            if not isinstance(w, torch.nn.Parameter) or not w.is_floating_point() or w is head or not w.numel():
                continue
            fan = _fan_in(m, w)
            if not fan:
                continue
            w.copy_((torch.randn(w.shape, generator=g, dtype=torch.float32) / math.sqrt(fan)).to(w.dtype))
            n += 1
    return n
