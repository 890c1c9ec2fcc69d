"""Synthetic Hub repositories for the Hub stand-in (tests/hub/hub_standin.py) and bench/hub_plan.py.

Built from the real configs of the shipped catalogue (bringup/models/catalogue/hub_top.json), one base per model
type, and around each base what the Hub is made of:

- `copy`: a fine-tune: the same config.json with another `_name_or_path`, storage dtype, transformers version,
  use_cache (same signature as the base);
- `resized`: the same architecture at another size (depth, vocabulary, positions, or width with the same head
  ratio): the same signature at tiny size;
- `near`: one graph field changed (activation, norm eps, attention or MLP bias, tying, rope theta or scaling,
  sliding window, kv heads, soft-cap): another signature and another graph;
- broken ones: gated, private, no config.json (a GGUF-only repo), config.json that is not JSON, no
  model_type, an unknown model_type, custom code (auto_map + a class transformers lacks), and flaky repos
  that answer 503 before they answer.

Every repo knows what the planner must conclude about it (`expect`: "sig:<group>" or a failure reason), so
tests can check the dedup in both directions. Deterministic for a seed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

# One real config per model type (catalogue ids), over 20+ architectures and 7 tasks.
BASES = (
    "meta-llama/Llama-3.1-8B",
    "mistralai/Mistral-7B-v0.3",
    "mistralai/Mixtral-8x7B-v0.1",
    "Qwen/Qwen2.5-7B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen1.5-MoE-A2.7B",
    "google/gemma-7b",
    "google/gemma-2-2b",
    "google/gemma-3-270m",
    "microsoft/phi-2",
    "microsoft/Phi-3-mini-4k-instruct",
    "openai-community/gpt2",
    "EleutherAI/pythia-160m",
    "facebook/opt-125m",
    "bigscience/bloom-560m",
    "stabilityai/stablelm-2-1_6b",
    "allenai/OLMo-2-1124-7B",
    "HuggingFaceTB/SmolLM3-3B",
    "google-bert/bert-base-uncased",
    "FacebookAI/roberta-base",
    "google-t5/t5-small",
    "facebook/bart-base",
    "google/vit-base-patch16-224",
    "openai/whisper-tiny",
    "answerdotai/ModernBERT-base",
)

NOISE_DTYPES = ("bfloat16", "float16", "float32")
NOISE_VERSIONS = ("4.40.0", "4.46.2", "4.51.3", "4.56.1", "5.0.0")
FAILURES = ("gated", "private", "missing_config", "bad_json", "no_model_type", "unknown_model_type", "custom_code")


@dataclass
class Repo:
    id: str
    sha: str
    files: dict[str, bytes]
    downloads: int
    likes: int
    pipeline_tag: str | None = None
    library: str = "transformers"
    gated: bool | str = False
    private: bool = False
    flaky: int = 0  # requests answered 503 before the repo answers
    expect: str = ""  # "sig:<group>" (ids of one group share a signature) | a config-failure reason
    kind: str = ""  # base | copy | resized | near | <failure>
    base: str = ""  # the catalogue id it derives from

    def info(self) -> dict[str, Any]:
        """What the Hub's /api/models answers about it (the fields `expand` can ask for)."""
        return {
            "id": self.id,
            "modelId": self.id,
            "author": self.id.split("/")[0],
            "sha": self.sha,
            "downloads": self.downloads,
            "likes": self.likes,
            "gated": self.gated,
            "private": self.private,
            "library_name": self.library,
            "pipeline_tag": self.pipeline_tag,
            "tags": [self.library] + ([self.pipeline_tag] if self.pipeline_tag else []),
            "siblings": [{"rfilename": f} for f in sorted(self.files)],
        }


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _catalogue() -> dict[str, dict[str, Any]]:
    from bringup.hub import refs

    return {e["id"]: e for e in refs.catalogue()}


def _pipeline(task: str) -> str | None:
    return {
        "causal-lm": "text-generation",
        "masked-lm": "fill-mask",
        "seq2seq-lm": "text2text-generation",
        "image-classification": "image-classification",
        "speech-seq2seq": "automatic-speech-recognition",
        "sequence-classification": "text-classification",
    }.get(task)


