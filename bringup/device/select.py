"""Which adapter serves a device: a registered one for its type (the registry in iface.py), else the generic
eager one (eager.py). Apart from iface.py so that the registry never imports an adapter built on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from bringup.device.eager import EagerAdapter
from bringup.device.iface import DeviceRef, registered

if TYPE_CHECKING:
    from bringup.device.adapter import DeviceAdapter


def adapter_for(device: DeviceRef) -> DeviceAdapter:
    """The adapter serving `device`: a registered one for its type, else the generic eager one."""
    factory = registered(device.type)
    if factory is None:
        return EagerAdapter(device)
    return cast("DeviceAdapter", factory(device))  # a registered factory makes an adapter (iface types it Any)
