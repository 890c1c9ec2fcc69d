"""Tiny configs for every transformers architecture (the zoo's config shrinking; models/tiny.py builds
the models and their batches from them).

`tiny_config(model_type)` shrinks a model type's default config consistently, the way transformers'
own model testers do (tests/causal_lm_tester.py: hidden 32, 2 layers, 2 heads, vocab 99): every size
in the config (and in its text / vision / audio sub-configs) is set by its ROLE, so hidden size, head
count, head dim and kv heads stay divisible, experts and their intermediate sizes shrink together,
per-layer lists (layer_types, ...) follow the layer count, and token ids stay inside the vocabulary.
A small override table (`OVERRIDES`, models/tiny_overrides.py) fixes the types the generic rules can't, each with
its reason.

Nothing is downloaded: configs come from the config classes' defaults.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bringup.models.tiny_overrides import OVERRIDES


@dataclass(frozen=True)
class Sizes:
    """The tiny sizes every config is shrunk to (one place, so all types shrink alike). The widths a kernel tiles
    are not powers of two, so a block loop's partial tail runs in every one of them, as it does at real sizes
    (vocabularies of 50257 or 151936, head dims of 80 or 96): hidden 72 (64 + 8), head dim 12 (8 + 4, and a
    part of any wider block), intermediate 136 (128 + 8), experts' 40 (32 + 8), vocab 251 (prime), and query
    heads grouped 3 to a kv head. Rows are 37 tokens and a padded microbatch 3 rows (zoo/args.py)."""

    hidden: int = 72
    heads: int = 6
    kv_heads: int = 2  # GQA (3 query heads per kv head: a ratio other than 2) unless the type is MHA or MQA
    head_dim: int = 12  # hidden / heads
    layers: int = 2
    ffn: int = 136
    moe_ffn: int = 40
    experts: int = 4
    top_k: int = 2
    vocab: int = 251
    positions: int = 256
    lora_rank: int = 32  # MLA q/kv low-rank projections
    rope_head_dim: int = 8  # MLA rotary part
    state: int = 16  # SSM state size
    image: int = 32  # vision towers: 32x32 images
    patch: int = 8
    mel_bins: int = 16
    max_layers: int = 4  # hybrids keep one layer of each kind, up to this many


SIZES = Sizes()

# ---- roles: config key -> what it sizes -----------------------------------------------------------
_ROLES: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden_size", "d_model", "n_embd", "n_embed", "model_dim", "embed_dim", "emb_dim", "hidden_dim",
               "d_embed", "word_embed_proj_dim", "attention_hidden_size", "lru_width", "embedding_size",
               "input_embedding_size", "output_embedding_size", "dim_model", "text_embed_dim", "projection_dim",
               "backbone_hidden_size", "router_hidden_size", "output_hidden_size", "hidden_size_per_layer",
               "pronunciation_embed_dim", "shape_embed_dim", "adapter_in_dim", "adapter_out_dim", "hidden_size_global",
               "hidden_sizes", "embed_dims", "embedding_dims"),
    "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
              "decoder_attention_heads", "attention_heads", "num_encoder_attention_heads",
              "num_decoder_attention_heads", "swa_num_attention_heads", "index_n_heads", "linear_num_heads",
              "linear_num_key_heads", "linear_num_value_heads", "num_attention_heads_text"),
    "kv_heads": ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "swa_num_key_value_heads",
                 "num_query_groups", "n_head_kv", "num_kv"),
    "head_dim": ("head_dim", "d_head", "attention_head_dim", "attention_head_size", "kv_channels", "swa_head_dim",
                 "dim_head", "linear_key_head_dim", "linear_value_head_dim", "index_head_dim", "linear_head_dim",
                 "d_kv", "qk_head_dim_text"),
    "layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers", "depths",
               "num_encoder_layers", "num_decoder_layers", "num_text_layers"),
    "ffn": ("intermediate_size", "ffn_dim", "n_inner", "d_ff", "d_inner", "encoder_ffn_dim", "decoder_ffn_dim",
            "ffn_hidden_size", "feed_forward_size", "dim_ff", "dff", "intermediate_size_mlp",
            "dense_intermediate_size", "shared_intermediate_size", "shared_expert_intermediate_size",
            "shared_experts_intermediate_size", "moe_shared_expert_intermediate_size", "mlp_only_intermediate_size"),
    "moe_ffn": ("moe_intermediate_size", "expert_ffn_hidden_size"),
    "experts": ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts", "zero_expert_num"),
    "top_k": ("num_experts_per_tok", "moe_topk", "moe_k", "num_experts_per_token", "top_k", "router_topk"),
    "one": ("n_group", "num_expert_group", "topk_group", "mamba_n_groups", "n_groups", "mamba_ngroups",
            "first_k_dense_replace", "num_nextn_predict_layers", "moe_layer_start_index", "n_shared_experts",
            "num_shared_experts", "moe_num_shared_experts", "num_dense_layers"),
    "vocab": ("vocab_size", "decoder_vocab_size", "unpadded_vocab_size", "vocab_size_per_layer_input",
              "pronunciation_vocab_size", "shape_vocab_size", "encoder_hash_byte_group_vocab"),
    "positions": ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "context_length",
                  "max_target_positions", "max_source_positions", "max_length_text"),
    "lora_rank": ("q_lora_rank", "kv_lora_rank", "o_lora_rank"),
    "rope_head_dim": ("qk_rope_head_dim", "qk_nope_head_dim"),
    "v_head_dim": ("v_head_dim",),
    "rotary_dim": ("rotary_dim", "rotary_emb_base_dim"),
    "state": ("state_size", "ssm_state_size", "mamba_d_state", "d_state"),
    "image": ("image_size",),
    "patch": ("patch_size",),
    "mel_bins": ("num_mel_bins",),
}  # fmt: skip
ROLE_OF: dict[str, str] = {k: role for role, keys in _ROLES.items() for k in keys}

# keys that hold per-layer lists (resized with the layer count) and index lists (filtered)
_INDEX_LIST_KEYS = (
    "mlp_only_layers",
    "full_attn_idxs",
    "moe_layers",
    "no_rope_layers",
    "hybrid_layer_ids",
    "attention_layers_idx",
    "attn_layer_indices",
    "ple_layer_ids",
    "index_layers",
)
_PER_LAYER_DICT_KEYS = ("per_layer_config",)
# counts of trailing layers (gemma3n / gemma4's last N layers reuse earlier layers' kv caches; all of them in an
# assistant model): the kept layers that were among them, never more than the kept layers
_TAIL_COUNT_KEYS = ("num_kv_shared_layers",)
# keys whose value the shrinker never touches (dropout etc. are handled separately)
_TOKEN_ID = re.compile(
    r"(^|_)(token_id|token_index|token_ids|_id)$|_token_id$|_token_index$|^(bos|eos|pad|sep|cls|"
    r"mask|unk|decoder_start)_"
)
DROPOUT = re.compile(
    r"(dropout|drop_rate|pdrop|drop_prob|layerdrop|drop_path|jitter_noise|mask_time_prob|"
    r"mask_feature_prob)",
    re.IGNORECASE,
)


# ---- the shrinker ---------------------------------------------------------------------------------
def _is_sub_config(v: Any) -> bool:
    return isinstance(v, dict) and "model_type" in v


def _kv_for(default_heads: Any, default_kv: Any, s: Sizes) -> int:
    """Keep the type's attention flavour: MHA stays MHA, MQA stays MQA, GQA becomes 2:1."""
    if isinstance(default_heads, int) and isinstance(default_kv, int):
        if default_kv >= default_heads:
            return s.heads
        if default_kv == 1:
            return 1
    return s.kv_heads


