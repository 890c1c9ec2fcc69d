"""A Hub model's config.json -> the model the zoo runs (the ids and the cache: refs.py).

- `task_of(config)`: the task (causal / masked LM, seq2seq, image / audio classification, ...) from the
  config's `architectures`, through transformers' own AutoModel mappings.
- `build_tiny(...)`: the config shrunk like the zoo's per-type shrink (models/tiny.py), GQA ratio kept.
- `build_full(...)`: the real config built on the meta device, materialised on the target device in the
  run dtype, then seeded init (`init_full`, generated on cpu: the same numbers on every machine) or the
  cached safetensors weights (transformers' own `from_pretrained`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from bringup.models import tiny as mz
from bringup.models import tiny_config as zc
from bringup.models.kept_fp32 import keep_fp32

INIT_CHUNK = 1 << 24  # cpu init is generated in chunks of this many elements (bounded host memory)


# ---- config -> task, class, model -----------------------------------------------------------------
def task_of(config: dict[str, Any]) -> tuple[str, str | None]:
    """(task, architecture class name) from config["architectures"] through transformers' task mappings
    (models/tiny.py TASKS order); without architectures, the model type's first task."""
    from transformers.models.auto import modeling_auto  # lazy: slow transformers import

    for arch in config.get("architectures") or []:
        for task, mapping in mz.TASKS:
            names = getattr(modeling_auto, mapping, {}).values()
            flat = {n for v in names for n in (v if isinstance(v, (list, tuple)) else (v,))}
            if arch in flat:
                return task, arch
    mt = config.get("model_type")
    return next((t for m, t in mz.all_types() if m == mt), "base"), None


def make_config(data: dict[str, Any], name: str) -> Any:
    """The transformers config of a config.json dict, loaded as `from_pretrained` would (`from_dict`:
    legacy keys such as rope_scaling / rope_theta are converted by the class), dropout off (parity
    needs the same function in every run) and no kv cache (training)."""
    from transformers import CONFIG_MAPPING  # lazy: slow transformers import

    d = zero_dropout(copy.deepcopy(data))  # transformers writes into the nested rope dicts it is given
    d["use_cache"] = False
    mt = d.get("model_type")
    if mt not in CONFIG_MAPPING:
        raise mz.ConfigError(f"{name}: model_type {mt!r} is not in this transformers (needs a newer release?)")
    try:
        return CONFIG_MAPPING[str(mt)].from_dict(d)  # mt is a key (checked above)
    except Exception as e:
        raise mz.ConfigError(f"{name}: config: {type(e).__name__}: {e}".splitlines()[0][:300]) from e


