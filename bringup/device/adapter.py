"""One adapter per backend family, behind one interface, chosen by device type.

Everything above the device layer asks a `Device`, which asks its adapter (found in the registry of
iface.py, the one small interface a Device and its adapters share; an adapter sees its Device as an
iface.DeviceRef): how to synchronize, how to
time a region (and make the device compute what the region produced), memory (a figure, or the reason
there is none), peak FLOP/s, the backend's own fallback counter, the compile and distributed backends
to use by default, the profiler's activities and the execution model (eager or lazy).

Shipped families: `eager` (bringup/device/eager.py: what torch knows through torch.accelerator,
torch.get_device_module and torch.Event: cpu, cuda, xpu, mps, hpu's eager mode, any PrivateUse1
backend) and `xla` (bringup/device/xla.py: PyTorch/XLA, lazy). A plugin imported with `--import`
registers an adapter for a family we don't ship:

    from bringup.device import EagerAdapter, register_adapter

    class MyLazyAdapter(EagerAdapter):
        family, execution = "mylazy", "lazy"
        def synchronize(self) -> None: my_backend.mark_step(); my_backend.wait()

    register_adapter("mydev", MyLazyAdapter)

(docs/devices.md; a complete example: docs/examples/device_adapter.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from bringup.device.iface import SHIPPED, DeviceRef, load_family, register_adapter, registered_types, unregister_adapter
from bringup.device.peaks import PeakFlops, env_peak, table_peak
from bringup.device.timing import Timer, calibrate_gemm

EAGER, LAZY = "eager", "lazy"


class DeviceAdapter:
    """The interface (and the generic answers where there is one). Subclasses override what differs."""

    family: str = "generic"
    execution: str = EAGER  # EAGER: ops run as issued (maybe asynchronously); LAZY: recorded, run on sync
    default_compile_backend: str = "inductor"
    calibration_n: int = 4096  # side of the calibration GEMM

    def __init__(self, device: DeviceRef) -> None:
        self.device = device

    # ---- identity and presence ---------------------------------------------------------------------
    def available(self) -> tuple[bool, str]:
        """(usable here, why not)."""
        return True, ""

    def count(self) -> int:
        return 1

    def hardware_name(self) -> str:
        return self.device.type

    def start(self) -> None:
        """Start the device's runtime in the process that runs cases, before any case work. torch's
        autograd engine sizes its per-device queues once, at the first backward of the process, from the
        device counts it sees then: a runtime that reports its devices only once started (PJRT) and a
        float64 cpu reference run first would leave the device with no queue (an INTERNAL ASSERT in
        engine.cpp at the device's first backward). Called by the worker, never by the driver (on a TPU
        host one process owns the chips, and that must be the worker)."""

    # ---- synchronize, materialize, time ------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait until everything issued so far has run (a lazy device: run what it recorded)."""

    def materialize(self, tensors: Sequence[torch.Tensor]) -> None:
        """Make the device compute `tensors` (held by the caller, so alive) and wait for them."""
        self.synchronize()

    @property
    def has_timing_events(self) -> bool:
        return False

    def timer(self, wall: bool = False) -> Timer:
        return Timer(self, wall=wall)

    # ---- memory --------------------------------------------------------------------------------------
    def memory_allocated(self) -> int | None:
        return None

    def peak_memory(self) -> int | None:
        return None

    def reset_peak_memory(self) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def memory_gap(self) -> str | None:
        """Why peak_memory() is None here (None when it has a figure)."""
        return None if self.peak_memory() is not None else f"the {self.family} adapter reads no memory statistics"

    # ---- peak FLOP/s ---------------------------------------------------------------------------------
    def peak_flops(self, dtype: torch.dtype = torch.bfloat16, calibrate: bool = True) -> PeakFlops | None:
        """Peak FLOP/s of one device: env override, the vendor table, else calibrated."""
        if (pk := env_peak()) is not None:
            return pk
        if not self.device.is_cpu:
            row = table_peak(self.hardware_name(), dtype)
            if row is not None:
                flops = row.bf16 if dtype in (torch.bfloat16, torch.float16) else row.fp32
                return PeakFlops(float(flops or 0), f"table: {row.pattern} ({row.source})", row.unit)
        return self.calibrate_peak_flops(dtype) if calibrate else None

    def calibrate_peak_flops(self, dtype: torch.dtype = torch.float32, seconds: float = 1.0) -> PeakFlops:
        return calibrate_gemm(self, dtype, seconds)

    # ---- fallbacks, compile, distributed, profiler -------------------------------------------------
    def fallback_counts(self) -> dict[str, int] | None:
        """The backend's own cumulative count of ops it ran through its CPU fallback, by op name
        (None: it keeps none). Callers take differences around a window."""
        return None

    @cached_property
    def has_inductor_codegen(self) -> bool:
        """Whether inductor has a code generator registered for this device type
        (register_backend_for_device); True when torch can't tell, so no gap is reported blindly."""
        try:
            from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration

            init_backend_registration()
            return get_scheduling_for_device(self.device.type) is not None
        except Exception:
            return True

    def distributed_backend(self) -> str | None:
        """The torch.distributed backend for this device type (None: none registered)."""
        try:
            import torch.distributed as dist

            return dist.Backend.default_device_backend_map.get(self.device.type) if dist.is_available() else None
        except Exception:
            return None

    def profiler_activities(self) -> tuple[list[Any], str]:
        """torch.profiler activities for this device and a note on what is missing."""
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU], f"no profiler activity for {self.device.type!r}: host events only"

    def eager_switch(self) -> tuple[str, Callable[[], AbstractContextManager[Any]]] | None:
        """A lazy backend's opt-in eager mode: (its name, a context manager turning it on), or None."""
        return None

    def compile_cache_env(self, root: Path) -> dict[str, str]:
        """Environment that points the backend's own persistent compile cache under `root` (train's
        cold / warm arms); {} when it has none beyond torch's (inductor's) caches."""
        return {}

    def compile_cache_counts(self) -> tuple[str, dict[str, int]] | None:
        """The backend's own persistent compile cache in this process: (its name, {"hit", "miss",
        "failed"} lookups), or None when it has none."""
        return None

    def describe(self) -> dict[str, Any]:
        """What `bringup devices` and the run's info show about the adapter."""
        return {
            "family": self.family,
            "execution": self.execution,
            "timing": "torch.Event" if self.has_timing_events else "perf_counter after synchronize",
            "default_compile_backend": self.default_compile_backend,
            "distributed_backend": self.distributed_backend(),
            "memory_gap": self.memory_gap(),
            "fallback_counter": self.fallback_counts() is not None,
        }


# ---- the registry: in iface.py (what a Device and its adapter share), named here too ----------------
__all__ = [
    "EAGER", "LAZY", "SHIPPED", "DeviceAdapter", "env_flag", "load_family", "register_adapter", "registered_types",
    "unregister_adapter",
]  # fmt: skip


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
