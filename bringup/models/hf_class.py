"""A transformers model by its class name (`AlbertForMaskedLM`), as PyTorch's dynamo huggingface benchmark suite
names and builds it (`cls(cls.config_class())`: the class itself, from its config class's defaults), but tiny: the
config class's defaults shrunk by the zoo's role-based shrinker (models/tiny_config.py), so the head is the one the
class name says (ForMaskedLM, ForCausalLM / LMHeadModel, ForConditionalGeneration, ForQuestionAnswering,
ForSequenceClassification, ...), and the model is fed and trained like every zoo model (models/tiny.py).

The task (how it is fed, which labels its own loss reads) is the transformers task mapping that names the class
(`task_of`); a question-answering head gets `start_positions` / `end_positions` (upstream's labels for it) drawn
among each row's real tokens. A class this transformers release does not have is a ConfigError (the case is a
config failure, counted apart), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import torch

from bringup.models import batches
from bringup.models import tiny as mz
from bringup.models.tiny_config import fit_positions, fit_window, tiny_config

QA = "question-answering"
# The first transformers mapping (in this order) naming a class gives its task: specific heads first, so that
# BartForConditionalGeneration (in both the masked-LM and the seq2seq mappings) is seq2seq, as its name says.
TASK_MAPPINGS: tuple[tuple[str, str], ...] = (
    (QA, "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES"),
    ("sequence-classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("token-classification", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("audio-classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
)


def task_of(class_name: str) -> str:
    """The task of a transformers model class by name (no model module imported): the first of TASK_MAPPINGS
    whose mapping names it; "base" (the zoo's generic objective) when none does."""
    from transformers.models.auto import modeling_auto  # lazy: planning imports no transformers

    for task, mapping in TASK_MAPPINGS:
        for v in getattr(modeling_auto, mapping, {}).values():
            if v == class_name or (isinstance(v, (list, tuple)) and class_name in v):
                return task
    return "base"


def has_class(name: str) -> bool:
    """Whether this transformers release exports `name` (its lazy module's names: nothing imported)."""
    return name in exported_names()


@cache
def exported_names() -> frozenset[str]:
    """transformers' exported names (`dir` of its lazy module takes about a second: read once)."""
    import transformers  # lazy: planning imports no transformers

    return frozenset(dir(transformers))


def model_class(name: str) -> Any:
    """The transformers model class `name`: ConfigError (one line) when this release has none of that name."""
    import transformers  # lazy: planning imports no transformers

    if not has_class(name):
        raise mz.ConfigError(f"transformers {transformers.__version__} has no class {name}")
    try:
        cls = getattr(transformers, name)
    except Exception as e:  # the class's module fails to import (a missing optional dependency)
        raise mz.ConfigError(f"import {name}: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise mz.ConfigError(f"transformers.{name} is not a model class")
    return cls


def build(name: str, task: str = "", bs: mz.BatchSpec | None = None, seed: int = 0) -> mz.Built:
    """Class `name` at tiny size for `task` (default: task_of(name)), seeded, fp32 on cpu, fed like the zoo's."""
    bs = bs or mz.BatchSpec()
    cls = model_class(name)
    task = task or task_of(name)
    try:
        cfg = tiny_config(cls.config_class.model_type)
    except Exception as e:
        raise mz.ConfigError(f"tiny config: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    if task == "sequence-classification" and getattr(cfg, "pad_token_id", None) is None:
        cfg.pad_token_id = 0  # as upstream sets it: the head pools the last non-pad token of a padded row
    fit_positions(cfg, bs.seq)
    if bs.inputs == "text":
        fit_window(cfg, bs.seq)

    def make() -> torch.nn.Module:
        if getattr(cls, "_supports_sdpa", False):
            return cls._from_config(cfg, attn_implementation="sdpa")
        return cls._from_config(cfg)

    try:
        n = mz.count_params_meta(make)
    except Exception as e:
        raise mz.ConfigError(f"build: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    if n > mz.PARAM_LIMIT:
        raise mz.ConfigError(f"tiny config still has {n / 1e6:.1f}M params (> {mz.PARAM_LIMIT / 1e6:g}M)")
    torch.manual_seed(seed)
    try:
        model = make().to(torch.float32)
    except Exception as e:
        raise mz.ConfigError(f"build: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    model.train()
    make_batch = mz.hf_batches(model, "base" if task == QA else task, bs, seed)
    logits: Callable[[Any], torch.Tensor | None] = mz.first_float
    if task == QA:
        make_batch, logits = with_spans(make_batch, seed), span_logits
    return mz.Built(model, make_batch, mz.call_kwargs, mz.hf_loss, logits, note=f"{name} ({task}), {n} params")


def with_spans(make_batch: Callable[[int], dict[str, Any]], seed: int) -> Callable[[int], dict[str, Any]]:
    """Batches with a question-answering head's labels: per row a start and an end position (start <= end),
    drawn among the row's real tokens (attention_mask 1) from a stream of their own, seeded per step."""

    def batch(step: int) -> dict[str, Any]:
        out = make_batch(step)
        g = torch.Generator().manual_seed(seed * 1000 + step + 700_001)
        for b in batches.micro(out) or [out]:
            ids = b["input_ids"]
            mask = b.get("attention_mask")
            real = mask.bool() if isinstance(mask, torch.Tensor) else torch.ones_like(ids, dtype=torch.bool)
            starts, ends = [], []
            for row in real:
                pos = row.nonzero().flatten()
                a, z = sorted(int(pos[i]) for i in torch.randint(0, pos.numel(), (2,), generator=g))
                starts.append(a)
                ends.append(z)
            b["start_positions"] = torch.tensor(starts, dtype=torch.long)
            b["end_positions"] = torch.tensor(ends, dtype=torch.long)
        return out

    return batch


def span_logits(out: Any) -> torch.Tensor | None:
    """A question-answering output's start and end logits, (rows, tokens, 2); over microbatches, their rows one
    after the other (as first_float does for logits)."""
    if isinstance(out, dict) and mz.MICRO_OUT in out:
        parts = [span_logits(o) for o in out[mz.MICRO_OUT]]
        if any(p is None for p in parts) or len({tuple(p.shape[1:]) for p in parts}) != 1:  # type: ignore[union-attr]  # read once none is None
            return parts[0]
        return torch.cat(parts)  # type: ignore[arg-type]  # no part is None (returned above)
    start, end = getattr(out, "start_logits", None), getattr(out, "end_logits", None)
    if isinstance(start, torch.Tensor) and isinstance(end, torch.Tensor):
        return torch.stack([start, end], dim=-1)
    return mz.first_float(out)