def _layer_selection(n_old: int, lists: list[list[Any]], s: Sizes) -> list[int]:
    """Which old layer indices to keep: the first `s.layers`, plus the first layer of each kind the
    per-layer lists name that those miss (a hybrid keeps one layer of each kind), up to max_layers."""
    keep = list(range(min(n_old, s.layers)))
    for lst in lists:
        seen = {_hashable(lst[i]) for i in keep if i < len(lst)}
        for i, v in enumerate(lst):
            hv = _hashable(v)
            if hv not in seen and len(keep) < s.max_layers:
                keep.append(i)
                seen.add(hv)
    return sorted(keep)


def _kept_layers(n_old: int, lists: list[list[Any]], block: int, s: Sizes) -> list[int]:
    """_layer_selection over the per-layer lists, keeping two kinds of plan whole: a config that serializes each
    layer as a block of entries (_block_size: dory's layer_types list each layer's attention, then "mlp") keeps
    whole blocks, and a layer-sharing plan (_is_source_plan: kolibri1_1's kv_source_layers, the layer whose K/V
    each layer reads) keeps a layer that reads another's, and that one."""
    if block > 1:
        blocks = [[tuple(lst[j * block : (j + 1) * block]) for j in range(n_old // block)] for lst in lists]
        return [j * block + o for j in _layer_selection(n_old // block, blocks, s) for o in range(block)]
    kinds = [[i == v for i, v in enumerate(lst)] if _is_source_plan(lst) else lst for lst in lists]
    keep = set(_layer_selection(n_old, kinds, s))
    for lst in lists:
        if _is_source_plan(lst):
            keep |= {lst[i] for i in keep}
    return sorted(keep)


def _block_size(lists: list[list[Any]], n: int) -> int:
    """The entries per layer of a per-layer list whose every b-th entry from the second on is one constant found
    nowhere else (dory: [attention, "mlp", attention, "mlp", ...]) while the first entries vary; else 1."""
    for b in (2, 3, 4):
        for lst in lists:
            if n % b or len({_hashable(x) for x in lst[0::b]}) < 2:
                continue
            rest = [{_hashable(x) for x in lst[o::b]} for o in range(1, b)]
            if all(len(r) == 1 for r in rest) and not set().union(*rest) & {_hashable(x) for x in lst[0::b]}:
                return b
    return 1


def _is_source_plan(v: list[Any]) -> bool:
    """A per-layer list of layer indices, each layer's source (itself, or an earlier layer that is its own
    source), with at least two layers that are their own and one that is not: a layer-sharing plan."""
    if not (len(v) > 2 and all(_is_int(x) and 0 <= x <= i for i, x in enumerate(v))):
        return False
    own = sum(1 for i, x in enumerate(v) if x == i)
    return 2 <= own < len(v) and all(v[x] == x for x in v)


def _shrink_sections(d: dict[str, Any], out: dict[str, Any], n_old: int, units: int, block: int) -> None:
    """Layer counts that partition the layers (dory's n_input_layers + n_recurrent_layers + n_output_layers =
    num_hidden_layers) partition the kept `units` (blocks of `block` entries): one each, the rest to the largest."""
    keys = [k for k, v in d.items() if _is_int(v) and k.endswith("_layers") and ROLE_OF.get(k) is None and v > 0]
    if len(keys) < 2 or sum(d[k] for k in keys) != n_old or units < len(keys):
        return
    share = {k: 1 for k in keys}
    share[max(keys, key=lambda k: d[k])] += units - len(keys)
    for k in keys:
        out[k] = share[k] * block


def _increasing(v: list[Any]) -> bool:
    return all(isinstance(x, int) for x in v) and all(a < b for a, b in zip(v, v[1:], strict=False))


def _hashable(v: Any) -> Any:
    return repr(v) if isinstance(v, (list, dict)) else v


def shrink_dict(d: dict[str, Any], s: Sizes = SIZES) -> dict[str, Any]:
    """The shrunk copy of a config dict (recursing into sub-config dicts): the layers first (per-layer lists are
    resized to the kept layers), then every other value by its role."""
    out = copy.deepcopy(d)
    per_layer = _shrink_layers(d, out, s)
    if "use_cache" in d:
        out["use_cache"] = False  # training: no kv cache (hybrids also trip over an empty one)
    heads_default = next((d[k] for k in d if ROLE_OF.get(k) == "heads" and isinstance(d[k], int)), None)
    for k, v in d.items():
        _shrink_value(k, v, d, out, s, per_layer, heads_default)
    _shrink_hidden_aliases(d, out)
    if all(_is_int(d.get(k)) for k in _MLA_DIMS) and d["head_dim"] == d["qk_nope_head_dim"] + d["qk_rope_head_dim"]:
        out["head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]  # an MLA head: its two parts, shrunk
    _fix_token_ids(out, s)
    return out


_MLA_DIMS = ("head_dim", "qk_nope_head_dim", "qk_rope_head_dim")
# an int field no role names whose default equals the config's own hidden size is that width under another name
# (phi4_multimodal's audio conv channels, dots3_note's audio adapter_input_size, which its config checks against
# hidden_size): it shrinks with the hidden size
_WIDTH_NAME = re.compile(r"(_size|_dim|_channels?)$")


def _shrink_hidden_aliases(d: dict[str, Any], out: dict[str, Any]) -> None:
    """An unroled width (_WIDTH_NAME) equal to the config's hidden size (its first "hidden" key) shrinks with it."""
    hidden_key = next((k for k in d if ROLE_OF.get(k) == "hidden" and _is_int(d[k])), None)
    if hidden_key is None or d[hidden_key] <= out[hidden_key]:
        return
    for k, v in d.items():
        if ROLE_OF.get(k) is None and _is_int(v) and v == d[hidden_key] and _WIDTH_NAME.search(k):
            out[k] = out[hidden_key]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shrink_layers(d: dict[str, Any], out: dict[str, Any], s: Sizes) -> list[str]:
    """The layer counts, the per-layer lists, the layer-index lists and per-layer dicts, on `out`: the kept
    layers (_layer_selection), renumbered. Returns the per-layer lists' keys."""
    layer_keys = [k for k in d if ROLE_OF.get(k) == "layers" and _is_int(d[k])]
    n_old = max((d[k] for k in layer_keys), default=0)
    per_layer = [
        k
        for k, v in d.items()
        if isinstance(v, list) and n_old and len(v) == n_old and k not in ("id2label", "label2id")
    ]
    block = _block_size([d[k] for k in per_layer], n_old)
    keep = _kept_layers(n_old, [d[k] for k in per_layer], block, s) if n_old else []
    for k in layer_keys:
        if d[k] == n_old:
            out[k] = len(keep)
        else:  # a second, smaller layer count (e.g. decoder vs encoder): same shrink
            out[k] = min(d[k], s.layers)
    remap = {old: new for new, old in enumerate(keep)}
    for k in per_layer:  # a sharing plan's values are layer indices: renumbered
        out[k] = [remap[d[k][i]] for i in keep] if _is_source_plan(d[k]) else [d[k][i] for i in keep]
    for k in _TAIL_COUNT_KEYS:  # the last N layers of the original: the kept layers among them
        if _is_int(d.get(k)) and keep:
            out[k] = sum(1 for i in keep if i >= n_old - d[k])
    _shrink_sections(d, out, n_old, len(keep) // block, block)
    for k in _INDEX_LIST_KEYS:
        if isinstance(d.get(k), list) and keep and not (k in per_layer and not _increasing(d[k])):
            # an index list (filtered and renumbered); one with a value per layer that is not a list of
            # indices (smollm3's no_rope_layers: a 0/1 flag per layer) was resized with the layers above
            out[k] = [remap[i] for i in d[k] if isinstance(i, int) and i in remap]
    for k in _PER_LAYER_DICT_KEYS:  # {"05": {...overrides for layer 5...}}: keep the kept layers' entries
        if isinstance(d.get(k), dict) and keep:
            width = max((len(str(i)) for i in d[k]), default=1)  # keys keep their format ("05")
            out[k] = {
                (str(remap[int(i)]).zfill(width) if isinstance(i, str) else remap[int(i)]): _shrink_layer_entry(d, v, s)
                for i, v in d[k].items()
                if str(i).isdigit() and int(i) in remap and isinstance(v, dict)
            }
    return per_layer


def _shrink_layer_entry(d: dict[str, Any], entry: dict[str, Any], s: Sizes) -> dict[str, Any]:
    """One layer's overrides, shrunk as that layer's whole config (the global values with the entry's on top), so
    a size the entry leaves to the global config stays consistent with the entry's (dots3_note's sliding layers:
    head_dim = qk_nope_head_dim + qk_rope_head_dim); the entry's keys plus those whose shrunk value differs."""
    base = {k: v for k, v in d.items() if k not in _PER_LAYER_DICT_KEYS and not _is_sub_config(v)}
    whole, shrunk_base = shrink_dict({**base, **entry}, s), shrink_dict(base, s)
    return {k: v for k, v in whole.items() if k in entry or v != shrunk_base.get(k)}


def _shrink_value(
    k: str, v: Any, d: dict[str, Any], out: dict[str, Any], s: Sizes, per_layer: list[str], heads_default: Any
) -> None:
    """One config value shrunk by its role, on `out` (a sub-config recursed into, dropout zeroed, rope's
    factors, an int list per stage or layer, a derived None made explicit, an int set to its role's size)."""
    role = ROLE_OF.get(k)
    if _is_sub_config(v):
        out[k] = shrink_dict(v, s)
    elif isinstance(v, bool):
        return
    elif isinstance(v, float) and DROPOUT.search(k):
        out[k] = 0.0
    elif k in ("rope_parameters", "rope_scaling") and isinstance(v, dict):
        out[k] = _shrink_rope(v, s)
    elif role is None or (role == "layers" and not isinstance(v, list)):
        return
    elif isinstance(v, list) and v and all(_is_int(x) for x in v):
        if k in per_layer and role in ("hidden", "heads", "layers"):
            # a per-stage list whose length happens to equal the layer count (swin: depths and
            # num_heads per stage, num_layers = len(depths)): already cut to the kept stages
            out[k] = _shrink_list(role, out[k], s)
        elif k in per_layer:  # a per-layer list (e.g. intermediate_size per layer): already resized
            out[k] = [role_value(role, s) if role not in ("one", "kv_heads") else x for x in out[k]]
        else:
            out[k] = _shrink_list(role, v, s)
    elif v is None and role in ("kv_heads", "head_dim") and k in ("num_key_value_heads", "head_dim"):
        # None means "derive it" in most configs, but some models read it raw: make it explicit
        out[k] = s.head_dim if role == "head_dim" else s.heads
    elif not isinstance(v, int):
        return
    elif role == "kv_heads":
        out[k] = _kv_for(heads_default, v, s)
    elif role == "one":
        out[k] = min(v, 1)
    else:
        target = role_value(role, s)
        # shrink, never grow (a type whose default is already smaller keeps it), never below 1
        out[k] = max(1, min(v, target)) if role not in ("hidden", "heads", "head_dim") else target


def role_value(role: str, s: Sizes) -> int:
    return {
        "hidden": s.hidden,
        "heads": s.heads,
        "head_dim": s.head_dim,
        "ffn": s.ffn,
        "moe_ffn": s.moe_ffn,
        "experts": s.experts,
        "top_k": s.top_k,
        "vocab": s.vocab,
        "positions": s.positions,
        "lora_rank": s.lora_rank,
        "rope_head_dim": s.rope_head_dim,
        "rotary_dim": s.head_dim // 2,
        "v_head_dim": s.head_dim,
        "state": s.state,
        "image": s.image,
        "patch": s.patch,
        "mel_bins": s.mel_bins,
    }[role]


def _shrink_rope(rope: dict[str, Any], s: Sizes) -> dict[str, Any]:
    """Multimodal rope (mrope_section: the rotary half-dim split between t/h/w) must sum to the
    shrunk head_dim / 2: keep the proportions. Per-layer-type rope dicts recurse."""
    out = dict(rope)
    for k, v in rope.items():
        if isinstance(v, dict):
            out[k] = _shrink_rope(v, s)
        elif k == "partial_rotary_factor" and isinstance(v, float) and 0 < v < 1:
            # rotary pairs dimensions: int(head_dim x factor) must be even (12 x 0.25 = 3 is not): the nearest
            # even count, at least 2
            dims = max(2, 2 * round(s.head_dim * v / 2))
            out[k] = dims / s.head_dim
        elif k == "mrope_section" and isinstance(v, list) and v and all(isinstance(x, int) for x in v):
            half = s.head_dim // 2
            total = sum(v) or 1
            sec = [max(1, round(x * half / total)) for x in v]
            sec[-1] += half - sum(sec)
            out[k] = sec if sec[-1] > 0 else [half - len(v) + 1] + [1] * (len(v) - 1)
    return out


def _shrink_list(role: str, v: list[int], s: Sizes) -> list[int]:
    """Per-stage lists (vision backbones: hidden_sizes, depths, num_heads) keep their length."""
    if role == "hidden":  # widths grow per stage in the original: keep the ratios, from 16
        base = v[0] or 1
        return [max(8, int(16 * x / base)) // 8 * 8 for x in v]
    if role == "heads":
        return [min(x, 2) for x in v]
    if role == "layers":
        return [1 for _ in v]
    return [min(x, role_value(role, s)) for x in v]


def _fix_token_ids(d: dict[str, Any], s: Sizes) -> None:
    """Special token ids must fall inside the shrunk vocabulary: map them to the top of it."""
    vocab = d.get("vocab_size")
    if not isinstance(vocab, int):
        return
    used: set[int] = set()
    for k in sorted(d):
        v = d[k]
        if not _TOKEN_ID.search(k) or isinstance(v, bool):
            continue
        if isinstance(v, int) and v >= vocab:
            d[k] = _free_top_id(vocab, used)
        elif isinstance(v, list) and all(isinstance(x, int) for x in v):
            d[k] = [x if x < vocab else _free_top_id(vocab, used) for x in v]
        if isinstance(d[k], int):
            used.add(d[k])


def _free_top_id(vocab: int, used: set[int]) -> int:
    i = vocab - 1
    while i in used and i > 0:
        i -= 1
    used.add(i)
    return i


def special_token_ids(cfg: Any) -> set[int]:
    """Every token id a config names (and its sub-configs): batches avoid them, so a multimodal
    model never sees an image/audio placeholder without the matching features."""
    out: set[int] = set()

    def visit(d: dict[str, Any]) -> None:
        for k, v in d.items():
            if not isinstance(k, str) or k in ("id2label", "label2id"):
                continue
            if isinstance(v, dict):
                visit(v)
            elif _TOKEN_ID.search(k) and _is_int(v):
                out.add(v)
            elif _TOKEN_ID.search(k) and isinstance(v, list):
                out.update(x for x in v if _is_int(x))

    visit(cfg.to_dict())
    return out


def _set_int_fields(cfg: Any, hit: Callable[[str, int], bool], new: Callable[[int], int]) -> None:
    """Set every int field of `cfg` and its sub-configs (each visited once) for which hit(key, value) holds
    to new(value)."""
    from transformers import PretrainedConfig  # lazy: planning imports no transformers

    seen: set[int] = set()

    def visit(c: Any) -> None:
        if id(c) in seen:
            return
        seen.add(id(c))
        for k, v in list(vars(c).items()):
            if isinstance(v, PretrainedConfig):
                visit(v)
            elif _is_int(v) and hit(k, v):
                setattr(c, k, new(v))

    visit(cfg)


def fit_positions(cfg: Any, n: int) -> None:
    """Raise every position-count field of `cfg` (and its sub-configs) below `n` to `n`: a tiny model keeps
    SIZES.positions (256) unless its rows are longer (`zoo --seq`)."""
    _set_int_fields(cfg, lambda k, v: ROLE_OF.get(k) == "positions" and v < n, lambda v: n)


WINDOW_KEYS = ("sliding_window",)


def fit_window(cfg: Any, seq: int) -> None:
    """A sliding window as long as the rows never slides: every `sliding_window` (and its sub-configs') of at
    least `seq` tokens becomes seq // 2 (>= 4), so the windowed layers attend to less than the whole row. Half,
    not less: a right-padded row's pad run (at most a third of it: models/batches.py) then always has a real
    token in its window; a pad query with none is fully masked, which eager attention turns NaN in float64."""
    _set_int_fields(cfg, lambda k, v: k in WINDOW_KEYS and v >= seq, lambda v: max(4, seq // 2))


def _changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in new.items() if old.get(k) != v or _is_sub_config(v)}


def default_config(model_type: str) -> Any:
    from transformers import AutoConfig  # lazy: planning imports no transformers

    ov = OVERRIDES.get(model_type)
    return AutoConfig.for_model(model_type, **copy.deepcopy(ov.base if ov is not None else {}))


def tiny_config(model_type: str, s: Sizes = SIZES) -> Any:
    """The shrunk config of `model_type` (raises whatever the config class raises if it can't)."""
    from transformers import AutoConfig  # lazy: planning imports no transformers

    d = default_config(model_type).to_dict()
    new = shrink_dict(d, s)
    propagate_vocab(new)
    base = default_config(model_type)
    ch = _fields_only(type(base), _changes(d, new))
    ov = OVERRIDES.get(model_type)
    if ov is not None:  # after the field filter: an override may set what the class doesn't declare
        deep_update(ch, ov.values)
    _override_sub_configs(ch)
    return AutoConfig.for_model(model_type, **ch)


def _override_sub_configs(d: dict[str, Any]) -> None:
    """A type's override holds wherever its config is a sub-config (qwen4_exp's text_config is qwen4_exp_text's)."""
    for v in d.values():
        if _is_sub_config(v):
            ov = OVERRIDES.get(str(v["model_type"]))
            if ov is not None:
                deep_update(v, ov.values)
            _override_sub_configs(v)


NOT_PASSED = ("model_type", "transformers_version", "architectures", "id2label", "label2id")


def _config_class(cls: Any, key: str, sub: dict[str, Any]) -> Any:
    from transformers import CONFIG_MAPPING  # lazy: planning imports no transformers

    sc = (getattr(cls, "sub_configs", None) or {}).get(key)
    if sc is None or sc.__name__ == "AutoConfig":
        mt = sub.get("model_type")
        return CONFIG_MAPPING[str(mt)] if mt in CONFIG_MAPPING else None
    return sc


def _fields_only(cls: Any, d: dict[str, Any]) -> dict[str, Any]:
    """Keep the keys the config class takes (dataclass fields and their aliases): derived values
    (deepseek's qk_head_dim, head_dim = qk_rope_head_dim) are recomputed by the class, not forced."""

    out: dict[str, Any] = {}
    if dataclasses.is_dataclass(cls):
        amap = getattr(cls, "attribute_map", {}) or {}
        allowed = {f.name for f in dataclasses.fields(cls)} | set(amap) | set(amap.values())
    else:
        allowed = None
    for k, v in d.items():
        # per_layer_config is PreTrainedConfig's own argument, not a field of the class (transformers'
        # HeterogeneousConfigMixin): without it the class rebuilds its full-size per-layer default
        if k in NOT_PASSED or (allowed is not None and k not in allowed and k not in _PER_LAYER_DICT_KEYS):
            continue
        if _is_sub_config(v):
            sub_cls = _config_class(cls, k, v)
            v = {"model_type": v["model_type"], **_fields_only(sub_cls, v)} if sub_cls is not None else v
        out[k] = v
    return out


def propagate_vocab(d: dict[str, Any]) -> None:
    """Top-level token ids of multimodal configs refer to the text sub-config's vocabulary."""
    vocab = d.get("vocab_size")
    if not isinstance(vocab, int):
        tc = d.get("text_config")
        vocab = tc.get("vocab_size") if isinstance(tc, dict) else None
    if isinstance(vocab, int):
        tmp = {**d, "vocab_size": vocab}
        _fix_token_ids(tmp, SIZES)
        for k in d:
            if k != "vocab_size":
                d[k] = tmp[k]


def deep_update(d: dict[str, Any], upd: dict[str, Any]) -> None:
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(d.get(k), dict) and not v.get("__replace__"):
            deep_update(d[k], v)
        else:
            d[k] = {kk: vv for kk, vv in v.items() if kk != "__replace__"} if isinstance(v, dict) else v
