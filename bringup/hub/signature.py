"""What a Hub checkpoint computes at the zoo's tiny size, as one signature: 100k ids -> the distinct graphs.

Most Hub ids are fine-tunes: same architecture, same config.json up to names, versions, storage dtype and
sizes. At the size the zoo runs (`--size tiny`), what a device must compute for an id is fixed by

    (task, architecture, tiny config)

- task and architecture from the config's `architectures` through transformers' task mappings (hub/build.py
  task_of): the head, the inputs and the loss;
- the tiny config: config.json read by transformers' own config class for its model_type (legacy keys
  converted, class defaults filled in: `cls(**config)`, what `from_pretrained` does), serialised with
  `to_dict()` and shrunk by the zoo's role table (models/tiny_config.py shrink_dict via build.py tiny_kwargs: every
  size set by its role; the query:kv ratio, rope type and scaling, experts and top-k, layer kinds, activations,
  norms, biases, tying, sliding windows, soft-caps, every other field kept as the checkpoint has it): the keyword
  arguments the tiny config is built from (`build.tiny_config_of`), which the case carries and the worker
  builds from.

So the field list is the config class's own (its dataclass fields, the keys it derives, and any extra key a
config.json carries: those survive `to_dict` and may be read by the modeling code, so they stay in), never a
hand-kept list of "graph fields". Sizes are in it at their tiny value: two checkpoints that differ only in
width, depth or vocabulary (Llama-3.1-8B and -70B: both 4:1 GQA at tiny size) share a signature. Only the keys
of `NON_GRAPH` are taken out, each with its reason, each tested not to change the built graph
(tests/hub/test_hub_signature.py). The signature is the sha256 of the canonical JSON of the three parts.

The case of a signature carries that tiny config (`graph_config`) and the worker builds exactly it
(`build`), so two ids with one signature get one build by construction; that this build is what each id's
own tiny build would be is the tested claim.

What a signature cannot see (docs/hub.md): the weights (fine-tuned values, quantization: a quantized
checkpoint is run unquantized), custom modeling code (`auto_map` with an architecture transformers does not
have: refused as `custom_code`, never run as something it is not), the tokenizer and generation config, and
anything only the real size shows (head dim, expert count, depth, long sequences).

Planning is memoised on the raw config minus `RAW_IGNORED` (`raw_key`): fine-tunes whose config.json differs
only in names, versions or storage dtype are signed once.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from bringup.hub.build import task_of, tiny_kwargs, zero_dropout
from bringup.models import tiny as mz
from bringup.models import tiny_config as zc

# Keys of the tiny config that are not part of the computation; each is tested not to change the built graph.
NON_GRAPH: dict[str, str] = {
    "_name_or_path": "where the checkpoint was loaded from",
    "name_or_path": "where the checkpoint was loaded from",
    "_commit_hash": "the revision it was loaded from",
    "transformers_version": "the release that wrote config.json; the installed transformers builds the model",
    "architectures": "the architecture is its own part of the signature",
    "dtype": "the checkpoint's storage dtype; the zoo builds in fp32 and runs its own --dtype",
    "torch_dtype": "the checkpoint's storage dtype (older name)",
    "id2label": "label names; the tiny shrink drops them (a 2-label head at tiny size)",
    "label2id": "label names; the tiny shrink drops them",
    "initializer_range": "the init scale: weights, not the computation (the zoo draws its own init)",
    "quantization_config": "how the checkpoint's weights are stored; the zoo builds the model unquantized",
    "auto_map": "remote-code entry points; an id whose architecture is not transformers' is refused as custom_code",
}
# Keys of config.json that cannot change the tiny config (the memo key leaves them out): NON_GRAPH minus what
# the signing itself reads (architectures: the task and class; auto_map: the custom-code refusal), plus
# use_cache, which `config_object` forces off (it stays in the tiny config: the cache path is another graph).
RAW_IGNORED = (frozenset(NON_GRAPH) - {"architectures", "auto_map"}) | {"use_cache"}
# Keys that cannot change the full-size computation either (the full-size fan-out key, `full_key`).
FULL_IGNORED = frozenset(
    {"_name_or_path", "name_or_path", "_commit_hash", "transformers_version", "use_cache", "dtype", "torch_dtype"}
)

# Why an id has no signature (config failures, counted by reason; fetch failures come from hub/fetch.py).
BAD_CONFIG = "bad_config"
UNKNOWN_MODEL_TYPE = "unknown_model_type"
UNKNOWN_ARCHITECTURE = "unknown_architecture"
CUSTOM_CODE = "custom_code"
TINY_CONFIG = "tiny_config"


@dataclass(frozen=True)
class Signature:
    """One distinct tiny computation: the case that runs it carries `config`."""

    signature: str
    task: str
    architecture: str  # the config's architectures[0], or "<model_type> (no architectures)"
    model_type: str
    config: dict[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True)
class ConfigFailure:
    """Why a config.json has no signature: counted by reason, never a crash."""

    reason: str
    detail: str
    model_type: str = ""


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def digest(obj: Any, n: int = 16) -> str:
    return hashlib.sha256(canonical(obj).encode()).hexdigest()[:n]


def raw_key(raw: dict[str, Any]) -> str:
    """Memo key: config.json minus keys that cannot change the tiny config."""
    return digest({k: v for k, v in raw.items() if k not in RAW_IGNORED}, 32)


def full_key(raw: dict[str, Any]) -> str:
    """Ids with one full key run the same full-size computation (same sizes too): config.json up to names,
    versions and storage dtype."""
    return digest({k: v for k, v in raw.items() if k not in FULL_IGNORED}, 16)


def graph_config(model_type: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The part of the tiny config's arguments that is the computation: all of them minus NON_GRAPH (in
    sub-configs too: a multimodal model's text_config carries its own transformers_version)."""
    return {"model_type": model_type, **_strip(kwargs)}


