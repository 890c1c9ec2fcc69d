"""A device adapter for a backend family bringup does not ship, in plain Python: Intel Gaudi (`hpu`) in
its lazy mode, where ops are recorded until `mark_step()` cuts and runs the graph (as on PyTorch/XLA).

    bringup --import device_adapter --device hpu run --quick      (this file on PYTHONPATH)

What an adapter is and what each method answers: docs/devices.md. Everything bringup times, reads or
compares on the device goes through these methods, so a lazy backend gets honest step times (the
timer hands what a step produced to `materialize` before its clock stops), and its own fallback
counter, compile and distributed backends are used where bringup would otherwise guess.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from bringup.device import LAZY, EagerAdapter, register_adapter


def _mark_step() -> None:
    import habana_frameworks.torch.core as htcore  # Gaudi's PyTorch bridge: imported when first needed

    htcore.mark_step()


class GaudiLazyAdapter(EagerAdapter):
    """torch.hpu answers the generic questions (device count, name, memory, events); what lazy mode
    changes is overridden here."""

    family = "hpu-lazy"
    execution = LAZY
    default_compile_backend = "hpu_backend"

    def synchronize(self) -> None:
        _mark_step()  # cut and run the recorded graph ...
        super().synchronize()  # ... and wait for it (torch.hpu.synchronize)

    def materialize(self, tensors: Sequence[torch.Tensor]) -> None:
        self.synchronize()  # the caller holds `tensors`: they are alive when the graph is cut, so computed

    def distributed_backend(self) -> str | None:
        return "hccl"


register_adapter("hpu", GaudiLazyAdapter)
