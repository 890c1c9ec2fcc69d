"""The zoo's models: what a case's source names, built tiny and initialised so that every operator matters
(`build_model`): transformers' architectures at a tiny config (models/tiny.py, shared with the Hub sweep and
train's reference), a transformers class by name (models/hf_class.py), timm (zoo/timm_models.py), a Hub
config (hub/build.py, hub/signature.py), a user's `module:function` (`build_fn`) or config JSON
(`build_hf_json`); and what a case records of a model (`shapes_of`, `param_count`).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import torch

from bringup.hub import build as hub_build
from bringup.hub import signature
from bringup.models import hf_class, testable_init
from bringup.models.tiny import (
    PARAM_LIMIT,
    BatchSpec,
    Built,
    ConfigError,
    all_types,
    build_hf,
    call_kwargs,
    count_params_meta,
    first_float,
    hf_batches,
    hf_loss,
    hf_model_class,
    nonzero_init,
    seeded_generator,
    text_config,
)
from bringup.models.tiny_config import DROPOUT, NOT_PASSED, ROLE_OF, shrink_dict
from bringup.zoo import timm_models
from bringup.zoo.spec import ZooSpec, config_data


def build_model(params: ZooSpec | dict[str, Any], left_pad: bool = True) -> Any:
    """The model of a case, initialised so that every operator matters to the result (seeded): Linear
    weights at N(0, 1/fan_in) so attention is not uniform and activations see unit-size inputs
    (models/testable_init.py), and all-zero parameters (biases, norm offsets) drawn small
    (models/tiny.py: nonzero_init): a dropped bias, a wrong softmax temperature must change the result."""

    spec = ZooSpec.of(params)
    built = _build_model(spec, left_pad)
    seed = spec.seed
    testable_init.fan_in_init(built.model, seed)
    nonzero_init(built.model, seed)
    return built


def batch_spec(spec: ZooSpec, left_pad: bool = True) -> Any:
    """How a tiny case's text model is fed (bringup/models/batches.py)."""

    return BatchSpec(batch=spec.rows, seq=spec.tokens, inputs=spec.inputs, left_pad=left_pad)


def _build_model(spec: ZooSpec, left_pad: bool = True) -> Any:

    src, model, seed = spec.source, spec.model, spec.seed
    bs = batch_spec(spec, left_pad)
    if src == "hf":
        return build_hf(model, spec.task or "causal-lm", bs, seed=seed)
    if src == "hf-class":  # an upstream suite's name: that transformers class itself, tiny (zoo/upstream.py)
        return hf_class.build(model, spec.task, bs, seed=seed)
    if src == "timm":
        return timm_models.build(model, seed=seed)
    if src == "fn":
        return build_fn(model, seed=seed, bs=bs)
    if src == "hf-json":
        return build_hf_json(model, seed=seed, bs=bs)
    if src in ("hub", "hub-top"):
        return hub_build.build_tiny(config_data(spec), model, seed=seed, bs=bs)
    if src == "hub-sig":  # a Hub sweep's signature: exactly its tiny config (zoo/sweep.py)
        if spec.config is None:
            raise ConfigError("a hub-sig case without its config")
        return signature.build(spec.task or "causal-lm", spec.config, seed=seed, bs=bs)
    raise ConfigError(f"unknown source {src!r}")


