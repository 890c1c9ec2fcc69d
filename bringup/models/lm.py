"""Causal LMs for the train and profile suites: Qwen3 presets built from transformers configs
(random init, nothing downloaded), HF config JSON files, or a user's `module:function`; FLOPs per
token exactly as TorchTitan counts them; seeded synthetic token batches."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from bringup.errors import BadInput
from bringup.precision import Precision

# Published Qwen3 dense configs (Hugging Face Qwen/Qwen3-*/config.json). Shared by all presets:
QWEN3_COMMON: dict[str, Any] = {
    "vocab_size": 151936,
    "head_dim": 128,
    "num_key_value_heads": 8,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1_000_000.0,
    "hidden_act": "silu",
}
PRESETS: dict[str, dict[str, Any]] = {
    "qwen3-0.6b": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
                   "num_attention_heads": 16, "tie_word_embeddings": True},
    "qwen3-1.7b": {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
                   "num_attention_heads": 16, "tie_word_embeddings": True},
    "qwen3-4b": {"hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
                 "num_attention_heads": 32, "tie_word_embeddings": True},
    "qwen3-8b": {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
                 "num_attention_heads": 32, "tie_word_embeddings": False},
    "qwen3-14b": {"hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 40,
                  "num_attention_heads": 40, "tie_word_embeddings": False},
    "qwen3-32b": {"hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
                  "num_attention_heads": 64, "tie_word_embeddings": False},
    # A few M params: same architecture and code path, sized for cpu and tests.
    "qwen3-tiny": {"hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 4096,
                   "max_position_embeddings": 2048, "tie_word_embeddings": False},
}  # fmt: skip


def _qwen3_config(kwargs: dict[str, Any]) -> Any:
    from transformers import Qwen3Config  # lazy: planning imports no transformers

    kw = {**QWEN3_COMMON, **kwargs}
    theta = kw.pop("rope_theta")
    cfg = Qwen3Config(**kw)
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):  # transformers >= 5: rope settings live in rope_parameters
        rp["rope_theta"] = theta
    else:
        cfg.rope_theta = theta
    return cfg


def parse_override(text: str) -> tuple[str, Any]:
    """'num_key_value_heads=4' -> ('num_key_value_heads', 4). Values are JSON when they parse as JSON."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not key.replace("_", "").replace(".", "").isalnum():
        raise BadInput(f"bad --override {text!r}: expected KEY=VALUE, e.g. num_key_value_heads=4")
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def apply_overrides(cfg: Any, overrides: list[str]) -> Any:
    for o in overrides:
        key, value = parse_override(o)
        if not hasattr(cfg, key):
            raise BadInput(f"bad --override {o!r}: {type(cfg).__name__} has no field {key!r}")
        old = getattr(cfg, key)
        if (
            old is not None
            and not isinstance(value, type(old))
            and not (isinstance(old, float) and isinstance(value, int))
        ):
            raise BadInput(f"bad --override {o!r}: {key} is {type(old).__name__}, got {type(value).__name__}")
        setattr(cfg, key, value)
    _check_shapes(cfg)
    return cfg


def _check_shapes(cfg: Any) -> None:
    h, kv = getattr(cfg, "num_attention_heads", None), getattr(cfg, "num_key_value_heads", None)
    if isinstance(h, int) and isinstance(kv, int) and (kv <= 0 or h % kv):
        raise BadInput(f"num_attention_heads ({h}) must be a positive multiple of num_key_value_heads ({kv})")
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size"):
        v = getattr(cfg, k, None)
        if isinstance(v, int) and v <= 0:
            raise BadInput(f"{k} must be positive, got {v}")


def is_user_fn(model: str) -> bool:
    return ":" in model and not Path(model).exists()


