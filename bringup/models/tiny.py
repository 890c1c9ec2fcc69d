"""Tiny random-init models for every transformers architecture: the model, its seeded batches and the loss to
train on (a `Built`). The tiny configs come from models/tiny_config.py. The zoo (bringup/zoo/build.py) builds
its cases with them, and so do layers the zoo sits above (the Hub sweep: hub/build.py, hub/signature.py) and
beside (train/reference.py), which is why they live here, in models, and the zoo's own sources (a user's
`module:function`, a config JSON, timm) in bringup/zoo.

Nothing is downloaded: configs come from the config classes' defaults, weights from a seeded init.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bringup.models import batches
from bringup.models.tiny_config import (
    OVERRIDES,
    fit_positions,
    fit_window,
    special_token_ids,
    tiny_config,
)

PARAM_LIMIT = 5_000_000  # the ceiling per tiny model


# ---- model specs and builds -----------------------------------------------------------------------
# hf-all: one task per model type, the first mapping (in this order) that names it. The task decides
# the head, the inputs and the loss.
TASKS: tuple[tuple[str, str], ...] = (
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("audio-classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("sequence-classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("token-classification", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
    ("base", "MODEL_MAPPING_NAMES"),
)
_AUTO_CLASS = {
    "causal-lm": "AutoModelForCausalLM", "masked-lm": "AutoModelForMaskedLM",
    "seq2seq-lm": "AutoModelForSeq2SeqLM", "image-classification": "AutoModelForImageClassification",
    "audio-classification": "AutoModelForAudioClassification", "ctc": "AutoModelForCTC",
    "speech-seq2seq": "AutoModelForSpeechSeq2Seq", "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification", "image-text-to-text": "AutoModelForImageTextToText",
    "base": "AutoModel",
}  # fmt: skip


def causal_types() -> list[str]:
    """The model types of transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (196 in transformers 5.24)."""
    from transformers.models.auto import modeling_auto  # lazy: planning imports no transformers

    return sorted(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def all_types() -> list[tuple[str, str]]:
    """(model_type, task) for every model type in any task mapping: the first task of TASKS naming it;
    types that only appear in other mappings (detection, segmentation, ...) get their base model."""
    from transformers.models.auto import modeling_auto  # lazy: planning imports no transformers

    out: dict[str, str] = {}
    for task, mapping in TASKS:
        for t in getattr(modeling_auto, mapping, {}):
            out.setdefault(t, task)
    for name in dir(modeling_auto):
        if name.endswith("_MAPPING_NAMES") and name != "CONFIG_MAPPING_NAMES":
            for t in getattr(modeling_auto, name):
                out.setdefault(t, "base")
    return sorted(out.items())


@dataclass(frozen=True)
class BatchSpec:
    """How a model is fed (text models: bringup/models/batches.py). `batch`: rows per (micro)batch; `seq`:
    tokens per row; `inputs`: "text" (ids by rank-frequency, padded and packed microbatches) or "uniform"
    (the zoo's old layout: uniform ids, full rows, 16 tokens by default); `alternate`: one microbatch per
    step instead of both (the full-size zoo, whose every step is compared)."""

    batch: int = 3  # the zoo's tiny rows per microbatch and tokens per row (zoo/args.py: TINY_BATCH, TINY_SEQ)
    seq: int = 37
    image: int = 32
    audio_samples: int = 4000
    inputs: str = "text"
    alternate: bool = False
    left_pad: bool = True  # False: padded rows on the right only (a float64 reference that left padding breaks)


@dataclass
class Built:
    """A model ready for the zoo: fp32 on cpu, seeded init, plus how to feed it and what to train on."""

    model: torch.nn.Module
    make_batch: Callable[[int], dict[str, Any]]  # step -> inputs (cpu; floats in fp32)
    forward: Callable[[torch.nn.Module, dict[str, Any]], Any]  # (model, batch) -> output
    loss: Callable[[Any, dict[str, Any]], torch.Tensor]  # (output, batch) -> scalar loss
    logits: Callable[[Any], torch.Tensor | None]  # output -> the tensor compared as "logits"
    note: str = ""  # how the config was obtained (for the report)
    # its float64 reference keeps every cast to fp32 at float64 (zoo/steps.py: Float64Casts): set by the zoo only
    # when the model's code cannot run in float64 as written
    float64_casts: bool = False


class ConfigError(Exception):
    """The tiny config or the model can't be built: the case is ref_fail with reason 'config'."""


def count_params_meta(build_fn: Callable[[], torch.nn.Module]) -> int:
    """Parameter count without allocating: build on the meta device."""
    with torch.device("meta"):
        m = build_fn()
    return sum(p.numel() for p in m.parameters())


def seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _tokens(allowed: torch.Tensor, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Uniform token ids: the `inputs="uniform"` layout only (text batches: bringup/models/batches.py)."""
    return allowed[torch.randint(0, allowed.numel(), shape, generator=g)]


MICRO_OUT = "_micro_outputs"  # call_kwargs' output for a step of microbatches: {MICRO_OUT: [output, ...]}


def first_float(out: Any) -> torch.Tensor | None:
    if isinstance(out, dict) and MICRO_OUT in out:  # the microbatches' logits, one after the other (same rows)
        parts = [first_float(o) for o in out[MICRO_OUT]]
        if any(p is None for p in parts):
            return None
        if len({tuple(p.shape[1:]) for p in parts}) != 1:  # type: ignore[union-attr]  # no part is None (returned above)
            return parts[0]
        return torch.cat(parts)  # type: ignore[arg-type]  # no part is None (returned above)
    if isinstance(out, torch.Tensor):
        return out if out.is_floating_point() else None
    if hasattr(out, "logits") and isinstance(getattr(out, "logits", None), torch.Tensor):
        return out.logits
    items: Any
    if isinstance(out, dict) or hasattr(out, "to_tuple"):
        items = out.values() if isinstance(out, dict) else out.to_tuple()
    elif isinstance(out, (list, tuple)):
        items = out
    else:
        return None
    for v in items:
        t = first_float(v)
        if t is not None:
            return t
    return None


def _target_mse(out: Any, batch: dict[str, Any]) -> torch.Tensor:
    """Generic objective: mean squared distance of the first float output to a fixed target of the
    same shape (a model without a task loss still trains on something deterministic). The target is
    a function of the shape only (no generator, no per-step value): traceable without graph breaks
    or recompiles, so the breaks the zoo reports are the model's own."""
    y = first_float(out)
    if y is None:
        raise ConfigError("model output has no floating tensor to train on")
    idx = torch.arange(y.numel(), device=y.device, dtype=torch.float32)
    target = torch.sin(idx * 0.618 + 0.5).reshape(y.shape).to(y.dtype)
    keep = batches.output_positions(batch, y)
    if keep is None:
        return torch.nn.functional.mse_loss(y, target)
    # a padded batch: the objective reads the real tokens' outputs only, as a job's loss does (a pad's output is
    # the kernel's to fill); a weighted mean, no boolean indexing (no data-dependent shape in a compiled graph)
    w = keep.to(y.dtype).reshape(*keep.shape, *([1] * (y.dim() - keep.dim())))
    return ((y - target) ** 2 * w).sum() / (w.sum() * (y.numel() // keep.numel()))


def hf_loss(out: Any, batch: dict[str, Any]) -> torch.Tensor:
    """The model's own loss (its labels), else the generic objective; over microbatches, their mean (each a
    mean over its own labelled tokens, as a job that accumulates microbatches of a step averages them)."""
    if isinstance(out, dict) and MICRO_OUT in out:
        parts = batches.micro(batch) or []
        losses = [hf_loss(o, b) for o, b in zip(out[MICRO_OUT], parts, strict=True)]
        return torch.stack(losses).mean()
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
        return out["loss"]
    return _target_mse(out, batch)


def call_kwargs(model: torch.nn.Module, batch: dict[str, Any]) -> Any:
    """model(**batch) (keys starting with "_" are not inputs); a step of microbatches calls the model once per
    microbatch: {MICRO_OUT: [output, ...]}."""
    parts = batches.micro(batch)
    if parts is not None:
        return {MICRO_OUT: [call_kwargs(model, b) for b in parts]}
    return model(**{k: v for k, v in batch.items() if not k.startswith("_")})


def text_config(cfg: Any) -> Any:
    try:
        return cfg.get_text_config()
    except Exception:
        return cfg


def hf_model_class(task: str) -> Any:
    import transformers  # lazy: planning imports no transformers

    return getattr(transformers, _AUTO_CLASS[task])


def build_hf(
    model_type: str,
    task: str = "causal-lm",
    bs: BatchSpec | None = None,
    seed: int = 0,
    cfg: Any = None,
    limit: int = PARAM_LIMIT,
) -> Built:
    """A tiny transformers model of `model_type` for `task` (or from `cfg` when given)."""
    bs = bs or BatchSpec()
    try:
        cfg = cfg if cfg is not None else tiny_config(model_type)
    except Exception as e:
        raise ConfigError(f"tiny config: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    fit_positions(cfg, bs.seq)
    if bs.inputs == "text":
        fit_window(cfg, bs.seq)
    auto = hf_model_class(task)

    def make() -> torch.nn.Module:
        # built in fp32 whatever storage dtype the config names (a config's `dtype` is its checkpoint's: a buffer made
        # at build time, gemma's embed_scale = sqrt(72), would otherwise be rounded to it, and two fine-tunes that
        # differ only there would compute different functions)
        kw: dict[str, Any] = {"dtype": torch.float32}
        if _sdpa_ok(auto, cfg):
            kw["attn_implementation"] = "sdpa"
        return auto.from_config(cfg, **kw)

    try:
        n = count_params_meta(make)
    except Exception as e:
        raise ConfigError(f"build: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    if n > limit:
        raise ConfigError(f"tiny config still has {n / 1e6:.1f}M params (> {limit / 1e6:g}M)")
    torch.manual_seed(seed)
    try:
        model = make().to(torch.float32)
    except Exception as e:
        raise ConfigError(f"build: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    model.train()
    make_batch = hf_batches(model, task, bs, seed)
    return Built(model, make_batch, call_kwargs, hf_loss, first_float, note=f"{type(model).__name__}, {n} params")


def _sdpa_ok(auto: Any, cfg: Any) -> bool:
    try:
        cls = auto._model_mapping[type(cfg)]
    except Exception:
        return False
    return bool(getattr(cls, "_supports_sdpa", False))


# text tasks fed the padded and packed layouts (batches.py): their labels, if any, follow the tokens or the row
TEXT_LAYOUT_TASKS = ("causal-lm", "masked-lm", "seq2seq-lm", "sequence-classification", "token-classification", "base")


def hf_batches(model: torch.nn.Module, task: str, bs: BatchSpec, seed: int) -> Callable[[int], dict[str, Any]]:
    """step -> the model's inputs (cpu; floats in fp32), seeded per step. Text models are fed like a training
    job (bringup/models/batches.py): ids by rank-frequency, padded rows with their mask, and for causal LMs
    packed documents, each step both (a padded and a packed microbatch) unless `bs.alternate`."""
    cfg = model.config
    main = getattr(model, "main_input_name", "input_ids")
    sig = frozenset(inspect.signature(model.forward).parameters)
    ov = OVERRIDES.get(str(getattr(cfg, "model_type", "")))
    hints = ov.inputs if ov is not None else {}
    if hints.get("seq") and bs.inputs == "text":  # a type whose rows must have one length (reformer's axial grid)
        bs = dataclasses.replace(bs, seq=int(hints["seq"]))
    tokens = _token_spec(model, main, sig, seed)
    text = main == "input_ids" and bs.inputs == "text" and not hints.get("pixel_values")
    layout = text and task in TEXT_LAYOUT_TASKS
    pack = layout and task == "causal-lm"
    steps = (
        batches.step_batches(tokens, bs.batch, bs.seq, seed, pack, bs.alternate, bs.left_pad)
        if layout and tokens
        else None
    )
    # outputs laid out along the tokens (a decoder's follow its own inputs, a classifier's the rows): their pad
    # positions are the kernel's to fill, and a verdict reads them for finiteness only (batches.output_positions)
    along_tokens = task in ("causal-lm", "masked-lm", "token-classification") or (
        task == "base" and not ("decoder_input_ids" in sig and getattr(cfg, "is_encoder_decoder", False))
    )
    num_labels = int(getattr(cfg, "num_labels", 2) or 2)
    return _Feeder(cfg, task, bs, seed, main, sig, tokens, num_labels, hints, steps, along_tokens)


def _token_spec(model: torch.nn.Module, main: str, sig: frozenset[str], seed: int) -> batches.TokenSpec | None:
    """The ids a text (or speech-to-text decoder) model is fed (batches.token_spec: the vocab the embedding
    has, its special tokens avoided); None for a model without token inputs."""
    cfg = model.config
    tcfg = text_config(cfg)
    vocab = getattr(tcfg, "vocab_size", None) or getattr(cfg, "vocab_size", None)
    try:
        emb = model.get_input_embeddings()  # type: ignore[operator]  # transformers' method, typed by Module.__getattr__
    except (AttributeError, NotImplementedError):
        emb = None
    if isinstance(emb, torch.nn.Embedding):
        vocab = min(vocab or emb.num_embeddings, emb.num_embeddings)
    avoid = special_token_ids(cfg)
    if main == "input_ids" and not vocab:
        raise ConfigError("no vocab_size for a text model")
    if not (main == "input_ids" or (main == "input_features" and vocab)):
        return None
    try:
        return batches.token_spec(tcfg, int(vocab), avoid, set(sig), seed)  # type: ignore[arg-type]  # vocab is set on this path (checked above)
    except ValueError as e:
        raise ConfigError(str(e)) from e


@dataclass(frozen=True, eq=False)
class _Feeder:
    """One model's batch recipe (hf_batches): called with a step, its inputs. `steps`: the text layouts'
    batches (batches.step_batches), None for the other inputs (images, audio, features, unlaid-out ids)."""

    cfg: Any
    task: str
    bs: BatchSpec
    seed: int
    main: str
    sig: frozenset[str]
    tokens: batches.TokenSpec | None
    num_labels: int
    hints: dict[str, Any]
    steps: Callable[[int], dict[str, Any]] | None
    along_tokens: bool

    def __call__(self, step: int) -> dict[str, Any]:
        if self.steps is not None:
            return self._text_batch(step)
        return self._other_batch(seeded_generator(self.seed * 1000 + step + 1))

    def _ids(self, g: torch.Generator) -> torch.Tensor:
        bs, tokens = self.bs, self.tokens
        assert tokens is not None
        if bs.inputs == "text":
            return batches.zipf_ids(tokens, bs.batch * bs.seq, g).reshape(bs.batch, bs.seq)
        return _tokens(tokens.allowed, (bs.batch, bs.seq), g)

    def _add_labels(self, b: dict[str, Any], g: torch.Generator, tok_labels: torch.Tensor) -> None:
        """The task's labels (and decoder inputs) for a token batch whose next-token labels are `tok_labels`
        (-100 where a position is not a token: padding, a packed row's document starts)."""
        task, sig, bs = self.task, self.sig, self.bs
        if task in ("causal-lm", "masked-lm", "image-text-to-text") and "labels" in sig:
            b["labels"] = tok_labels
        elif task == "seq2seq-lm" and "labels" in sig:
            b["labels"] = self._ids(g)
            if "decoder_input_ids" in sig:  # explicit: some configs lack decoder_start_token_id
                b["decoder_input_ids"] = torch.cat([b["labels"][:, :1], b["labels"][:, :-1]], dim=1)
        elif task == "sequence-classification" and "labels" in sig:
            b["labels"] = torch.randint(0, self.num_labels, (bs.batch,), generator=g)
        elif task == "token-classification" and "labels" in sig:
            lab = torch.randint(0, self.num_labels, (bs.batch, bs.seq), generator=g)
            b["labels"] = lab.masked_fill(tok_labels == batches.IGNORE, batches.IGNORE)
        elif task == "base" and "decoder_input_ids" in sig and getattr(self.cfg, "is_encoder_decoder", False):
            b["decoder_input_ids"] = self._ids(g)

    def _text_batch(self, step: int) -> dict[str, Any]:
        assert self.steps is not None and self.tokens is not None
        out = self.steps(step)
        g = seeded_generator(self.seed * 1000 + step + 500_001)  # labels and extras: their own stream
        for b in batches.micro(out) or [out]:
            self._add_labels(b, g, b.pop("labels"))
            if not self.along_tokens:
                b.pop(batches.POSITIONS, None)
        return out

    def _other_batch(self, g: torch.Generator) -> dict[str, Any]:
        """Inputs by the model's main input: ids, images, audio (a spectrogram or samples), speech features."""
        cfg, bs, task, sig, main = self.cfg, self.bs, self.task, self.sig, self.main
        b: dict[str, Any] = {}
        if main == "input_ids":
            b["input_ids"] = x = self._ids(g)
            self._add_labels(b, g, x.clone())
            if self.hints.get("pixel_values"):
                b["pixel_values"] = _pixel_values(cfg, bs, g)
        elif main == "pixel_values":
            b["pixel_values"] = _pixel_values(cfg, bs, g)
            if task == "image-classification" and "labels" in sig:
                b["labels"] = torch.randint(0, self.num_labels, (bs.batch,), generator=g)
        elif main == "input_values" and getattr(cfg, "num_mel_bins", None) and getattr(cfg, "max_length", None):
            # a spectrogram model (AST): (batch, frames, mel bins) at the config's own size
            frames, mel = int(cfg.max_length), int(cfg.num_mel_bins)
            b["input_values"] = torch.randn(bs.batch, frames, mel, generator=g)
            if task == "audio-classification" and "labels" in sig:
                b["labels"] = torch.randint(0, self.num_labels, (bs.batch,), generator=g)
        elif main == "input_values":
            b["input_values"] = torch.randn(bs.batch, bs.audio_samples, generator=g)
            if task == "audio-classification" and "labels" in sig:
                b["labels"] = torch.randint(0, self.num_labels, (bs.batch,), generator=g)
        elif main == "input_features":
            mel = int(getattr(cfg, "num_mel_bins", 16) or 16)
            frames = 2 * int(getattr(cfg, "max_source_positions", 16) or 16)
            b["input_features"] = torch.randn(bs.batch, mel, frames, generator=g)
            if "decoder_input_ids" in sig and self.tokens is not None:
                key = "labels" if task == "speech-seq2seq" and "labels" in sig else "decoder_input_ids"
                b[key] = self._ids(g)
        else:
            raise ConfigError(f"no input recipe for main input {main!r}")
        return b


def _pixel_values(cfg: Any, bs: BatchSpec, g: torch.Generator) -> torch.Tensor:
    """Random images at the (vision) config's own size and channel count."""
    vcfg = getattr(cfg, "vision_config", None) or cfg
    size = getattr(vcfg, "image_size", bs.image)
    size = size[0] if isinstance(size, (list, tuple)) else size
    return torch.randn(bs.batch, getattr(vcfg, "num_channels", 3), int(size), int(size), generator=g)


NONZERO_STD = 0.02  # transformers' default initializer_range


def nonzero_init(model: torch.nn.Module, seed: int = 0) -> int:
    """Draw every all-zero floating parameter (biases, norm offsets, zero-init gates) from
    N(0, NONZERO_STD), seeded. A parameter that is exactly zero makes whatever reads it untestable at
    step 0: a device that drops a bias, or ignores a norm's offset, computes the same thing as a
    correct one. Returns how many parameters were drawn."""
    g = torch.Generator().manual_seed(seed * 7 + 3)
    n = 0
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() and not bool(p.detach().ne(0).any()):
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype) * NONZERO_STD)
                n += 1
    return n
