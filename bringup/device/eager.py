"""The eager family: every device torch knows through its generic hooks (`torch.accelerator`,
`torch.get_device_module(type)`, `torch.Event`): cpu, cuda, xpu, mps, hpu's eager mode and any
PrivateUse1 backend (neuron, the test device). Ops run as they are issued, maybe asynchronously: a
synchronize waits for them, and timing events (where the backend records them) time the device.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from functools import cached_property
from types import ModuleType
from typing import Any, cast

import torch

from bringup.device.adapter import EAGER, DeviceAdapter
from bringup.device.names import available_accelerator, privateuse1_name


class EagerAdapter(DeviceAdapter):
    family = "eager"
    execution = EAGER

    @property
    def module(self) -> ModuleType:
        return cast(ModuleType, torch.get_device_module(self.device.type))

    @property
    def is_accelerator(self) -> bool:
        acc = available_accelerator()
        return acc is not None and acc.type == self.device.type

    @property
    def calibration_n(self) -> int:  # type: ignore[override]  # a property where DeviceAdapter has a plain attribute
        return 1024 if self.device.is_cpu else 4096

    def _idx(self) -> int:
        if self.device.index is not None:
            return self.device.index
        fn = getattr(self.module, "current_device", None)
        try:
            return int(fn()) if fn else 0
        except Exception:
            return 0

    # ---- identity ------------------------------------------------------------------------------
    def available(self) -> tuple[bool, str]:
        if self.device.is_cpu:
            return True, ""
        try:
            mod = torch.get_device_module(self.device.type)
        except Exception:
            mod = None
        avail = getattr(mod, "is_available", None)
        try:
            ok = bool(avail()) if avail is not None else mod is not None
        except Exception:
            ok = False
        why = f"device {self.device.type!r} is not available on this machine (torch {torch.__version__})"
        return ok, "" if ok else why

    def hardware_name(self) -> str:
        if self.device.is_cpu:
            return cpu_model_name()
        fn = getattr(self.module, "get_device_name", None)
        if fn is not None:
            try:
                return str(fn(self._idx()))
            except Exception:
                pass
        return self.device.type

    def count(self) -> int:
        if self.device.is_cpu:
            return 1
        fn = getattr(self.module, "device_count", None)
        try:
            return int(fn()) if fn else 1
        except Exception:
            return 0

    # ---- sync and timing -----------------------------------------------------------------------
    def synchronize(self) -> None:
        if self.device.is_cpu:
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
        if self.device.is_cpu:
            return False
        try:
            a = torch.Event(self.device.torch_device, enable_timing=True)
            b = torch.Event(self.device.torch_device, enable_timing=True)
            a.record()
            b.record()
            b.synchronize()
            a.elapsed_time(b)
            return True
        except Exception:
            return False

    # ---- memory --------------------------------------------------------------------------------
    def _mem_fn(self, name: str) -> Callable[..., Any] | None:
        if self.is_accelerator:
            mem = getattr(torch.accelerator, "memory", None)
            fn: Callable[..., Any] | None = getattr(mem, name, None) or getattr(torch.accelerator, name, None)
            if fn is not None:
                return fn
        return cast("Callable[..., Any] | None", getattr(self.module, name, None))

    def memory_allocated(self) -> int | None:
        """Bytes allocated now (process RSS on cpu); None when the backend can't say."""
        if self.device.is_cpu:
            return _rss_bytes()
        fn = self._mem_fn("memory_allocated")
        try:
            return int(fn(self._idx())) if fn else None
        except Exception:
            return None

    def reset_peak_memory(self) -> None:
        if self.device.is_cpu:
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
        if self.device.is_cpu:
            return _peak_rss_bytes()
        fn = self._mem_fn("max_memory_allocated")
        try:
            return int(fn(self._idx())) if fn else None
        except Exception:
            return None

    def memory_gap(self) -> str | None:
        if self.device.is_cpu:
            return None if _peak_rss_bytes() is not None else "no /proc/self/status VmHWM nor getrusage here"
        fn = self._mem_fn("max_memory_allocated")
        if fn is None:
            return (
                f"neither torch.accelerator (not the available accelerator) nor torch.{self.device.type} "
                "has max_memory_allocated"
            )
        try:
            fn(self._idx())
        except Exception as e:
            return f"max_memory_allocated raised {type(e).__name__}: {e}".splitlines()[0][:200]
        return None

    def empty_cache(self) -> None:
        if self.device.is_cpu:
            return
        fn = self._mem_fn("empty_cache")
        try:
            if fn:
                fn()
        except Exception:
            pass

    # ---- the rest ------------------------------------------------------------------------------
    def fallback_counts(self) -> dict[str, int] | None:
        """A PrivateUse1 backend whose device module exposes `fallback_counts()` (the test device does)
        counts its own CPU fallbacks; others keep no such counter."""
        if self.device.is_cpu:
            return None
        fn = getattr(self.module, "fallback_counts", None) if self._has_module() else None
        try:
            return {str(k): int(v) for k, v in fn().items()} if fn is not None else None
        except Exception:
            return None

    def _has_module(self) -> bool:
        try:
            torch.get_device_module(self.device.type)
            return True
        except Exception:
            return False

    def profiler_activities(self) -> tuple[list[Any], str]:
        import torch.profiler as tp
        from torch.profiler import ProfilerActivity

        acts = [ProfilerActivity.CPU]
        if self.device.is_cpu:
            return acts, ""
        name = {"cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA", "hpu": "HPU"}.get(self.device.type)

        if name is None and self.device.type == privateuse1_name():
            name = "PrivateUse1"
        act = getattr(ProfilerActivity, name, None) if name else None
        if act is None:
            return acts, f"torch.profiler has no activity for {self.device.type!r}: host events only"
        if act not in set(tp.supported_activities()):  # type: ignore[no-untyped-call]  # torch leaves it unannotated
            return acts, f"this torch build does not support ProfilerActivity.{name}: host events only"
        return [*acts, act], ""


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
