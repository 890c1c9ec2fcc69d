"""The one small interface a Device and its adapter share, so that neither imports the other.

    DeviceRef   what an adapter (and a Timer, the peak table) reads of its device: its identity
    Clock       what a Timer and the calibration GEMM read of an adapter
    the registry  device type -> adapter factory: adapter modules (and plugins) register here, a Device
                finds its adapter here (select.py), and a shipped family's package is loaded from here

Above names.py only: it imports no other module of the device package (tests/spine/test_device_circles.py
checks that the package has no import circle, counting imports inside functions and TYPE_CHECKING).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from bringup.errors import BadInput


class DeviceRef(Protocol):
    """A resolved device as its adapter sees it (bringup.device.core.Device is one)."""

    @property
    def type(self) -> str: ...

    @property
    def index(self) -> int | None: ...

    @property
    def name(self) -> str: ...

    @property
    def is_cpu(self) -> bool: ...

    @property
    def torch_device(self) -> torch.device: ...


class Clock(Protocol):
    """What a Timer needs of an adapter (bringup.device.adapter.DeviceAdapter is one)."""

    @property
    def device(self) -> DeviceRef: ...

    @property
    def has_timing_events(self) -> bool: ...

    @property
    def calibration_n(self) -> int: ...

    def synchronize(self) -> None: ...

    def materialize(self, tensors: Sequence[torch.Tensor]) -> None: ...


# ---- the registry ----------------------------------------------------------------------------------
# device type -> adapter class (or factory) taking the Device and giving its DeviceAdapter. Module state by
# design, like the suite registry: a plugin registers by being imported.
AdapterFactory = Callable[[Any], Any]
_ADAPTERS: dict[str, AdapterFactory] = {}
# Families we ship whose backend is a package of its own: imported when its device type is asked for.
# device type -> (module to import, adapter module, what to install)
SHIPPED: dict[str, tuple[str, str, str]] = {
    "xla": ("torch_xla", "bringup.device.xla", "pip install torch-xla (PyTorch/XLA pins one torch release: "
            "install the two together, e.g. pip install torch==2.9.0 torch-xla==2.9.0)"),
}  # fmt: skip


def register_adapter(device_type: str, adapter: AdapterFactory) -> None:
    """Serve `device_type` with `adapter` (a DeviceAdapter subclass or a factory taking the Device)."""
    if not device_type or not device_type.replace("_", "").isalnum():
        raise ValueError(f"device type {device_type!r} must be a word")
    _ADAPTERS[device_type] = adapter


def unregister_adapter(device_type: str) -> None:
    """Take `device_type`'s adapter out of the registry (a plugin unloading; tests)."""
    _ADAPTERS.pop(device_type, None)


def registered_types() -> list[str]:
    return sorted(_ADAPTERS)


def registered(device_type: str) -> AdapterFactory | None:
    return _ADAPTERS.get(device_type)


def load_family(device_type: str) -> None:
    """Import a shipped family's backend package (and its adapter) for `device_type`: `--device xla`
    works with torch_xla installed and nothing else. BadInput (one line) when the package is missing."""
    if device_type not in SHIPPED or device_type in _ADAPTERS:
        return
    pkg, adapter_mod, how = SHIPPED[device_type]
    if importlib.util.find_spec(pkg) is None:
        raise BadInput(f"device {device_type!r} needs the {pkg} package, which is not installed: {how}")
    try:
        importlib.import_module(adapter_mod)
    except BadInput:
        raise
    except Exception as e:  # e.g. a torch_xla built for another torch release
        first = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        raise BadInput(f"device {device_type!r}: importing {pkg} failed ({first}); {how}") from None