def _noise(cfg: dict[str, Any], rng: random.Random, name: str) -> dict[str, Any]:
    out = dict(cfg)
    out["_name_or_path"] = name
    out["torch_dtype"] = rng.choice(NOISE_DTYPES)
    out["transformers_version"] = rng.choice(NOISE_VERSIONS)
    out["use_cache"] = rng.random() < 0.5
    return out


def _per_layer_lists(cfg: dict[str, Any], n: int) -> bool:
    return any(isinstance(v, list) and len(v) == n for v in cfg.values())


def resized_variants(cfg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Other sizes of one architecture that the tiny shrink maps to the same config."""
    out: list[tuple[str, dict[str, Any]]] = []
    for k in ("num_hidden_layers", "n_layer", "num_layers"):
        v = cfg.get(k)
        if isinstance(v, int) and v >= 4 and not _per_layer_lists(cfg, v) and not cfg.get("num_decoder_layers"):
            out.append(("depth", {**cfg, k: v - 1}))
            break
    if isinstance(cfg.get("vocab_size"), int) and cfg["vocab_size"] >= 1000:
        out.append(("vocab", {**cfg, "vocab_size": cfg["vocab_size"] + 128}))
    h, a, kv = cfg.get("hidden_size"), cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if (
        isinstance(h, int)
        and isinstance(a, int)
        and isinstance(kv, int)
        and "head_dim" not in cfg
        and isinstance(cfg.get("intermediate_size"), int)
        and cfg.get("model_type") not in ("phi3",)
    ):
        out.append(
            (
                "width",
                {
                    **cfg,
                    "hidden_size": 2 * h,
                    "num_attention_heads": 2 * a,
                    "num_key_value_heads": 2 * kv,
                    "intermediate_size": 2 * cfg["intermediate_size"],
                },
            )
        )
    return out


_ACTS = {
    "silu": "gelu",
    "gelu": "relu",
    "gelu_new": "relu",
    "gelu_pytorch_tanh": "silu",
    "relu": "gelu",
    "swish": "gelu",
    "gelu_fast": "relu",
}


def near_variants(cfg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One graph field changed (each must give another signature and another graph)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for k in ("hidden_act", "activation_function", "hidden_activation"):
        if isinstance(cfg.get(k), str) and cfg[k] in _ACTS:
            # gemma's config.json names `hidden_activation`, which transformers 5 reads for gemma2/3 but not for
            # gemma (its modeling code reads hidden_act): one activation change sets both
            new = {k: _ACTS[cfg[k]]} if k != "hidden_activation" else dict.fromkeys(("hidden_act", k), _ACTS[cfg[k]])
            out.append((f"act:{k}", {**cfg, **new}))
            break
    for k in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"):
        if isinstance(cfg.get(k), float):
            out.append((f"eps:{k}", {**cfg, k: cfg[k] * 10}))
            break
    for k in ("attention_bias", "mlp_bias", "tie_word_embeddings"):
        if isinstance(cfg.get(k), bool):
            out.append((f"flip:{k}", {**cfg, k: not cfg[k]}))
    if isinstance(cfg.get("rope_theta"), (int, float)):
        out.append(("rope_theta", {**cfg, "rope_theta": float(cfg["rope_theta"]) * 4}))
        if not cfg.get("rope_scaling") and cfg.get("model_type") != "phi3":  # phi3 validates: longrope only
            out.append(("rope_scaling", {**cfg, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}))
    if "sliding_window" in cfg and cfg.get("model_type") in ("mistral", "mixtral"):  # every layer windowed
        # (qwen2 windows only layers past max_window_layers: none of the tiny model's, so there the window is no
        # graph field at tiny size; the signature still tells them apart: a harmless over-split)
        out.append(("sliding_window", {**cfg, "sliding_window": 8 if not cfg["sliding_window"] else None}))
    a, kv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if isinstance(a, int) and isinstance(kv, int) and kv < a:
        out.append(("kv_heads", {**cfg, "num_key_value_heads": a}))
    if isinstance(cfg.get("final_logit_softcapping"), (int, float)):
        out.append(("softcap", {**cfg, "final_logit_softcapping": float(cfg["final_logit_softcapping"]) / 2}))
    return out


@dataclass
class SynthHub:
    repos: list[Repo] = field(default_factory=list)

    def by_id(self) -> dict[str, Repo]:
        return {r.id: r for r in self.repos}


def _config_repo(rid: str, cfg: dict[str, Any], task: str, downloads: int, rng: random.Random, **kw: Any) -> Repo:
    body = json.dumps(cfg, indent=2).encode()
    return Repo(
        rid,
        _sha(rid + body.decode()),
        {"config.json": body, "README.md": b"# model\n"},
        downloads,
        max(0, downloads // 50 + rng.randint(0, 9)),
        pipeline_tag=_pipeline(task),
        **kw,
    )


def generate(
    copies: int = 6, seed: int = 0, bases: tuple[str, ...] = BASES, failures_each: int = 3, flaky: int = 4
) -> SynthHub:
    """About (1 + copies + 3 + 2) x len(bases) + failures_each x 7 repos (300 with the defaults)."""
    from bringup.hub import build

    rng = random.Random(seed)
    cat = _catalogue()
    out = SynthHub()
    for bi, bid in enumerate(bases):
        base = copy.deepcopy(cat[bid]["config"])
        task = build.task_of(base)[0]
        group = f"sig:{bi}"
        org = bid.split("/")[0].lower().replace("_", "-")
        top = 10_000_000 // (bi + 1)
        out.repos.append(
            _config_repo(
                f"{org}/base-{bi}", _noise(base, rng, bid), task, top, rng, expect=group, kind="base", base=bid
            )
        )
        for i in range(copies):
            rid = f"user{rng.randint(0, 999)}/ft{bi}-{i}"
            out.repos.append(
                _config_repo(
                    rid, _noise(base, rng, rid), task, top // (10 * (i + 2)), rng, expect=group, kind="copy", base=bid
                )
            )
        for j, (what, cfg) in enumerate(resized_variants(base)):
            rid = f"{org}/base-{bi}-{what}"
            out.repos.append(
                _config_repo(
                    rid, _noise(cfg, rng, rid), task, top // (3 + j), rng, expect=group, kind="resized", base=bid
                )
            )
        for j, (what, cfg) in enumerate(near_variants(base)[:2]):
            rid = f"lab{bi}/near-{bi}-{j}"
            out.repos.append(
                _config_repo(
                    rid,
                    _noise(cfg, rng, rid),
                    task,
                    top // (7 + j),
                    rng,
                    expect=f"{group}:{what}",
                    kind="near",
                    base=bid,
                )
            )
    llama = cat[bases[0]]["config"]
    for i in range(failures_each):
        for kind in FAILURES:
            rid = f"broken{i}/{kind.replace('_', '-')}-{i}"
            dl = 5000 // (i + 1)
            if kind == "gated":
                r = _config_repo(rid, llama, "causal-lm", 2_000_000 // (i + 1), rng, gated="manual", expect="gated")
            elif kind == "private":
                r = _config_repo(rid, llama, "causal-lm", dl, rng, private=True, expect="not_found_or_private")
            elif kind == "missing_config":
                r = Repo(
                    rid,
                    _sha(rid),
                    {"README.md": b"# gguf\n", "model-Q4_K_M.gguf": b"GGUF"},
                    dl,
                    1,
                    library="transformers",
                    expect="missing_config",
                )
            elif kind == "bad_json":
                r = Repo(
                    rid,
                    _sha(rid),
                    {"config.json": b'{"model_type": "llama", "hidden_size": 64,'},
                    dl,
                    1,
                    expect="bad_config",
                )
            elif kind == "no_model_type":
                r = _config_repo(
                    rid,
                    {"hidden_size": 64, "architectures": ["LlamaForCausalLM"]},
                    "causal-lm",
                    dl,
                    rng,
                    expect="bad_config",
                )
            elif kind == "unknown_model_type":
                future = {"model_type": "acme_future", "architectures": ["AcmeFutureForCausalLM"], "hidden_size": 64}
                r = _config_repo(rid, future, "causal-lm", dl, rng, expect="unknown_model_type")
            else:
                r = _config_repo(
                    rid,
                    {
                        **llama,
                        "model_type": "llama",
                        "architectures": ["AcmeForCausalLM"],
                        "auto_map": {"AutoModelForCausalLM": "modeling_acme.AcmeForCausalLM"},
                    },
                    "causal-lm",
                    dl,
                    rng,
                    expect="custom_code",
                )
            r.kind = kind
            out.repos.append(r)
    ok = [r for r in out.repos if r.kind == "copy"]
    for r in rng.sample(ok, min(flaky, len(ok))):
        r.flaky = 1
    return out