def zero_dropout(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("id2label", "label2id", "rope_scaling", "rope_parameters"):
            out[k] = zero_dropout(v)
        elif isinstance(v, float) and zc.DROPOUT.search(k):
            out[k] = 0.0
        else:
            out[k] = v
    return out


def model_class(task: str, arch: str | None) -> Any:
    """The architecture's own class when transformers has it, else the task's Auto class."""
    import transformers  # lazy: slow transformers import

    if arch and hasattr(transformers, arch):
        try:
            return getattr(transformers, arch)
        except Exception:
            pass
    return mz.hf_model_class(task)


def instantiate(cls: Any, cfg: Any) -> torch.nn.Module:
    if hasattr(cls, "from_config"):  # an Auto class
        return cls.from_config(cfg)
    return cls._from_config(cfg)


# Keys whose role differs from the zoo's table for one model type (the table reads `hidden_dim` as a
# width; DistilBERT calls its width `dim` and its MLP size `hidden_dim`).
_TYPE_ROLES: dict[str, dict[str, str]] = {"distilbert": {"dim": "hidden", "hidden_dim": "ffn"}}


def tiny_config_of(cfg: Any) -> Any:
    """The zoo's shrink of a real config (models/tiny_config.py shrink_dict: sizes set by role, per-layer lists,
    token ids), keeping its attention flavour: the query:kv head ratio where the tiny head count allows
    it (32:8 -> 4:1), rope type and scaling, experts (fewer of them), layer kinds."""
    from transformers import AutoConfig  # lazy: slow transformers import

    mt, small = tiny_kwargs(cfg)
    return AutoConfig.for_model(mt, **small)


def _keep_ratio(d: dict[str, Any], small: dict[str, Any], kv_key: str, ratio: int) -> None:
    """The tiny config keeps the real one's query heads per kv head (what a GQA kernel's grouping computes): kv heads
    SIZES.heads // ratio (at least 1) and as many query heads as the ratio needs, where the config sets its head dim
    itself (llama 3.1 8B's 32:8 -> 4:1, 70B's 64:8 -> 8:1); where the head dim is hidden / heads and that many
    heads would not give an even head dim (rotary pairs its dimensions), the tiny heads stay and the ratio is the
    nearest they allow."""
    s = zc.SIZES
    kv = max(1, s.heads // ratio)
    explicit = any(zc.ROLE_OF.get(k) == "head_dim" and isinstance(v, int) for k, v in small.items())
    q = kv * ratio
    if not explicit and (s.hidden % q or (s.hidden // q) % 2):
        small[kv_key] = kv
        return
    small[kv_key] = kv
    for k, v in d.items():
        if zc.ROLE_OF.get(k) == "heads" and isinstance(v, int) and not isinstance(v, bool):
            small[k] = q


def tiny_kwargs(cfg: Any) -> tuple[str, dict[str, Any]]:
    """(model_type, the keyword arguments `tiny_config_of` gives the config class): what the tiny model is
    built from (signature.py hashes them)."""
    d = cfg.to_dict()
    mt = d["model_type"]
    small = zc.shrink_dict(d)
    heads = next((d[k] for k in d if zc.ROLE_OF.get(k) == "heads" and isinstance(d[k], int)), None)
    for k, v in d.items():
        if zc.ROLE_OF.get(k) == "kv_heads" and isinstance(v, int) and isinstance(heads, int) and 0 < v < heads:
            _keep_ratio(d, small, k, heads // v)
    for k, role in _TYPE_ROLES.get(mt, {}).items():
        if isinstance(d.get(k), int):
            small[k] = min(d[k], zc.role_value(role, zc.SIZES))
    zc.propagate_vocab(small)
    small = {k: v for k, v in small.items() if k not in zc.NOT_PASSED}
    ov = zc.OVERRIDES.get(mt)
    if ov is not None:
        zc.deep_update(small, ov.values)
    return mt, small


def build_tiny(data: dict[str, Any], name: str, seed: int = 0, bs: mz.BatchSpec | None = None) -> mz.Built:
    cfg = make_config(data, name)
    task, _ = task_of(data)
    try:
        small = tiny_config_of(cfg)
    except Exception as e:
        raise mz.ConfigError(f"tiny config: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    built = mz.build_hf(small.model_type, task, bs, seed=seed, cfg=small)
    built.note = f"{name} (tiny: {built.note})"
    return built


# ---- full size: meta device -> target device ------------------------------------------------------
def meta_model(data: dict[str, Any], name: str) -> tuple[torch.nn.Module, str]:
    """The real-size model on the meta device (no memory), and its task."""
    cfg = make_config(data, name)
    task, arch = task_of(data)
    cls = model_class(task, arch)
    try:
        with torch.device("meta"):
            model = instantiate(cls, cfg)
    except Exception as e:
        raise mz.ConfigError(f"build: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    return model, task


def init_std(cfg: Any) -> float:
    """transformers' base init std (PreTrainedModel._init_weights): initializer_range, init_std,
    initializer_factor, the text config's initializer_range, else 0.02."""
    for key in ("initializer_range", "init_std", "initializer_factor"):
        v = getattr(cfg, key, None)
        if isinstance(v, (int, float)) and v > 0:
            return float(v)
    try:
        v = getattr(cfg.get_text_config(), "initializer_range", None)
    except Exception:
        v = None
    return float(v) if isinstance(v, (int, float)) and v > 0 else 0.02


def init_full(model: torch.nn.Module, seed: int) -> dict[str, int]:
    """Seeded init of a materialised model, the same numbers on every machine: each floating parameter
    (tied ones once) is generated on cpu from its own generator, chunk by chunk, and copied to the
    device. After transformers' own init (norm weights 1, biases 0, rope buffers): a parameter that init
    left constant keeps its value unless it is 0 (drawn N(0, 0.02), as the zoo's nonzero_init: a dropped
    bias must show); every other one is drawn N(0, std) with transformers' base std (`init_std`).
    Returns counts per kind."""
    cfg = getattr(model, "config", None)
    std = init_std(cfg) if cfg is not None else 0.02
    counts = {"normal": 0, "zero_drawn": 0, "constant": 0}
    seen: set[int] = set()
    with torch.no_grad():
        for i, (_, p) in enumerate(model.named_parameters(remove_duplicate=False)):
            if id(p) in seen or not p.is_floating_point() or p.numel() == 0:
                continue
            seen.add(id(p))
            lo, hi = float(p.min()), float(p.max())
            if lo == hi and lo != 0.0:
                counts["constant"] += 1
                continue
            scale = mz.NONZERO_STD if lo == hi else std
            counts["zero_drawn" if lo == hi else "normal"] += 1
            g = torch.Generator().manual_seed(seed * 1_000_003 + i)
            flat = p.view(-1)
            for start in range(0, flat.numel(), INIT_CHUNK):
                n = min(INIT_CHUNK, flat.numel() - start)
                flat[start : start + n].copy_(torch.randn(n, generator=g) * scale)
    return counts


def build_full(
    data: dict[str, Any],
    name: str,
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
    weights: list[str] | None = None,
) -> tuple[torch.nn.Module, str, str]:
    """(model on `device` in `dtype`, task, how its weights were obtained)."""
    task, arch = task_of(data)
    if weights:
        cfg = make_config(data, name)
        cls = model_class(task, arch)
        snap = str(Path(weights[0]).parent)
        try:
            # use_kernels=False: transformers >= 5.25 swaps in Hub kernels (downloaded at run time) by default
            # when `kernels` is installed, and its model.train() then refuses any device kernels does not
            # list (testdev, a new backend): the model judged is transformers' own torch code
            model = cls.from_pretrained(snap, config=cfg, dtype=dtype, use_kernels=False)
        except Exception as e:
            raise mz.ConfigError(f"load {snap}: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
        model = model.to(device)
        how = f"cached safetensors ({len(weights)} file(s))"
    else:
        model, task = meta_model(data, name)
        model = model.to(dtype)
        keep_fp32(model, dtype)  # what from_pretrained(dtype=...) keeps in fp32, drawn in fp32 (models/kept_fp32.py)
        model = model.to_empty(device=device)
        initialize = getattr(model, "initialize_weights", None)
        if initialize is not None:
            initialize()  # transformers' own init: norms, biases and the rope / position buffers
        if hasattr(model, "tie_weights"):
            model.tie_weights()  # type: ignore[operator]  # transformers' method, typed by Module.__getattr__
        counts = init_full(model, seed)
        how = f"seeded init on cpu (seed {seed}: {counts['normal']} drawn N(0, {init_std(model.config):g}))"
    model.train()
    return model, task, how


def batches_for(model: torch.nn.Module, task: str, batch: int, seq: int, seed: int) -> Any:
    """A full-size model's step batches: text-like (models/batches.py), the padded and the packed layout on
    alternate steps (every step of a full-size run is compared, one microbatch per step keeps it one forward)."""
    return mz.hf_batches(model, task, mz.BatchSpec(batch=batch, seq=seq, alternate=True), seed)