def load_config(model: str, overrides: list[str] | None = None) -> Any:
    """A preset name or an HF config JSON path -> a transformers config with overrides applied. Each
    override is checked (a field of the config, of its type) on the config as built, then the config is
    built again with the overrides among its arguments, so that what its constructor derives follows
    them (transformers 5's `layer_types`, one per layer: `num_hidden_layers=8` on a 4-layer preset set
    afterwards left 4 and the model build died with an IndexError)."""
    overrides = overrides or []
    if model in PRESETS:
        kw: dict[str, Any] = dict(PRESETS[model])
        make = _qwen3_config
    elif model.endswith(".json") or Path(model).is_file():
        p = Path(model)
        if not p.is_file():
            raise BadInput(f"model config {model} does not exist")
        try:
            kw = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadInput(f"model config {model} is not valid JSON: {e}") from e
        if not isinstance(kw, dict) or "model_type" not in kw:
            raise BadInput(f"model config {model} has no 'model_type'")
        model_type = kw.pop("model_type")

        def make(kwargs: dict[str, Any]) -> Any:
            from transformers import AutoConfig  # lazy: planning imports no transformers

            try:
                return AutoConfig.for_model(model_type, **kwargs)
            except (ValueError, KeyError, TypeError) as e:
                raise BadInput(f"model config {model}: {e}".splitlines()[0]) from e
    else:
        raise BadInput(
            f"unknown model {model!r}: use a preset ({', '.join(PRESETS)}), a config JSON path, or module:function"
        )
    cfg = apply_overrides(make(dict(kw)), overrides)
    if overrides:
        cfg = make({**kw, **dict(parse_override(o) for o in overrides)})
        _check_shapes(cfg)
    return cfg


def build_model(
    model: str,
    overrides: list[str] | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> torch.nn.Module:
    """Random-init causal LM on `device` ("meta" for shapes only). Seeded: identical across modes."""
    if is_user_fn(model):
        mod_name, _, fn_name = model.partition(":")
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name)
        except (ImportError, AttributeError) as e:
            raise BadInput(f"model {model}: {type(e).__name__}: {e}") from e
        torch.manual_seed(seed)
        m = fn()
        if not isinstance(m, torch.nn.Module):
            raise BadInput(f"model {model} returned {type(m).__name__}, not torch.nn.Module")
        return _for_training(m.to(device=device, dtype=dtype))
    cfg = load_config(model, overrides)
    from transformers import AutoModelForCausalLM  # lazy: planning imports no transformers

    torch.manual_seed(seed)
    with torch.device(device):
        m = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    return _for_training(m)


def _for_training(m: torch.nn.Module) -> torch.nn.Module:
    """No KV cache: training never reads it, and transformers would otherwise build a DynamicCache in
    every forward whose per-layer state dynamo guards on: regional compile then recompiles once per
    decoder block (measured: 4 graphs and 3 recompiles for qwen3-tiny instead of 1 and 0)."""
    cfg = getattr(m, "config", None)
    if cfg is not None and hasattr(cfg, "use_cache"):
        cfg.use_cache = False
    return m


def param_counts(model: torch.nn.Module) -> tuple[int, int]:
    """(all params, embedding params). Tied weights count once (as model.parameters() yields them)."""
    total = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None  # type: ignore[operator]  # transformers' method, typed by Module.__getattr__
    if emb is None:
        emb_n = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    else:
        emb_n = sum(p.numel() for p in emb.parameters())
    return total, emb_n


