"""What transformers keeps in fp32 when a job loads a model in a low-precision dtype.

`from_pretrained(dtype=torch.bfloat16)` keeps a model's `_keep_in_fp32_modules_strict` in fp32 (in bf16 and fp16:
MoE routers and their correction biases on 36 causal-LM types, inkling2's convolutions) and, in fp16 only, its
`_keep_in_fp32_modules`. A run that casts them to its dtype runs a model no job runs (inkling2's router multiplies
an fp32 input by its weight: in bf16 it raised). Shared by the zoo's tiny runs (zoo/steps.py: _load_init) and the
full-size build from a config (hub/build.py)."""

from __future__ import annotations

import re
from itertools import chain

import torch


def floating_state(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The model's floating parameters and buffers, by name."""
    return [(n, t) for n, t in chain(model.named_parameters(), model.named_buffers()) if t.is_floating_point()]


def fp32_kept(model: torch.nn.Module, dtype: torch.dtype) -> frozenset[str]:
    """The floating parameters and buffers transformers keeps in fp32 when a job loads the model in `dtype`: its
    dtype plan (modeling_utils `_get_dtype_plan`), each pattern matched as transformers' loader matches it
    (core_model_loading `build_glob_alternation`: `*` is any text, searched anywhere in the name). Not a
    transformers model, a transformers without that plan (its loader matched the same attributes by other rules,
    not reproduced here: the run casts them, as before), or not a low-precision dtype: none."""
    plan_of = getattr(model, "_get_dtype_plan", None)
    if dtype not in (torch.bfloat16, torch.float16) or not callable(plan_of):
        return frozenset()
    pats = [p for p, d in dict(plan_of(dtype)).items() if d == torch.float32]
    if not pats:
        return frozenset()
    rx = re.compile("|".join(f"(?:{p.replace('*', '.*')})" for p in pats))
    return frozenset(n for n, _ in floating_state(model) if rx.search(n))


def keep_fp32(model: torch.nn.Module, dtype: torch.dtype) -> frozenset[str]:
    """After `model.to(dtype)`: what a job loading the model in `dtype` keeps in fp32 held in fp32 again (on the meta
    device, before the weights are drawn, nothing is lost). Returns their names."""
    kept = fp32_kept(model, dtype)
    with torch.no_grad():
        for name, t in floating_state(model):
            if name in kept:
                t.data = t.data.to(torch.float32)
    return kept
