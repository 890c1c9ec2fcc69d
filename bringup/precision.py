"""Training precisions: pure dtypes (fp32, bf16, fp16) and mixed precision (amp-bf16, amp-fp16).

Real accelerator training is mostly mixed precision: fp32 master weights (and optimizer state), the
forward/backward under `torch.autocast(device_type, dtype=bf16|fp16)`, and for fp16 a
`torch.amp.GradScaler(device_type)` so small gradients don't underflow. Pure bf16/fp16 (weights in the
low dtype) stay available. One name per precision everywhere (CLI `--dtype`, Case params, stores).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from bringup.errors import BadInput
from bringup.options import canonical_dtype


@dataclass(frozen=True)
class Precision:
    name: str  # fp32 | bf16 | fp16 | amp-bf16 | amp-fp16 | fp64
    param_dtype: torch.dtype  # dtype of the weights (and so of the optimizer state)
    compute_dtype: torch.dtype  # dtype most matmuls run in

    @property
    def mixed(self) -> bool:
        """Autocast over higher-precision params."""
        return self.param_dtype != self.compute_dtype

    @property
    def low(self) -> bool:
        """Computes in a dtype below fp32 (pure or mixed)."""
        return self.compute_dtype in (torch.bfloat16, torch.float16)

    @property
    def needs_grad_scaler(self) -> bool:
        return self.mixed and self.compute_dtype == torch.float16

    def autocast(self, device_type: str) -> contextlib.AbstractContextManager[None]:
        """`torch.autocast` for mixed precision; a no-op context for pure dtypes."""
        if not self.mixed:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device_type, dtype=self.compute_dtype)

    def grad_scaler(self, device_type: str) -> torch.amp.GradScaler | None:
        return torch.amp.GradScaler(device_type) if self.needs_grad_scaler else None

    def __str__(self) -> str:
        return self.name


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", torch.float32, torch.float32),
        Precision("bf16", torch.bfloat16, torch.bfloat16),
        Precision("fp16", torch.float16, torch.float16),
        Precision("amp-bf16", torch.float32, torch.bfloat16),
        Precision("amp-fp16", torch.float32, torch.float16),
        Precision("fp64", torch.float64, torch.float64),
    )
}


def parse_precision(name: str, allow_mixed: bool = True) -> Precision:
    """'fp32' | 'bf16' | 'fp16' | 'amp-bf16' | 'amp-fp16' (and aliases) -> Precision; BadInput otherwise."""
    p = PRECISIONS.get(canonical_dtype(name))  # the aliases: bringup/options.py (the CLI's vocabulary)
    if p is None or (p.mixed and not allow_mixed):
        choices = "fp32, bf16, fp16" + (", amp-bf16, amp-fp16" if allow_mixed else "")
        raise BadInput(f"unknown dtype {name!r}; use one of {choices}")
    return p


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """torch's default dtype set to float64 while a float64 reference runs (tensors it creates itself,
    masks, `torch.full`, position tables, come out float64 too); any other dtype leaves it as it is.
    Restored afterwards."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype if dtype == torch.float64 else old)
    try:
        yield
    finally:
        torch.set_default_dtype(old)
