"""The process-group backend for a device (gloo on cpu, else what torch registered for the device type).

Shared by `bringup train --nproc` (train/distributed.py) and the zoo's FSDP2 full-size cases (zoo/fsdp.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bringup.device import Device


def backend_for(device: Device) -> str:
    import torch.distributed as dist

    if device.is_cpu:
        return "gloo"
    fn = getattr(dist, "get_default_backend_for_device", None)
    if fn is not None:
        try:
            return str(fn(device.type))
        except Exception:
            pass
    return "gloo"  # no registered backend for this device: gloo may still move its tensors, or say why not