def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _strip(v) if isinstance(v, dict) and "model_type" in v else v for k, v in d.items() if k not in NON_GRAPH
    }


def architecture_of(raw: dict[str, Any]) -> str:
    archs = raw.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return f"{raw.get('model_type')} (no architectures)"


def check_supported(raw: dict[str, Any]) -> ConfigFailure | None:
    """The config failures planning can see without building anything."""
    from transformers import CONFIG_MAPPING  # lazy: slow transformers import

    mt = raw.get("model_type")
    if not isinstance(mt, str) or not mt:
        return ConfigFailure(BAD_CONFIG, 'config.json has no "model_type" (not a transformers model)')
    archs = raw.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        return ConfigFailure(BAD_CONFIG, '"architectures" is not a list of class names', mt)
    remote = isinstance(raw.get("auto_map"), dict) and bool(raw.get("auto_map"))
    if mt not in CONFIG_MAPPING:
        if remote:
            return ConfigFailure(
                CUSTOM_CODE,
                f"model_type {mt!r} exists only as the checkpoint's own code (auto_map, trust_remote_code)",
                mt,
            )
        return ConfigFailure(
            UNKNOWN_MODEL_TYPE,
            f"model_type {mt!r} is not in transformers {_transformers_version()} (a newer release may have it)",
            mt,
        )
    import transformers  # lazy: slow transformers import

    for a in archs or []:
        if not hasattr(transformers, a):
            if remote:
                return ConfigFailure(
                    CUSTOM_CODE,
                    f"architecture {a} is the checkpoint's own code (auto_map, trust_remote_code), not transformers'",
                    mt,
                )
            return ConfigFailure(
                UNKNOWN_ARCHITECTURE, f"architecture {a} is not in transformers {_transformers_version()}", mt
            )
    return None


def _transformers_version() -> str:
    import transformers  # lazy: slow transformers import

    return str(transformers.__version__)


