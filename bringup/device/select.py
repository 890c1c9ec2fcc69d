"""Which adapter serves a device: a registered one for its type (adapter.py's registry), else the generic
eager one (eager.py). Apart from adapter.py so that the registry never imports an adapter built on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bringup.device.adapter import _ADAPTERS, DeviceAdapter
from bringup.device.eager import EagerAdapter

if TYPE_CHECKING:
    from bringup.device.core import Device


def adapter_for(device: Device) -> DeviceAdapter:
    """The adapter serving `device`: a registered one for its type, else the generic eager one."""
    factory = _ADAPTERS.get(device.type)
    if factory is None:
        return EagerAdapter(device)
    return factory(device)
