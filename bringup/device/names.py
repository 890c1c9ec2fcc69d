"""What torch calls things, asked at run time: the PrivateUse1 backend's name, the accelerator this build has
(and the one really present), dtype names. The bottom of the device package: it imports no other module of it.
"""

from __future__ import annotations

import torch

from bringup.errors import BadInput


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
    table = {
        "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
        "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
        "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
        "fp64": torch.float64, "float64": torch.float64, "double": torch.float64,
    }  # fmt: skip
    try:
        return table[name.strip().lower()]
    except KeyError as e:
        raise BadInput(f"unknown dtype {name!r}; use one of fp32, bf16, fp16") from e


def dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}.get(
        dtype, str(dtype).removeprefix("torch.")
    )