def config_object(raw: dict[str, Any]) -> Any:
    """transformers' config for a config.json dict, as `from_pretrained` reads it (`cls(**config)`, what
    `from_dict` does without its log line), dropout off and no kv cache. Raises on a config the class rejects."""
    from transformers import CONFIG_MAPPING  # lazy: slow transformers import

    # nested values copied: transformers' rope standardisation writes into the rope dicts it is given
    d = zero_dropout(
        {k: copy.deepcopy(v) if isinstance(v, (dict, list)) else v for k, v in raw.items() if k not in RAW_IGNORED}
    )
    d["use_cache"] = False
    return CONFIG_MAPPING[d["model_type"]](**d)


def sign(raw: dict[str, Any]) -> Signature | ConfigFailure:
    """The signature of one config.json (no memo; `Signer` memoises)."""
    bad = check_supported(raw)
    if bad is not None:
        return bad
    mt = str(raw["model_type"])
    try:
        task, arch = task_of(raw)
        cfg = graph_config(*tiny_kwargs(config_object(raw)))
    except Exception as e:
        return ConfigFailure(TINY_CONFIG, f"{type(e).__name__}: {e}".splitlines()[0][:300], mt)
    arch_name = arch or architecture_of(raw)
    return Signature(digest([task, arch_name, cfg]), task, arch_name, mt, cfg)


@dataclass
class Signer:
    """`sign` memoised on `raw_key` (fine-tunes that differ only in names, versions or storage dtype are
    signed once). Counts how many configs were really signed."""

    memo: dict[str, Signature | ConfigFailure] = field(default_factory=dict)
    signed: int = 0

    def __call__(self, raw: dict[str, Any]) -> Signature | ConfigFailure:
        k = raw_key(raw)
        hit = self.memo.get(k)
        if hit is None:
            hit = self.memo[k] = sign(raw)
            self.signed += 1
        return hit


def quiet_transformers() -> Any:
    """Planning signs thousands of configs: transformers' per-config warnings (rope validation of the shrunk
    config, ...) would flood the terminal. Returns the previous verbosity (restore with set_verbosity)."""
    from transformers.utils import logging as tlog  # lazy: slow transformers import

    old = tlog.get_verbosity()
    tlog.set_verbosity_error()
    return old


def build(task: str, config: dict[str, Any], seed: int = 0, bs: mz.BatchSpec | None = None) -> mz.Built:
    """The tiny model of a signature: exactly its config (the case carries it), the zoo's tiny build."""
    from transformers import AutoConfig  # lazy: slow transformers import

    mt = config.get("model_type")
    if not isinstance(mt, str):
        raise mz.ConfigError('signature config has no "model_type"')
    try:
        cfg = AutoConfig.for_model(mt, **{k: v for k, v in config.items() if k != "model_type"})
    except Exception as e:
        raise mz.ConfigError(f"signature config: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    return mz.build_hf(mt, task, bs, seed=seed, cfg=cfg)


def explain(model_type: str) -> dict[str, Any]:
    """Where a model type's signature fields come from (docs, `bringup hub fields TYPE`): the config class's
    declared fields, which of them the tiny shrink sets by role (sizes), and what NON_GRAPH takes out."""
    from transformers import CONFIG_MAPPING  # lazy: slow transformers import

    if model_type not in CONFIG_MAPPING:
        raise KeyError(model_type)
    cls = CONFIG_MAPPING[model_type]
    declared = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    keys = sorted(set(declared) | set(cls().to_dict()))
    return {
        "config_class": cls.__name__,
        "graph": [k for k in keys if k not in NON_GRAPH and zc.ROLE_OF.get(k) is None and not zc.DROPOUT.search(k)],
        "sizes": [k for k in keys if zc.ROLE_OF.get(k) is not None and k not in NON_GRAPH],
        "dropout_zeroed": [k for k in keys if zc.DROPOUT.search(k)],
        "excluded": {k: NON_GRAPH[k] for k in keys if k in NON_GRAPH},
        "sub_configs": sorted((getattr(cls, "sub_configs", None) or {}).keys()),
    }
