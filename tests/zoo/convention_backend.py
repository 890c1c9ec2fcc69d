"""Test-only compile backends that differ from PyTorch's SDPA only where the mathematics leaves the value to the
kernel: a query row whose every key is masked (the pad queries of a left-padded row under a causal + padding mask).

- `masked_uniform_aot_eager`: such a row attends uniformly to all its keys (the mean of V), what a kernel that fills
  masked scores with a finite minimum gives (transformers' own eager attention, many fused kernels). Exact elsewhere:
  a correct backend, which no verdict may fail.
- `masked_nan_aot_eager`: such a row is NaN (a kernel that computes 0/0). The NaN reaches the next layer's keys at the
  pad positions, where a masked score of NaN + (-inf) stays NaN: real rows turn NaN. A wrong backend.
- `masked_zero_aot_eager`: the rewrite with PyTorch's own convention (0): the rewrite itself changes nothing.

Import it as a plugin (`bringup --import convention_backend ...`, tests/zoo on PYTHONPATH), or use `MaskedRowsMode`
over an eager step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

CONVENTIONS = ("uniform", "nan", "zero")
_NAMES = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _fully_masked(a: dict[str, Any]) -> torch.Tensor | None:
    """(..., q) True where a query row has no key left, or None when no row is fully masked."""
    mask = a.get("attn_mask")
    if mask is None:
        return None  # is_causal alone never masks a whole row
    q, k = a["query"].shape[-2], a["key"].shape[-2]
    keep = mask if mask.dtype == torch.bool else mask > float("-inf")
    if a.get("is_causal"):
        keep = keep & torch.ones(q, k, dtype=torch.bool, device=keep.device).tril()
    return ~keep.any(-1)  # no data-dependent branch: the rewrite is traced inside a compiled graph


def masked_rows(convention: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """scaled_dot_product_attention, its fully masked rows given by `convention`."""
    a = {**dict(zip(_NAMES, args, strict=False)), **kwargs}
    out = func(*args, **kwargs)
    dead = _fully_masked(a)
    if dead is None:
        return out
    v = a["value"]
    if convention == "uniform":
        mean = v.mean(-2, keepdim=True)
        if mean.shape[-3] != out.shape[-3]:  # grouped-query attention: each kv head serves several q heads
            mean = mean.repeat_interleave(out.shape[-3] // mean.shape[-3], dim=-3)
        fill = mean.expand_as(out)
    elif convention == "nan":
        fill = torch.full_like(out, float("nan"))
    else:
        fill = torch.zeros_like(out)
    return torch.where(dead.unsqueeze(-1).expand_as(out), fill, out)


def _is_sdpa(target: Any) -> bool:
    return target is F.scaled_dot_product_attention or getattr(target, "__name__", "") == "scaled_dot_product_attention"


class MaskedRowsMode(TorchFunctionMode):
    """An eager step whose SDPA calls give fully masked rows `convention`."""

    def __init__(self, convention: str) -> None:
        super().__init__()
        self.convention = convention
        self.calls = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if _is_sdpa(func):
            self.calls += 1
            return masked_rows(self.convention, func, tuple(args), dict(kwargs))
        return func(*args, **kwargs)


def backend(convention: str) -> Any:
    """A dynamo backend: every SDPA node rewritten with `convention` for fully masked rows, then aot_eager."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return masked_rows(convention, F.scaled_dot_product_attention, args, kwargs)

    call.__name__ = f"sdpa_masked_rows_{convention}"

    def compile_fn(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        from torch._dynamo.backends.debugging import aot_eager

        n = 0
        for node in gm.graph.nodes:
            if node.op == "call_function" and _is_sdpa(node.target):
                node.target = call
                n += 1
        if n:
            gm.graph.lint()
            gm.recompile()
        return aot_eager(gm, example_inputs)

    return compile_fn


def register_all() -> list[str]:
    from torch._dynamo import list_backends, register_backend

    names = []
    for c in CONVENTIONS:
        name = f"masked_{c}_aot_eager"
        if name not in list_backends(exclude_tags=()):
            register_backend(name=name, compiler_fn=backend(c))
        names.append(name)
    return names


register_all()
