"""The zoo's init (models/testable_init.py) keeps every projection at its input's scale, so attention
is not uniform and a wrong softmax temperature changes the result (the power it buys is measured in
bench/verdict_power.py and shown on llama in tests/checks/test_parity.py)."""

from __future__ import annotations

import math

import torch

from bringup.models import testable_init
from bringup.zoo import run as sz


def _llama() -> torch.nn.Module:
    return sz.build_model({"source": "hf", "model": "llama", "task": "causal-lm", "seed": 0}).model


def _attention_logit_std(model: torch.nn.Module) -> float:
    """Std of q.k / sqrt(d) in the first attention block, on the model's own embeddings of random ids."""
    attn = model.model.layers[0].self_attn
    ids = torch.randint(0, model.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    x = model.model.layers[0].input_layernorm(model.model.embed_tokens(ids))
    d = attn.head_dim
    q = attn.q_proj(x).unflatten(-1, (-1, d))
    k = attn.k_proj(x).unflatten(-1, (-1, d))[..., :1, :]
    return float((q @ k.transpose(-1, -2) / math.sqrt(d)).std())


def test_linear_weights_at_fan_in_scale_and_head_kept() -> None:
    model = _llama()
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) and m is not model.get_output_embeddings():
            std, want = float(m.weight.std()), 1 / math.sqrt(m.weight.shape[1])
            assert 0.8 * want < std < 1.2 * want, f"{name}: std {std:.3g}, want ~{want:.3g}"
    head = model.get_output_embeddings().weight
    assert float(head.std()) < 0.05, "the output head (tied to the embeddings) keeps transformers' init"


def test_attention_is_not_uniform() -> None:
    with torch.no_grad():
        model = _llama()
        after = _attention_logit_std(model)
        for m in model.modules():  # transformers' own init, N(0, 0.02)
            if isinstance(m, torch.nn.Linear) and m is not model.get_output_embeddings():
                m.weight.normal_(0, 0.02)
        before = _attention_logit_std(model)
    assert before < 0.1, f"with N(0, 0.02) weights attention logits are near zero ({before:.3g})"
    assert after > 0.5, f"with fan-in init attention logits have std ~1 ({after:.3g})"


def test_seeded() -> None:
    a, b = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
    assert testable_init.fan_in_init(a, seed=3) == 1 and testable_init.fan_in_init(b, seed=3) == 1
    assert torch.equal(a.weight, b.weight)
    testable_init.fan_in_init(b, seed=4)
    assert not torch.equal(a.weight, b.weight)
