"""Tiny configs of the types whose shrink used to be refused or broken (the sweep's config ref_fails): widths tied
to the hidden size, per-layer configs, layer-sharing plans and composites' sub-configs shrink consistently. Each
test builds configs (and a model on the meta device) only: seconds, no training step."""

from __future__ import annotations

import math
from typing import Any

import pytest

import bringup.models  # noqa: F401  (torchvision shim before transformers/timm)
from bringup.models import tiny as mz
from bringup.models import tiny_config as zc


def _meta_params(model_type: str) -> int:
    """The causal-LM model of the type's tiny config, built on the meta device: its parameter count."""
    cfg = zc.tiny_config(model_type)
    return mz.count_params_meta(lambda: mz.hf_model_class("causal-lm").from_config(cfg))


def test_unroled_width_equal_to_hidden_shrinks_with_it() -> None:
    s = zc.shrink_dict({"hidden_size": 1024, "ext_pw_out_channel": 1024, "nemo_conv_channels": 1024, "input_size": 80})
    assert s["ext_pw_out_channel"] == s["nemo_conv_channels"] == s["hidden_size"] == 72
    assert s["input_size"] == 80  # not a width of the hidden size: kept


def test_phi4_multimodal_audio_convs_are_tiny() -> None:
    cfg = zc.tiny_config("phi4_multimodal")
    a = cfg.audio_config
    assert a.ext_pw_out_channel == a.depthwise_separable_out_channel == a.nemo_conv_channels == a.hidden_size
    assert _meta_params("phi4_multimodal") <= mz.PARAM_LIMIT  # 12.4M before


def test_blt_local_models_read_the_global_width() -> None:
    cfg = zc.tiny_config("blt")
    assert cfg.encoder_config.hidden_size_global == cfg.decoder_config.hidden_size_global
    assert cfg.encoder_config.hidden_size_global == cfg.global_config.hidden_size


def test_per_layer_config_is_passed_and_shrunk() -> None:
    layer = zc.tiny_config("dots3_note_text").per_layer_config["sliding_attention"]  # the class's default: 64 heads
    assert layer.num_attention_heads <= zc.SIZES.heads and layer.kv_lora_rank <= zc.SIZES.lora_rank
    assert layer.head_dim == layer.qk_nope_head_dim + layer.qk_rope_head_dim  # its validator's rule
    assert _meta_params("dots3_note_text") <= mz.PARAM_LIMIT  # 38.7M before
    full = zc.tiny_config("dots3_note")  # refused before: the audio adapter's width
    assert full.audio_config.adapter_input_size == full.audio_config.hidden_size
    assert full.audio_config.adapter_out_dim == full.text_config.hidden_size
    gemma4 = zc.tiny_config("gemma4_text")  # the global layers' head_dim (512 by the class's default) shrinks too
    assert gemma4.per_layer_config["full_attention"].head_dim == zc.SIZES.head_dim


def test_kv_sharing_tail_counts_the_kept_layers() -> None:
    s = zc.shrink_dict({"num_hidden_layers": 30, "num_kv_shared_layers": 30, "layer_types": ["a"] * 29 + ["b"]})
    assert s["num_kv_shared_layers"] == s["num_hidden_layers"] == 3  # all shared: all kept ones
    s = zc.shrink_dict(
        {"num_hidden_layers": 35, "num_kv_shared_layers": 15, "layer_types": ["a", "a", "b"] * 11 + ["a"] * 2}
    )
    assert s["num_kv_shared_layers"] == 0  # none of the kept layers (0, 1, 2) was in the shared tail
    assert zc.tiny_config("gemma4_unified_assistant").text_config.kv_sharing_modes == ["reuse"] * 3  # raised before
    assert zc.tiny_config("gemma3n").text_config.num_kv_shared_layers == 0  # 15 of 4 layers before
    assert zc.tiny_config("gemma3n_text").num_kv_shared_layers == 0  # derived now, no override


