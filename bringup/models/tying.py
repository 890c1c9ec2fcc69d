"""Tied parameters across a move to a device.

`Module.to(device)` keeps a Parameter object (and so every tie: gpt2's lm_head.weight IS
transformer.wte.weight) only when the moved tensor can be swapped into it in place, which PyTorch
decides with `torch._has_compatible_shallow_copy_type(old, new)`. On a device whose tensors can't be
shallow-copied from cpu ones (a PrivateUse1 backend with its own TensorImpl; the C++ test device is
one), `_apply` wraps every moved tensor in a NEW Parameter, module by module, so each module that
shared the weight gets its own copy: the model silently trains two matrices where it had one.

That is a finding about the device (what a port must work around), and a different one from a
numerical error: `move()` reports the ties the move split and re-ties the model (`model.tie_weights()`
where the model has it, else each alias set back to the first name's Parameter), so the parity check
that follows judges the model the user meant. Shared by the zoo and train suites.
"""

from __future__ import annotations

from typing import Any

import torch

REMEDY = "re-tie after moving to the device (model.tie_weights(), or assign the shared Parameter again)"


def tied_groups(model: torch.nn.Module) -> list[list[str]]:
    """Names that share one Parameter object, groups of two or more, in module order."""
    by_id: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), []).append(name)
    return [names for names in by_id.values() if len(names) > 1]


def _get(model: torch.nn.Module, name: str) -> Any:
    mod_name, _, attr = name.rpartition(".")
    return getattr(model.get_submodule(mod_name) if mod_name else model, attr)


def _set(model: torch.nn.Module, name: str, value: torch.nn.Parameter) -> None:
    mod_name, _, attr = name.rpartition(".")
    setattr(model.get_submodule(mod_name) if mod_name else model, attr, value)


def split(model: torch.nn.Module, groups: list[list[str]]) -> list[list[str]]:
    """The groups whose names no longer share one Parameter."""
    return [g for g in groups if len({id(_get(model, n)) for n in g}) > 1]


def retie(model: torch.nn.Module, groups: list[list[str]]) -> None:
    """Make every group share one Parameter again: the model's own `tie_weights()` first (what a
    transformers model does after loading), then, for what it left split, the first name's Parameter."""
    if callable(getattr(model, "tie_weights", None)):
        try:
            model.tie_weights()  # type: ignore[operator]  # transformers' method, typed by Module.__getattr__
        except Exception:
            pass  # a model whose tie_weights() can't run here: the assignment below still ties it
    for g in split(model, groups):
        keep = _get(model, g[0])
        for n in g[1:]:
            _set(model, n, keep)


def move(model: torch.nn.Module, device: torch.device | str, dtype: torch.dtype | None = None) -> list[list[str]]:
    """`model.to(device, dtype)` in place, keeping ties. Returns the tied groups the move itself split
    (empty where the device keeps ties: cpu, cuda, ...); the model is re-tied either way."""
    groups = tied_groups(model)
    model.to(device=device, dtype=dtype)
    broken = split(model, groups)
    if broken:
        retie(model, broken)
        still = split(model, broken)
        if still:
            raise RuntimeError(f"could not re-tie {still} after moving to {device}")
    return broken


def describe(broken: list[list[str]], device: str) -> str:
    """One line naming the finding and its remedy."""
    pairs = "; ".join(" = ".join(g) for g in broken)
    return (
        f"tying broken by .to({device}): {pairs} became separate tensors (this device's tensors can't be "
        f"shallow-copied from cpu ones, so Module.to makes new Parameters); remedy: {REMEDY}"
    )
