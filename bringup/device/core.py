"""`Device` (a resolved torch device) and resolution of a device string.

A Device answers through the adapter of its backend family (bringup/device/adapter.py): the generic
eager one (torch.accelerator, torch.get_device_module, torch.Event: cpu, cuda, xpu, mps, hpu, any
PrivateUse1 backend), PyTorch/XLA's (lazy), or one a plugin registered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import torch

from bringup.compat import drain_autograd_threads_at_exit
from bringup.device.iface import load_family, registered_types
from bringup.device.names import available_accelerator, built_accelerator, privateuse1_name
from bringup.device.peaks import PeakFlops
from bringup.device.select import adapter_for
from bringup.device.timing import produced_tensors
from bringup.errors import BadInput

if TYPE_CHECKING:
    from bringup.device.adapter import DeviceAdapter
    from bringup.device.timing import Timer

# Device types torch.device() knows natively and that can hold tensors as a compute device.
_BUILTIN_TYPES = ("cpu", "cuda", "xpu", "mps", "hpu", "mtia", "maia", "xla", "ipu", "meta")


@dataclass(frozen=True)
class Device:
    """A resolved torch device. Everything that touches a device takes one of these."""

    type: str
    index: int | None = None

    @property
    def name(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __str__(self) -> str:
        return self.name

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.name)

    @property
    def is_cpu(self) -> bool:
        return self.type == "cpu"

    @cached_property
    def adapter(self) -> DeviceAdapter:
        """The adapter of this device's backend family (bringup/device/adapter.py)."""
        return adapter_for(self)

    @property
    def family(self) -> str:
        return self.adapter.family

    @property
    def execution(self) -> str:
        """ "eager" (ops run as issued) or "lazy" (recorded, run on synchronize or a read)."""
        return self.adapter.execution

    @property
    def module(self) -> ModuleType:
        return cast(ModuleType, torch.get_device_module(self.type))

    @property
    def is_accelerator(self) -> bool:
        acc = available_accelerator()
        return acc is not None and acc.type == self.type

    # ---- identity ------------------------------------------------------------------------------
    @cached_property
    def device_name(self) -> str:
        """Human name of the hardware (e.g. 'NVIDIA H100 80GB HBM3', the cpu model)."""
        return self.adapter.hardware_name()

    def count(self) -> int:
        return self.adapter.count()

    # ---- sync and timing -----------------------------------------------------------------------
    def synchronize(self) -> None:
        self.adapter.synchronize()

    def materialize(self, *produced: Any) -> None:
        """Make the device compute (and finish) the tensors in `produced` (tensors, modules, optimizers,
        containers of them): a lazy device runs what it recorded, an async one is waited for."""
        self.adapter.materialize(produced_tensors(produced))

    @property
    def has_timing_events(self) -> bool:
        return self.adapter.has_timing_events

    @property
    def has_inductor_codegen(self) -> bool:
        return self.adapter.has_inductor_codegen

    def timer(self, wall: bool = False) -> Timer:
        """start() ... stop(*what the region produced) -> seconds (bringup/device/timing.py)."""
        return self.adapter.timer(wall=wall)

    # ---- memory --------------------------------------------------------------------------------
    def memory_allocated(self) -> int | None:
        return self.adapter.memory_allocated()

    def reset_peak_memory(self) -> None:
        self.adapter.reset_peak_memory()

    def peak_memory(self) -> int | None:
        """Peak bytes since the last reset (peak RSS of the process on cpu); None if unknown (then
        memory_gap() says why)."""
        return self.adapter.peak_memory()

    def memory_gap(self) -> str | None:
        return self.adapter.memory_gap()

    def empty_cache(self) -> None:
        self.adapter.empty_cache()

    # ---- peak FLOPs ----------------------------------------------------------------------------
    def peak_flops(self, dtype: torch.dtype = torch.bfloat16, calibrate: bool = True) -> PeakFlops | None:
        """Peak FLOP/s of one device: env override, the table, else (and always on cpu) calibrated.
        A run's MFUs use bringup.device.run_peak (once per run, device and dtype)."""
        return self.adapter.peak_flops(dtype, calibrate)

    def calibrate_peak_flops(self, dtype: torch.dtype = torch.float32, seconds: float = 1.0) -> PeakFlops:
        return self.adapter.calibrate_peak_flops(dtype, seconds)

    # ---- what the backend family answers -------------------------------------------------------
    @property
    def default_compile_backend(self) -> str:
        return self.adapter.default_compile_backend

    def distributed_backend(self) -> str | None:
        return self.adapter.distributed_backend()

    def fallback_counts(self) -> dict[str, int] | None:
        return self.adapter.fallback_counts()


# ---- resolution --------------------------------------------------------------------------------
def auto_choice() -> tuple[Device, str]:
    """What `--device auto` resolves to, and a sentence on why (what it picked, and why not another)."""
    built = built_accelerator()
    acc = available_accelerator()
    if acc is not None:
        return Device(acc.type, None), f"the accelerator {acc.type!r} is available"
    if built is not None:
        why = f"torch is built with {built.type!r} but no {built.type} device is available here"
        return Device("cpu", None), why
    return Device("cpu", None), "no accelerator is compiled into this torch build"


def known_types() -> list[str]:
    """Device types that can run cases here: cpu, the available accelerator, a loaded PrivateUse1 backend,
    and families with a registered adapter whose device is present (xla once torch_xla is imported)."""
    names = ["cpu"]
    acc = available_accelerator()
    if acc is not None:
        names.append(acc.type)
    pu1 = privateuse1_name()
    if pu1 != "privateuseone" and pu1 not in names:
        names.append(pu1)
    for t in registered_types():
        if t not in names and Device(t).adapter.available()[0]:
            names.append(t)
    return names


def resolve_device(spec: str | None) -> Device:
    """'auto' | 'cpu' | 'cuda:1' | 'xla' | 'neuron' | any registered PrivateUse1 name -> Device.

    A shipped family's backend package is imported here (`xla`: torch_xla). Raises BadInput (one line)
    for unknown names, a missing backend package, unavailable backends and out-of-range indices.
    """
    spec = (spec or "auto").strip()
    if spec == "auto":
        return auto_choice()[0]
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?::(\d+))?", spec)
    if not m:
        raise BadInput(f"bad device {spec!r}: expected a name like cpu, cuda, cuda:1, xla, neuron")
    dtype, idx = m.group(1), (int(m.group(2)) if m.group(2) is not None else None)
    load_family(dtype)
    pu1 = privateuse1_name()
    if dtype not in _BUILTIN_TYPES and dtype != pu1 and dtype not in registered_types():
        hint = " (a device plugin must be loaded first: --import MODULE)"
        raise BadInput(f"unknown device {spec!r}{hint}; known here: {', '.join(known_types())}")
    if dtype == "meta":
        raise BadInput("device 'meta' holds no data and cannot run cases")
    if dtype == "cpu":
        if idx not in (None, 0):
            raise BadInput(f"bad device {spec!r}: cpu has no index {idx}")
        return Device("cpu", None)
    ok, why = Device(dtype, None).adapter.available()
    if not ok:
        raise BadInput(why)
    dev = Device(dtype, idx)
    if idx is not None and idx >= dev.count():
        raise BadInput(f"device {spec!r} does not exist: {dev.count()} {dtype} device(s) present")
    drain_autograd_threads_at_exit(dtype, idx)  # a backward on it must not abort this process's exit
    return dev
