"""Per-type fixes of the tiny-config shrinker (models/tiny_config.py) that its generic role rules can't derive, each
with its reason: the values a type's tiny config needs, the inputs it needs, the base a default that fails its own
validation is shrunk from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Override:
    """Extra config values for one model type (applied after the generic shrink), with the reason."""

    values: dict[str, Any]
    reason: str
    inputs: dict[str, Any] = field(default_factory=dict)  # extra input-construction hints
    # the type's default config fails its own class's validation: these values build the default that is shrunk
    base: dict[str, Any] = field(default_factory=dict)


# Per-type fixes the generic role rules can't derive. Each entry says why.
OVERRIDES: dict[str, Override] = {
    "gpt_neo": Override({"attention_types": [[["global", "local"], 1]]},
                        "attention_layers is expanded from attention_types = [[pattern, repeats]] (12 x "
                        "global+local by default): one global+local pair for the 2 kept layers"),
    "mamba2": Override({"num_heads": 12},
                       "SSM heads x head_dim must equal expand x hidden_size: 12 x 12 = 2 x 72"),
    "bamba": Override({"mamba_n_heads": 6, "mamba_d_head": 24},
                      "mamba heads (128 by default, not a role) must divide mamba_expand x hidden_size: "
                      "6 x 24 = 2 x 72"),
    "mimo_v2_flash": Override({"num_key_value_heads": 1},
                              "its sliding-window layers take twice the kv heads, and the query heads must be a "
                              "multiple of those too: 6 query heads over 1 kv head (2 on the windowed layers)"),
    "granitemoehybrid": Override({"mamba_n_heads": 6, "mamba_d_head": 24},
                                 "mamba heads (128 by default, not a role) must divide mamba_expand x hidden_size: "
                                 "6 x 24 = 2 x 72"),
    "deepseek_v2": Override({"num_experts_per_tok": 2},
                            "defaults to None, which greedy top-k routing can't use; the tester sets 2"),
    "dots1": Override({"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1},
                      "MoE sizes default to None in Dots1Config (the MoE layer then can't be built)"),
    "lfm2_moe": Override({"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
                         "layer_types defaults to None but the modeling code indexes it: one short-conv "
                         "and one attention layer, the first dense, the second MoE"),
    "cohere_compass_text": Override({"rope_parameters": {"full_attention": {"rope_type": "default",
                                                                           "rope_theta": 10000.0}}},
                                    "default rope_parameters is empty but attention reads "
                                    "rope_parameters[layer_type]"),
    "dbrx": Override({"attn_config": {"rope_theta": 10000.0, "clip_qkv": 8.0}},
                     "modeling_dbrx reads attn_config.rope_theta, which DbrxAttentionConfig no longer "
                     "defines (transformers 5.24), and clamps q/k/v with clip_qkv even when it is None"),
    "longcat_flash": Override({"head_dim": 8},
                              "rotary embedding is sized by head_dim, applied to the qk_rope_head_dim (8) part"),
    "xmod": Override({"default_language": "en_XX"},
                     "X-MOD routes through a per-language adapter and refuses to run without a language"),
    "reformer": Override({"is_decoder": True, "axial_pos_shape": [5, 8], "axial_pos_embds_dim": [36, 36],
                          "max_position_embeddings": 40, "local_attn_chunk_length": 4,
                          "lsh_attn_chunk_length": 4, "num_buckets": 2, "attention_head_size": 12,
                          "attn_layers": ["local", "local"]},
                         "an LM head needs is_decoder; in training the sequence length must equal the product of "
                         "axial_pos_shape and be a multiple of the chunk lengths (as the tester): its rows are 40 "
                         "tokens (5 x 8; the zoo's 37 is prime), its axial embeddings sum to hidden 72. "
                         "Local attention only: LSH bucketing is discontinuous (fp32 and fp64 pick other "
                         "buckets: 76% grad error with a fixed hash_seed), so no run can match float64",
                         inputs={"seq": 40}),
    "gemma4_assistant": Override({"text_config": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}},
                                 "its default text_config (gemma4_text's defaults) has per-layer inputs, which the "
                                 "assistant's own validation refuses (transformers 5.25 can't build "
                                 "Gemma4AssistantConfig()): an assistant without them, as its validator requires",
                                 base={"text_config": {"model_type": "gemma4_text", "hidden_size_per_layer_input": 0,
                                                       "vocab_size_per_layer_input": 0}}),
    "distilbert": Override({"dim": 64, "hidden_dim": 128},
                           "DistilBERT's width is `dim` and its FFN width `hidden_dim` (which the roles read as a "
                           "width): without this the tiny model keeps dim 768 (5.9M params)"),
    "qwen4_exp_text": Override({"indexer_n_heads": 6, "indexer_kv_heads": 1, "indexer_head_dim": 12,
                                "indexer_budget": 16, "indexer_compress_ratio": 4},
                               "the QSA indexer sizes default to None, but every indexed_attention layer builds an "
                               "indexer from them (transformers 5.25 can't build Qwen4ExpTextConfig()): 6 query heads "
                               "over the 1 key head it requires, head dim 12, blocks of 4 tokens and a budget of 4 of "
                               "a row's 9 blocks, so the selection really drops blocks"),
    "zamba": Override({"num_hidden_layers": 3, "attention_hidden_size": 144,
                       "layers_block_type": ["linear_attention", "hybrid", "hybrid"]},
                      "every hybrid layer runs the one shared transformer block (its weights tied across them); "
                      "transformers refuses a block shared by a single layer (the tie pattern matches nothing), so "
                      "the tiny model keeps two hybrid layers after a mamba one, which also exercises the sharing "
                      "(3 layers: each runs a mamba scan, which inductor unrolls). The block reads the hidden state "
                      "concatenated with the embeddings: attention_hidden_size is 2 x hidden"),
    "blt": Override({"patching_threshold": 6.0, "max_patch_length": 4},
                    "patches start where the byte patcher's next-byte entropy exceeds the threshold (1.34); a random "
                    "patcher's entropy is near ln(251) = 5.5 on every byte, so every byte was its own patch: each "
                    "cross-attention query saw one key (a gradient of exactly 0 in float64, fp32's rounding "
                    "elsewhere: 'ill-conditioned') and a threshold near the entropies would flip boundaries between "
                    "fp32 and float64. Above ln(251) no entropy crosses it, and max_patch_length splits the row into "
                    "4-byte patches (BLT's average is about 4.5)"),
    "kolibri1_1": Override({"head_dim": 16, "index_num_heads": 3, "index_pool_size": 16, "index_compression": 4,
                            "index_topk": 8, "index_num_local_tokens": 4, "index_num_sink_tokens": 2},
                           "its sparse layers round keys and values to NVFP4 (a scale per 16 values): head_dim must "
                           "be a multiple of 16; the indexer's heads must fit one kv head's query group (6 / 2 = 3); "
                           "and at the defaults (a pool of 16384 keys, top 2048, 128 local tokens) a 37-token row "
                           "sees no more keys than that and attends to all of them: a pool of 16 in blocks of 4, "
                           "top 8, 4 local and 2 sink tokens select from the row"),
    "git": Override({}, "GitForCausalLM drops the image-token positions from the logits: it needs an image",
                    inputs={"pixel_values": True}),
}  # fmt: skip
