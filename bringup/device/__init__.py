"""The device layer: resolve a device string, synchronize, time regions honestly, read memory (or name
why not), know peak FLOP/s, count the backend's fallbacks: one adapter per backend family.

    core.py     Device, resolve_device, auto_choice, dtype names
    iface.py    what a Device and its adapter share (DeviceRef, Clock) and the adapter registry
    adapter.py  DeviceAdapter (the adapters' base: generic answers; register_adapter named here too)
    eager.py    the eager family: torch.accelerator / get_device_module / torch.Event
    xla.py      PyTorch/XLA (lazy); imported when `--device xla` is asked for
    timing.py   Timer (stop() materializes what the region produced), the calibration GEMM
    peaks.py    the peak FLOP/s table, BRINGUP_PEAK_FLOPS, the run's one calibrated peak
"""

from __future__ import annotations

from bringup.device.adapter import (
    EAGER,
    LAZY,
    DeviceAdapter,
    register_adapter,
    registered_types,
    unregister_adapter,
)
from bringup.device.core import Device, auto_choice, known_types, resolve_device
from bringup.device.eager import EagerAdapter, cpu_model_name
from bringup.device.names import available_accelerator, built_accelerator, dtype_name, parse_dtype, privateuse1_name
from bringup.device.peaks import PEAK_TABLE, PeakFlops, PeakRow, read_run_peaks, run_peak, table_peak
from bringup.device.select import adapter_for
from bringup.device.timing import NOTHING_PRODUCED, Timer, produced_tensors

__all__ = [
    "EAGER", "LAZY", "NOTHING_PRODUCED", "PEAK_TABLE", "Device", "DeviceAdapter", "EagerAdapter", "PeakFlops",
    "PeakRow", "Timer", "adapter_for", "auto_choice", "available_accelerator", "built_accelerator",
    "cpu_model_name", "dtype_name", "known_types", "parse_dtype", "privateuse1_name", "produced_tensors",
    "read_run_peaks", "register_adapter", "registered_types", "resolve_device", "run_peak", "table_peak",
    "unregister_adapter",
]  # fmt: skip