def flops_per_token(model: torch.nn.Module, seq_len: int) -> int:
    """TorchTitan's get_dense_model_nparams_and_flops (torchtitan/models/utils.py):
        6 * (nparams - nparams_embedding) + 6 * n_layers * n_heads * (qk_head_dim + v_head_dim) * seq_len
    TorchTitan finds the embedding as a direct nn.Embedding child; an HF model keeps it one level
    down, so we ask the model for its input embeddings. With tied weights the shared matrix is counted
    once and subtracted, exactly as TorchTitan does."""
    cfg = getattr(model, "config", None)
    if cfg is None:
        raise BadInput("FLOPs per token need a transformers model (with .config)")
    total, emb = param_counts(model)
    layers, heads = int(cfg.num_hidden_layers), int(cfg.num_attention_heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
    return 6 * (total - emb) + 6 * layers * heads * (head_dim + head_dim) * seq_len


def vocab_size(model: torch.nn.Module) -> int:
    cfg = getattr(model, "config", None)
    if cfg is not None and getattr(cfg, "vocab_size", None):
        return int(cfg.vocab_size)
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None  # type: ignore[operator]  # transformers' method, typed by Module.__getattr__
    if emb is None:
        raise BadInput("cannot tell the model's vocabulary size")
    return int(emb.num_embeddings)


def synthetic_batches(
    vocab: int, batch: int, seq: int, steps: int, seed: int = 1234, learnable: bool = False
) -> Iterator[torch.Tensor]:
    """Seeded token batches on cpu: the same sequence for every mode and rank, so loss curves compare.

    Default: uniform random tokens (nothing to learn: the loss stays near ln(vocab)). `learnable`:
    a fixed random bigram chain over a 256-token subset of the vocabulary (each token is followed by
    its successor 90% of the time, else by a random subset token), so the loss falls within a few
    steps and a wrong gradient shows in the curve. Still seeded: every mode gets the same tokens."""
    g = torch.Generator().manual_seed(seed)
    if not learnable:
        for _ in range(steps):
            yield torch.randint(0, vocab, (batch, seq), generator=g)
        return
    active = min(vocab, 256)
    subset = torch.randperm(vocab, generator=g)[:active]
    successor = torch.zeros(vocab, dtype=torch.long)
    successor[subset] = subset[torch.randperm(active, generator=g)]
    noise = subset[torch.randint(0, active, (steps * batch, seq), generator=g)]
    follow = torch.rand(steps * batch, seq, generator=g) < 0.9
    x = noise.clone()
    for t in range(1, seq):  # one pass over positions for all steps at once
        x[:, t] = torch.where(follow[:, t], successor[x[:, t - 1]], noise[:, t])
    yield from x.split(batch)


MODES = ("eager", "compile", "regional")


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The repeated transformer blocks (HF causal LMs keep them at model.model.layers)."""
    for path in ("model.layers", "transformer.h", "model.decoder.layers", "layers"):
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, torch.nn.ModuleList) and len(obj):
            return obj
    raise BadInput(f"{type(model).__name__}: no decoder layer list found for regional compile")


def apply_mode(
    model: torch.nn.Module, mode: str, backend: str = "inductor", dynamic: bool | None = None
) -> torch.nn.Module:
    """eager: as is. compile: torch.compile(model). regional: each decoder block compiled in place
    (`block.compile(fullgraph=True)`, as TorchTitan does): small graphs compiled once, reused.
    `dynamic`: torch.compile's (None: its default, automatic dynamic shapes after a recompile)."""
    if mode == "eager":
        return model
    if mode == "compile":
        return torch.compile(model, backend=backend, dynamic=dynamic)  # type: ignore[return-value]  # a module in, a module out
    if mode == "regional":
        for block in decoder_layers(model):
            block.compile(backend=backend, fullgraph=True, dynamic=dynamic)
        return model
    raise BadInput(f"unknown mode {mode!r}; use {', '.join(MODES)}")


def train_step(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    tokens: torch.Tensor,
    precision: Precision | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """One causal-LM step (labels = inputs; the model shifts them). Returns the detached loss.

    Mixed precision (`precision.mixed`): the forward (loss included) runs under the device's autocast
    and the backward outside it (autocast's own rule: backward ops run in the dtype their forward
    chose), over the fp32 params the optimizer steps; `scaler` (a GradScaler, fp16) scales the loss and
    unscales / skips the step on inf. Pure dtypes: `precision` None or not mixed, a plain step."""
    if precision is not None and precision.mixed:
        with precision.autocast(tokens.device.type):
            loss = model(input_ids=tokens, labels=tokens).loss
    else:
        loss = model(input_ids=tokens, labels=tokens).loss
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()