def build_fn(entry: str, seed: int = 0, batch: int = 2, bs: BatchSpec | None = None) -> Built:
    """`module:function` returning an nn.Module (a transformers model is fed like hf-causal) or a
    tuple (module, example_inputs) with a tensor, a tuple of tensors or a dict of them."""

    mod_name, _, fn_name = entry.partition(":")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except Exception as e:
        raise ConfigError(f"{entry}: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    torch.manual_seed(seed)
    res = fn()
    example: Any = None
    if isinstance(res, tuple) and len(res) == 2 and isinstance(res[0], torch.nn.Module):
        res, example = res
    if not isinstance(res, torch.nn.Module):
        raise ConfigError(f"{entry} returned {type(res).__name__}, not an nn.Module or (module, inputs)")
    model = res.to(torch.float32).train()
    if example is None:
        if getattr(model, "config", None) is None:
            raise ConfigError(f"{entry}: return (module, example_inputs) for a model that is not a transformers model")
        return Built(
            model,
            hf_batches(model, "causal-lm", bs or BatchSpec(batch=batch), seed),
            call_kwargs,
            hf_loss,
            first_float,
            note=type(model).__name__,
        )

    def make_batch(step: int) -> dict[str, Any]:
        g = seeded_generator(seed * 1000 + step + 1)
        return {"_args": _jitter(example, g)}

    def fwd(m: torch.nn.Module, b: dict[str, Any]) -> Any:
        a = b["_args"]
        if isinstance(a, dict):
            return m(**a)
        return m(*a) if isinstance(a, (tuple, list)) else m(a)

    return Built(model, make_batch, fwd, hf_loss, first_float, note=type(model).__name__)


def _jitter(example: Any, g: torch.Generator) -> Any:
    """Step batches: float example tensors get fresh seeded noise of the same shape; others are kept."""
    if isinstance(example, torch.Tensor):
        return torch.randn(example.shape, generator=g) if example.is_floating_point() else example.clone()
    if isinstance(example, dict):
        return {k: _jitter(v, g) for k, v in example.items()}
    if isinstance(example, (tuple, list)):
        return type(example)(_jitter(v, g) for v in example)
    return example


def build_hf_json(path: str, seed: int = 0, bs: BatchSpec | None = None) -> Built:
    """An HF config JSON (needs "model_type"): built as given when it has <= PARAM_LIMIT params,
    else shrunk like the hf sources (a full-size config.json would not fit a cpu float64 reference)."""

    try:
        data = json.loads(Path(path).read_text())
    except Exception as e:
        raise ConfigError(f"{path}: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise ConfigError(f'{path}: no "model_type" in the config JSON')
    from transformers import AutoConfig  # lazy: planning imports no transformers

    model_type = data.pop("model_type")
    task = next((t for mt, t in all_types() if mt == model_type), "base")
    for k, v in list(data.items()):  # parity needs the same function in every run: no dropout
        if isinstance(v, float) and DROPOUT.search(k):
            data[k] = 0.0
    try:
        cfg = AutoConfig.for_model(model_type, **_no_dropout_defaults(model_type, data))
    except Exception as e:
        raise ConfigError(f"{path}: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    auto = hf_model_class(task)
    try:
        n = count_params_meta(lambda: auto.from_config(cfg))
    except Exception as e:
        raise ConfigError(f"{path}: build: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    if n > PARAM_LIMIT:
        small = {k: v for k, v in shrink_dict(cfg.to_dict()).items() if k not in NOT_PASSED}
        cfg = AutoConfig.for_model(model_type, **small)
    return build_hf(model_type, task, bs, seed=seed, cfg=cfg)


def _no_dropout_defaults(model_type: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` plus 0.0 for every dropout-like field the config class defaults to non-zero."""
    from transformers import AutoConfig  # lazy: planning imports no transformers

    base = AutoConfig.for_model(model_type).to_dict()
    extra = {k: 0.0 for k, v in base.items() if isinstance(v, float) and DROPOUT.search(k) and v and k not in data}
    return {**data, **extra}


SHAPE_ROLES = ("vocab", "hidden", "heads", "kv_heads", "head_dim", "ffn", "moe_ffn")


def shapes_of(model: torch.nn.Module) -> dict[str, int]:
    """The widths a kernel tiles, as the model's (text) config has them: role -> size (tiny_config's roles; the
    first key of each role the config sets; head_dim derived from hidden / heads where the config leaves it)."""

    cfg = getattr(model, "config", None)
    if cfg is None:
        return {}
    d = text_config(cfg).to_dict()
    out: dict[str, int] = {}
    for k, v in d.items():
        role = ROLE_OF.get(k)
        if role in SHAPE_ROLES and role not in out and isinstance(v, int) and not isinstance(v, bool):
            out[role] = v
    if "head_dim" not in out and out.get("heads"):
        out["head_dim"] = out.get("hidden", 0) // out["heads"]
    return out


def param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
