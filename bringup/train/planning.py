"""train's planning parsers: --modes, --seqs, --dynamic and the model check, pure, each raising BadInput
before any work (bringup/train/suite.py plans the cases with them)."""

from __future__ import annotations

import importlib
from typing import Any

from bringup.errors import BadInput
from bringup.models import lm
from bringup.models.lm import MODES as LM_MODES
from bringup.train.arms import EXTRA_MODES
from bringup.train.spec import DYNAMIC


def parse_modes(text: str) -> tuple[str, ...]:
    MODES = LM_MODES + EXTRA_MODES
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise BadInput(f"bad --modes {text!r}: use a comma list of {', '.join(MODES)}")
    return tuple(m for m in MODES if m in modes)  # canonical order: eager first (the reference)


def parse_seqs(text: str | None, seq: int | None) -> tuple[int, ...]:
    """--seqs L1,L2,... -> the schedule (() without it); BadInput for a bad list or a --seq that is not its max."""
    if text is None:
        return ()
    try:
        seqs = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        seqs = ()
    if not seqs or min(seqs) < 1:
        raise BadInput(f"bad --seqs {text!r}: use a comma list of positive sequence lengths, e.g. 256,192,128")
    if seq is not None and seq != max(seqs):
        raise BadInput(
            f"--seq {seq} with --seqs {text}: --seq is the schedule's longest length ({max(seqs)}); drop --seq"
        )
    return seqs


def parse_dynamic(text: str | None) -> tuple[str, ...]:
    got = [d.strip() for d in (text or "auto").split(",") if d.strip()]
    bad = [d for d in got if d not in DYNAMIC]
    if bad or not got:
        raise BadInput(f"bad --dynamic {text!r}: use a comma list of {', '.join(DYNAMIC)}")
    return tuple(d for d in DYNAMIC if d in got)


def first_seen_last(seqs: tuple[int, ...]) -> int:
    """The step (1-based) at which the schedule's last new length first appears: every shape has been
    met once by then (a graph per shape compiled, with dynamic shapes off)."""
    return max(seqs.index(s) + 1 for s in set(seqs)) if seqs else 1


def check_model(model: str, overrides: list[str], seq: int) -> dict[str, Any]:
    """Presets and config JSONs are built on the meta device (no memory, catches bad configs) and give
    params and FLOPs/token; module:function is only checked for an importable callable."""
    if lm.is_user_fn(model):
        if overrides:
            raise BadInput("--override applies to presets and config JSONs, not to module:function models")
        mod_name, _, fn_name = model.partition(":")
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name)
        except (ImportError, AttributeError, ValueError) as e:
            raise BadInput(f"model {model}: {type(e).__name__}: {e}".splitlines()[0]) from None
        if not callable(fn):
            raise BadInput(f"model {model}: {fn_name} is not callable")
        return {}
    lm.load_config(model, overrides)
    try:
        meta = lm.build_model(model, overrides, device="meta")
    except BadInput:
        raise
    except Exception as e:
        raise BadInput(f"model {model}: cannot build it: {type(e).__name__}: {e}".splitlines()[0]) from None
    params, emb = lm.param_counts(meta)
    return {"params": params, "embedding_params": emb, "flops_per_token": lm.flops_per_token(meta, seq)}
