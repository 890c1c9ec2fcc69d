"""The device layer: resolve a device string, synchronize, time steps, read memory, know peak FLOPs.

Everything device-specific goes through `torch.accelerator`, `torch.get_device_module(type)` and
`torch.Event`, so this works for cpu, cuda, xpu, mps, hpu and any PrivateUse1 backend (neuron, ...).
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import Any

import torch

from bringup.errors import BadInput

# Device types torch.device() knows natively and that can hold tensors as a compute device.
_BUILTIN_TYPES = ("cpu", "cuda", "xpu", "mps", "hpu", "mtia", "maia", "xla", "ipu", "meta")


def privateuse1_name() -> str:
    return torch._C._get_privateuse1_backend_name()


@dataclass(frozen=True)
class PeakFlops:
    flops: float  # FLOP/s of ONE device (what one torch device index is; see `unit`)
    source: str  # "table: <row> (<where the number comes from>)" or "calibrated: <how>"
    unit: str = "device"

    @property
    def calibrated(self) -> bool:
        return self.source.startswith("calibrated")


# Dense (no sparsity) peak FLOP/s by device-name pattern. bf16 also serves fp16 (same tensor-core
# rate on every row here). fp32 is given only where vendors publish a non-tensor-core figure, since
# torch's default float32 matmul precision ("highest") doesn't use TF32; missing -> calibrated.
# `unit` says what one torch device is on that hardware.
@dataclass(frozen=True)
class PeakRow:
    pattern: str  # regex matched (case-insensitive) against the device name
    bf16: float | None
    fp32: float | None
    unit: str
    source: str


PEAK_TABLE: tuple[PeakRow, ...] = (
    # TorchTitan torchtitan/tools/utils.py get_peak_flops; nvidia.com/en-us/data-center/a100
    PeakRow(r"A100", 312e12, 19.5e12, "GPU", "TorchTitan get_peak_flops; NVIDIA A100 datasheet"),
    # TorchTitan; NVIDIA H100 datasheet (NVL / PCIe / SXM rows, dense)
    PeakRow(r"H100.*NVL", 835e12, 60e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H100 datasheet"),
    PeakRow(r"H100.*PCIe", 756e12, 51e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H100 datasheet"),
    PeakRow(r"H100", 989e12, 67e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H100 SXM datasheet"),
    # TorchTitan; nvidia.com/en-us/data-center/h200 (same SM complex as H100 SXM)
    PeakRow(r"H200", 989e12, 67e12, "GPU", "TorchTitan get_peak_flops; NVIDIA H200 datasheet"),
    # TorchTitan; NVIDIA Blackwell datasheet (B200, dense bf16)
    PeakRow(r"B200", 2.25e15, None, "GPU", "TorchTitan get_peak_flops; NVIDIA Blackwell datasheet"),
    # TorchTitan; amd.com MI300X / MI325X product pages
    PeakRow(r"MI300X|MI325X", 1300e12, 163.4e12, "GPU", "TorchTitan get_peak_flops; AMD MI300X page"),
    # AMD MI355X product page: 2.5 PFLOP/s bf16 dense
    PeakRow(r"MI355X", 2500e12, 157.3e12, "GPU", "AMD Instinct MI355X product page"),
    # TorchTitan; per GCD (one torch device = one GCD)
    PeakRow(r"MI250X", 191.5e12, None, "GCD", "TorchTitan get_peak_flops; AMD MI250X page"),
    # TorchTitan: 512 ops x 1300 MHz x 512 compute units (full EU mode)
    PeakRow(r"Data Center GPU Max 1550", 340.8e12, None, "tile", "TorchTitan get_peak_flops (PVC)"),
    # TorchTitan; NVIDIA L40S datasheet
    PeakRow(r"L40S", 362e12, 91.6e12, "GPU", "TorchTitan get_peak_flops; NVIDIA L40S datasheet"),
    # AWS Trainium2: 667 TFLOP/s bf16 dense per chip (aws.amazon.com/ai/machine-learning/trainium,
    # Trn2 instance = 16 chips, 10.7 PFLOP/s bf16 dense). The seeds' 14,156 tok/s at 30.47% MFU on
    # 16 chips implies ~630-710 TFLOP/s per chip, consistent. One torch "neuron" device may be a
    # logical NeuronCore, not a chip: set BRINGUP_PEAK_FLOPS for per-core MFU.
    PeakRow(r"Trainium2|trn2", 667e12, 181e12, "chip", "AWS Trainium2 product page, per chip"),
    # AWS Trainium3 (re:Invent 2025) publishes 2.52 PFLOP/s FP8 dense per chip and no bf16/fp32 dense
    # figure we could source: the row exists so the name is recognised, and bf16/fp32 are calibrated.
    PeakRow(r"Trainium3|trn3", None, None, "chip", "AWS Trainium3 announcement: FP8 only"),
)


def table_peak(device_name: str, dtype: torch.dtype) -> PeakRow | None:
    for row in PEAK_TABLE:
        if re.search(row.pattern, device_name, re.IGNORECASE):
            flops = row.bf16 if dtype in (torch.bfloat16, torch.float16) else row.fp32
            return row if flops and dtype in (torch.bfloat16, torch.float16, torch.float32) else None
    return None


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

    @property
    def module(self) -> ModuleType:
        return torch.get_device_module(self.type)

    @property
    def is_accelerator(self) -> bool:
        acc = available_accelerator()
        return acc is not None and acc.type == self.type

    def _idx(self) -> int:
        if self.index is not None:
            return self.index
        fn = getattr(self.module, "current_device", None)
        try:
            return int(fn()) if fn else 0
        except Exception:
            return 0

    # ---- identity ------------------------------------------------------------------------------
    @cached_property
    def device_name(self) -> str:
        """Human name of the hardware (e.g. 'NVIDIA H100 80GB HBM3', the cpu model)."""
        if self.is_cpu:
            return cpu_model_name()
        fn = getattr(self.module, "get_device_name", None)
        if fn is not None:
            try:
                return str(fn(self._idx()))
            except Exception:
                pass
        return self.type

    def count(self) -> int:
        if self.is_cpu:
            return 1
        fn = getattr(self.module, "device_count", None)
        try:
            return int(fn()) if fn else 1
        except Exception:
            return 0

    # ---- sync and timing -----------------------------------------------------------------------
    def synchronize(self) -> None:
        if self.is_cpu:
            return
        if self.is_accelerator:
            torch.accelerator.synchronize(self._idx())
            return
        fn = getattr(self.module, "synchronize", None)
        if fn is not None:
            fn()

    @cached_property
    def has_timing_events(self) -> bool:
        """True when the backend records timing events (cpu does not: 'backend doesn't support events')."""
        if self.is_cpu:
            return False
        try:
            a = torch.Event(self.torch_device, enable_timing=True)
            b = torch.Event(self.torch_device, enable_timing=True)
            a.record()
            b.record()
            b.synchronize()
            a.elapsed_time(b)
            return True
        except Exception:
            return False

    @cached_property
    def has_inductor_codegen(self) -> bool:
        """Whether inductor has a code generator registered for this device type
        (register_backend_for_device); True when torch can't tell, so no gap is reported blindly."""
        try:
            from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration

            init_backend_registration()
            return get_scheduling_for_device(self.type) is not None
        except Exception:
            return True

    def timer(self) -> StepTimer:
        return StepTimer(self)

    # ---- memory --------------------------------------------------------------------------------
    def _mem_fn(self, name: str) -> Callable[..., Any] | None:
        if self.is_accelerator:
            mem = getattr(torch.accelerator, "memory", None)
            fn = getattr(mem, name, None) or getattr(torch.accelerator, name, None)
            if fn is not None:
                return fn
        return getattr(self.module, name, None)

    def memory_allocated(self) -> int | None:
        """Bytes allocated now (process RSS on cpu); None when the backend can't say."""
        if self.is_cpu:
            return _rss_bytes()
        fn = self._mem_fn("memory_allocated")
        try:
            return int(fn(self._idx())) if fn else None
        except Exception:
            return None

    def reset_peak_memory(self) -> None:
        if self.is_cpu:
            _reset_peak_rss()
            return
        fn = self._mem_fn("reset_peak_memory_stats")
        try:
            if fn:
                fn(self._idx())
        except Exception:
            pass

    def peak_memory(self) -> int | None:
        """Peak bytes since the last reset (peak RSS of the process on cpu); None if unknown."""
        if self.is_cpu:
            return _peak_rss_bytes()
        fn = self._mem_fn("max_memory_allocated")
        try:
            return int(fn(self._idx())) if fn else None
        except Exception:
            return None

    def empty_cache(self) -> None:
        if self.is_cpu:
            return
        fn = self._mem_fn("empty_cache")
        try:
            if fn:
                fn()
        except Exception:
            pass

    # ---- peak FLOPs ----------------------------------------------------------------------------
    def peak_flops(self, dtype: torch.dtype = torch.bfloat16, calibrate: bool = True) -> PeakFlops | None:
        """Peak FLOP/s of one device: env override, the table, else (and always on cpu) calibrated."""
        env = os.environ.get("BRINGUP_PEAK_FLOPS")
        if env:
            try:
                return PeakFlops(float(env), "BRINGUP_PEAK_FLOPS environment override")
            except ValueError as e:
                raise BadInput(f"BRINGUP_PEAK_FLOPS must be a number, got {env!r}") from e
        if not self.is_cpu:
            row = table_peak(self.device_name, dtype)
            if row is not None:
                flops = row.bf16 if dtype in (torch.bfloat16, torch.float16) else row.fp32
                return PeakFlops(float(flops or 0), f"table: {row.pattern} ({row.source})", row.unit)
        return self.calibrate_peak_flops(dtype) if calibrate else None

    def calibrate_peak_flops(self, dtype: torch.dtype = torch.float32, seconds: float = 1.0) -> PeakFlops:
        """Measure a large square GEMM; the median of several timed repeats, in FLOP/s."""
        n = 1024 if self.is_cpu else 4096
        a = torch.randn(n, n, device=self.torch_device).to(dtype)
        b = torch.randn(n, n, device=self.torch_device).to(dtype)
        for _ in range(2):  # warm up (first call may pick kernels / allocate)
            torch.mm(a, b)
        self.synchronize()
        times: list[float] = []
        deadline = time.perf_counter() + seconds
        timer = self.timer()
        while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 50):
            timer.start()
            torch.mm(a, b)
            times.append(timer.stop())
        flops = 2.0 * n**3 / statistics.median(times)
        what = f"calibrated: median of {len(times)} x {n}x{n} {str(dtype).removeprefix('torch.')} GEMM"
        return PeakFlops(flops, what, "device")


