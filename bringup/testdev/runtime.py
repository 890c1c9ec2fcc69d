"""`torch.testdev`: the device module of the test device (what `torch.get_device_module("testdev")`
returns). Device management, synchronize, memory, RNG and AMP queries, as other backends' modules."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from bringup.testdev.build import load_extension


def _ext() -> Any:
    return load_extension()


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return True


def init() -> None:
    pass


def _lazy_init() -> None:
    pass


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return int(_ext().device_count())


def current_device() -> int:
    return int(_ext().current_device())


def _index(device: torch.types.Device = None) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    return current_device() if d.index is None else int(d.index)


def set_device(device: torch.types.Device) -> None:
    idx = _index(device)
    if idx >= 0:
        _ext().set_device(idx)


class device:  # torch device modules name this context manager `device`
    """Context manager that makes `device` current."""

    def __init__(self, device: torch.types.Device) -> None:
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self) -> None:
        self.prev = int(_ext().exchange_device(self.idx)) if self.idx >= 0 else -1

    def __exit__(self, *exc: object) -> None:
        if self.prev >= 0:
            _ext().set_device(self.prev)


def synchronize(device: torch.types.Device = None) -> None:
    """Kernels run synchronously on the host; in lazy mode this runs what is queued."""
    torch.accelerator.synchronize(_index(device))


def fallback_counts() -> dict[str, int]:
    """The backend's own count of ops that ran through its CPU fallback (since load or the last reset):
    the device layer's fallback counter for this backend (bringup/device/eager.py)."""
    return {str(k): int(v[0]) for k, v in _ext().fallback_stats().items()}


def get_device_name(device: torch.types.Device = None) -> str:
    return f"bringup testdev {_index(device)} (host memory, C++ PrivateUse1 backend)"


def get_device_capability(device: torch.types.Device = None) -> tuple[int, int]:
    return (0, 0)


# ---- memory: served by the device allocator through torch.accelerator ------------------------------
def memory_allocated(device: torch.types.Device = None) -> int:
    return int(torch.accelerator.memory_allocated(_index(device)))


def max_memory_allocated(device: torch.types.Device = None) -> int:
    return int(torch.accelerator.max_memory_allocated(_index(device)))


def memory_reserved(device: torch.types.Device = None) -> int:
    return int(torch.accelerator.memory_reserved(_index(device)))


def max_memory_reserved(device: torch.types.Device = None) -> int:
    return int(torch.accelerator.max_memory_reserved(_index(device)))


def reset_peak_memory_stats(device: torch.types.Device = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def memory_stats(device: torch.types.Device = None) -> dict[str, Any]:
    return dict(torch.accelerator.memory_stats(_index(device)))


def empty_cache() -> None:
    pass  # no caching allocator: freed memory goes back at once


# ---- streams and events (one synchronous default stream per device) -------------------------------
Event = torch.Event
Stream = torch.Stream


def current_stream(device: torch.types.Device = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


# ---- AMP ----------------------------------------------------------------------------------------
def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# ---- RNG: one generator per device (random ops that fall back to CPU draw from the CPU generator) ----
def default_generator(idx: int = -1) -> torch.Generator:
    gen: torch.Generator = _ext().default_generator(idx)
    return gen


def get_rng_state(device: torch.types.Device = None) -> torch.Tensor:
    return default_generator(_index(device)).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [default_generator(i).get_state() for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: torch.types.Device = None) -> None:
    default_generator(_index(device)).set_state(new_state.cpu())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


def manual_seed(seed: int) -> None:
    default_generator(current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        default_generator(i).manual_seed(int(seed))


def seed() -> None:
    default_generator(current_device()).seed()


def seed_all() -> None:
    for i in range(device_count()):
        default_generator(i).seed()


def initial_seed() -> int:
    return int(default_generator(current_device()).initial_seed())
