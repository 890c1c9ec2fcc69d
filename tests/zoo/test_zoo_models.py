"""The tiny-config shrinker and the model lists (no device work, no CLI)."""

from __future__ import annotations

import pytest
import torch

import bringup.models  # noqa: F401  (torchvision shim before transformers/timm)
from bringup.models import tiny as mz
from bringup.models import tiny_config as zc
from bringup.zoo import timm_models as timm_zoo
from bringup.zoo.build import param_count


def test_shrink_keeps_one_layer_of_each_kind_and_divisibility() -> None:
    d = {
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "num_hidden_layers": 8,
        "intermediate_size": 5632,
        "vocab_size": 151936,
        "num_experts": 512,
        "num_experts_per_tok": 10,
        "moe_intermediate_size": 512,
        "attention_dropout": 0.1,
        "layer_types": ["linear", "linear", "linear", "full"] * 2,
        "mlp_only_layers": [3, 5],
        "bos_token_id": 151643,
        "eos_token_id": [151645, 7],
        "use_cache": True,
        "text_config": {"model_type": "x", "hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 4},
    }
    s = zc.shrink_dict(d)
    assert s["layer_types"] == ["linear", "linear", "full"] and s["num_hidden_layers"] == 3
    assert s["mlp_only_layers"] == [2]  # old layer 3 is the kept full-attention layer, now index 2
    assert s["hidden_size"] == s["num_attention_heads"] * s["head_dim"]
    assert (
        s["num_attention_heads"] % s["num_key_value_heads"] == 0 and s["num_key_value_heads"] < s["num_attention_heads"]
    )
    assert s["num_experts"] == 4 and s["num_experts_per_tok"] == 2 and s["moe_intermediate_size"] == 40
    assert s["attention_dropout"] == 0.0 and s["use_cache"] is False
    assert s["vocab_size"] == 251 and s["bos_token_id"] < 251 and all(t < 251 for t in s["eos_token_id"])
    assert s["text_config"]["hidden_size"] == 72 and s["text_config"]["num_hidden_layers"] == 2


def test_mha_and_mqa_flavours_survive() -> None:
    assert zc.shrink_dict({"num_attention_heads": 32, "num_key_value_heads": 32})["num_key_value_heads"] == 6
    assert zc.shrink_dict({"num_attention_heads": 32, "num_key_value_heads": 1})["num_key_value_heads"] == 1


@pytest.mark.parametrize("model_type", ["llama", "qwen3_moe", "deepseek_v3", "mamba2", "gemma3", "reformer", "gpt2"])
def test_tiny_models_build_small_and_train(model_type: str) -> None:
    b = mz.build_hf(model_type)
    assert 0 < param_count(b.model) <= mz.PARAM_LIMIT
    batch = b.make_batch(0)
    out = b.forward(b.model, batch)
    loss = b.loss(out, batch)
    loss.backward()
    assert torch.isfinite(loss)
    assert any(p.grad is not None for p in b.model.parameters())
    ids = _ids(batch)
    assert _ids(b.make_batch(1)).ne(ids).any()  # fresh seeded batch per step
    assert torch.equal(_ids(b.make_batch(1)), _ids(mz.build_hf(model_type).make_batch(1)))


def _ids(batch: dict) -> torch.Tensor:
    """Every microbatch's input_ids, one after the other (a text model's step runs a padded and a packed one)."""
    return torch.cat([m["input_ids"] for m in batch.get("_micro", [batch])])


def test_unbuildable_type_is_config_error() -> None:
    with pytest.raises(mz.ConfigError):
        mz.build_hf("llama", cfg=zc.tiny_config("llama"), limit=10)  # over the param limit


def test_overrides_all_say_why() -> None:
    from bringup.models.tiny_config import OVERRIDES

    assert all(len(o.reason) > 20 for o in OVERRIDES.values())
    assert set(OVERRIDES) <= {t for t, _ in mz.all_types()}  # model types of this transformers


def test_lists_cover_the_issue() -> None:
    assert len(mz.causal_types()) >= 190
    tasks = dict(mz.all_types())
    assert len(tasks) > 500 and tasks["llama"] == "causal-lm" and tasks["vit"] == "image-classification"
    assert len(timm_zoo.families()) >= 30
    names = [m.name for m in timm_zoo.DEFAULT_MODELS]
    assert len(names) == len(set(names))