class StepTimer:
    """start()/stop() -> seconds. torch.Event timing where the backend has it, else perf_counter
    after a device synchronize (which is exact on cpu and correct, if coarser, elsewhere)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.events = device.has_timing_events
        self._t0 = 0.0
        self._e0: Any = None

    def start(self) -> None:
        if self.events:
            self._e0 = torch.Event(self.device.torch_device, enable_timing=True)
            self._e0.record()
        else:
            self.device.synchronize()
            self._t0 = time.perf_counter()

    def stop(self) -> float:
        if self.events:
            e1 = torch.Event(self.device.torch_device, enable_timing=True)
            e1.record()
            e1.synchronize()
            return float(self._e0.elapsed_time(e1)) / 1000.0
        self.device.synchronize()
        return time.perf_counter() - self._t0


# ---- cpu helpers -------------------------------------------------------------------------------
def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _proc_status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _rss_bytes() -> int | None:
    v = _proc_status_kb("VmRSS")
    if v is not None:
        return v
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def _reset_peak_rss() -> None:
    # Linux >= 4.0: writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_bytes() -> int | None:
    v = _proc_status_kb("VmHWM")
    if v is not None:
        return v
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except Exception:
        return None


# ---- resolution --------------------------------------------------------------------------------
def built_accelerator() -> torch.device | None:
    """The accelerator this torch build was compiled for (or a loaded plugin registered), present or not.

    A CUDA build of torch names `cuda` here even on a machine with no GPU: never pick a device from this.
    """
    return torch.accelerator.current_accelerator()  # auto-ok: the compile-time answer, on purpose


def available_accelerator() -> torch.device | None:
    """The accelerator that is really there: compiled in AND reporting a device at run time."""
    return torch.accelerator.current_accelerator(check_available=True)


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
    """Device types that can run cases here: cpu, the available accelerator, a loaded PrivateUse1 backend."""
    names = ["cpu"]
    acc = available_accelerator()
    if acc is not None:
        names.append(acc.type)
    pu1 = privateuse1_name()
    if pu1 != "privateuseone" and pu1 not in names:
        names.append(pu1)
    return names


def resolve_device(spec: str | None) -> Device:
    """'auto' | 'cpu' | 'cuda:1' | 'neuron' | any registered PrivateUse1 name -> Device.

    Raises BadInput (one line) for unknown names, unavailable backends and out-of-range indices.
    """
    spec = (spec or "auto").strip()
    if spec == "auto":
        return auto_choice()[0]
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?::(\d+))?", spec)
    if not m:
        raise BadInput(f"bad device {spec!r}: expected a name like cpu, cuda, cuda:1, neuron")
    dtype, idx = m.group(1), (int(m.group(2)) if m.group(2) is not None else None)
    pu1 = privateuse1_name()
    if dtype not in _BUILTIN_TYPES and dtype != pu1:
        hint = " (a device plugin must be loaded first: --import MODULE)"
        raise BadInput(f"unknown device {spec!r}{hint}; known here: {', '.join(known_types())}")
    if dtype == "meta":
        raise BadInput("device 'meta' holds no data and cannot run cases")
    if dtype == "cpu":
        if idx not in (None, 0):
            raise BadInput(f"bad device {spec!r}: cpu has no index {idx}")
        return Device("cpu", None)
    try:
        mod = torch.get_device_module(dtype)
    except Exception:
        mod = None
    avail = getattr(mod, "is_available", None)
    try:
        ok = bool(avail()) if avail is not None else mod is not None
    except Exception:
        ok = False
    if not ok:
        raise BadInput(f"device {dtype!r} is not available on this machine (torch {torch.__version__})")
    dev = Device(dtype, idx)
    if idx is not None and idx >= dev.count():
        raise BadInput(f"device {spec!r} does not exist: {dev.count()} {dtype} device(s) present")
    return dev


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