def test_gemma4_assistant_builds_from_a_valid_default() -> None:
    cfg = zc.tiny_config("gemma4_assistant")  # transformers 5.25 can't build Gemma4AssistantConfig() itself
    assert cfg.text_config.hidden_size_per_layer_input == 0
    assert cfg.text_config.num_kv_shared_layers == cfg.text_config.num_hidden_layers
    assert _meta_params("gemma4_assistant") <= mz.PARAM_LIMIT


@pytest.mark.parametrize("model_type", ["qwen4_exp", "qwen4_exp_text"])
def test_qwen4_exp_indexer_is_sized(model_type: str) -> None:
    cfg: Any = zc.tiny_config(model_type)
    text = cfg.get_text_config()
    assert text.indexer_kv_heads == 1 and text.indexer_budget % text.indexer_compress_ratio == 0
    assert 0 < _meta_params(model_type) <= mz.PARAM_LIMIT  # a TypeError (None // None) before


def test_zamba_shares_its_block_between_two_hybrid_layers() -> None:
    cfg = zc.tiny_config("zamba")
    assert cfg.layers_block_type.count("hybrid") == 2 and cfg.num_hidden_layers == len(cfg.layers_block_type)
    assert cfg.attention_hidden_size == 2 * cfg.hidden_size
    assert 0 < _meta_params("zamba") <= mz.PARAM_LIMIT  # the tie pattern matched nothing before


def test_a_layer_serialized_as_a_block_is_kept_whole_and_sections_partition_it() -> None:
    types = (["s", "mlp"] * 3 + ["f", "mlp"]) * 9  # dory's to_dict: each layer's attention, then "mlp"
    d = {"num_hidden_layers": 72, "layer_types": types, "n_input_layers": 16, "n_recurrent_layers": 40}
    s = zc.shrink_dict({**d, "n_output_layers": 16})
    assert s["layer_types"] == ["s", "mlp", "s", "mlp", "f", "mlp"] and s["num_hidden_layers"] == 6
    assert (s["n_input_layers"], s["n_recurrent_layers"], s["n_output_layers"]) == (2, 2, 2)
    assert zc.shrink_dict({"num_hidden_layers": 4, "layer_types": ["s", "f", "s", "f"]})["num_hidden_layers"] == 2
    cfg = zc.tiny_config("dory")  # refused before: 1 layer for 2 layer types
    assert cfg.num_hidden_layers == 3 and set(cfg.layer_types) == {"sliding_attention", "full_attention"}
    assert cfg.n_input_layers + cfg.n_recurrent_layers + cfg.n_output_layers == 3 and cfg.n_recurrent_layers == 1
    assert 0 < _meta_params("dory") <= mz.PARAM_LIMIT


def test_a_layer_sharing_plan_keeps_a_sharer_and_its_source() -> None:
    src = list(range(20))
    src[9] = src[14] = 4  # layers 9 and 14 read layer 4's K/V
    types = ["s", "s", "s", "s", "i"] * 4
    s = zc.shrink_dict(
        {"num_hidden_layers": 20, "layer_types": types, "kv_source_layers": src, "index_layers": [4, 14]}
    )
    assert s["layer_types"] == ["s", "s", "i", "i"] and s["kv_source_layers"] == [0, 1, 2, 2]
    assert s["index_layers"] == [2]  # layer 4, renumbered; 14 is not kept
    cfg = zc.tiny_config("kolibri1_1")  # refused before: layer 3 read layer 4, which was not kept
    assert cfg.kv_sharing_modes.count("reuse") == 1 and cfg.head_dim % 16 == 0
    assert cfg.index_pool_size < 37  # a row has more keys than the pool: the indexer selects
    assert 0 < _meta_params("kolibri1_1") <= mz.PARAM_LIMIT


def test_blt_patches_are_several_bytes_and_not_at_a_threshold() -> None:
    cfg = zc.tiny_config("blt")
    assert cfg.patching_threshold > math.log(cfg.vocab_size)  # no entropy of a 251-way prediction crosses it
    assert cfg.max_patch_length == 4
