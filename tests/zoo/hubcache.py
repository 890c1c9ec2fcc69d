"""A Hugging Face Hub cache laid out by hand in a temp dir, holding tiny models saved with
`save_pretrained` (config.json + model.safetensors): the zoo loads them by id with HF_HUB_OFFLINE=1.

Layout (huggingface_hub's cache): HF_HUB_CACHE/models--ORG--NAME/{refs/main, snapshots/<rev>/<files>}.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

REV = "0123456789abcdef0123456789abcdef01234567"


def _transformers() -> Any:
    from bringup.compat import ensure_torchvision_importable

    ensure_torchvision_importable()  # a CUDA torchvision next to a cpu torch (bringup/compat.py)
    import transformers

    return transformers


def tiny_llama(seed: int = 0) -> Any:
    import torch

    t = _transformers()
    torch.manual_seed(seed)
    cfg = t.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    return t.LlamaForCausalLM(cfg)


def tiny_bert(seed: int = 0) -> Any:
    import torch

    t = _transformers()
    torch.manual_seed(seed)
    cfg = t.BertConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=256,
        max_position_embeddings=64,
    )
    return t.BertForMaskedLM(cfg)


def add_model(cache: Path, repo_id: str, model: Any, weights: bool = True, rev: str = REV) -> Path:
    """Save `model` as repo `repo_id` (revision `rev`, refs/main -> it) into the cache; the snapshot dir."""
    tmp = cache / "_save" / repo_id.replace("/", "--")
    model.save_pretrained(tmp)
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    shutil.copy(tmp / "config.json", snap / "config.json")
    if weights:
        shutil.copy(tmp / "model.safetensors", snap / "model.safetensors")
    shutil.rmtree(cache / "_save")
    return snap
