"""What torch calls things, asked at run time: the PrivateUse1 backend's name, the accelerator this build has
(and the one really present), dtype names. The bottom of the device package: it imports no other module of it.
"""

from __future__ import annotations

import torch

from bringup.errors import BadInput
from bringup.options import PURE_DTYPES, TORCH_DTYPE_NAMES, canonical_dtype


def privateuse1_name() -> str:
    return torch._C._get_privateuse1_backend_name()


def built_accelerator() -> torch.device | None:
    """The accelerator this torch build was compiled for (or a loaded plugin registered), present or not.

    A CUDA build of torch names `cuda` here even on a machine with no GPU: never pick a device from this.
    """
    return torch.accelerator.current_accelerator()  # auto-ok: the compile-time answer, on purpose


def available_accelerator() -> torch.device | None:
    """The accelerator that is really there: compiled in AND reporting a device at run time."""
    return torch.accelerator.current_accelerator(check_available=True)


def parse_dtype(name: str) -> torch.dtype:
    """A pure precision's torch dtype: any spelling of bringup.options' one alias table (fp32, float32, float ...);
    else BadInput."""
    torch_name = TORCH_DTYPE_NAMES.get(canonical_dtype(name))
    if torch_name is None:
        raise BadInput(f"unknown dtype {name!r}; use one of {', '.join(PURE_DTYPES)}")
    return getattr(torch, torch_name)  # type: ignore[no-any-return]  # a torch dtype, looked up by name


def dtype_name(dtype: torch.dtype) -> str:
    """torch.bfloat16 -> 'bf16' (the vocabulary's name; another dtype: torch's)."""
    name = str(dtype).removeprefix("torch.")
    return next((k for k, v in TORCH_DTYPE_NAMES.items() if v == name), name)
