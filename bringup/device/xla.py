"""The xla family: PyTorch/XLA (`torch_xla`), a lazy backend. Importing this module imports torch_xla and
registers the adapter for device type `xla` (`bringup --device xla` does it for you).

Ops on an xla tensor record a graph; `torch_xla.sync()` cuts it, compiles it (cached by its hash) and
runs it, `xm.wait_device_ops()` waits for it. A value nobody holds when the graph is cut is never
computed: the timer hands what a region produced to `materialize`, which syncs while it is held.
What torch's generic hooks cannot answer here, and how this adapter answers it:

    synchronize        torch_xla.sync() + xm.wait_device_ops() (torch_xla registers no torch.xla module)
    memory             xm.get_memory_info (peak_bytes_used); PJRT's CPU client answers UNIMPLEMENTED:
                       a named gap
    fallback counter   torch_xla.debug.metrics: an op run through XLA's CPU fallback counts as
                       "aten::<op>" (a .item() as aten::_local_scalar_dense)
    compile backend    openxla (torch.compile(backend="openxla"))
    distributed        the "xla" process group (torch_xla.distributed.xla_backend; torch_xla 2.9 maps it
                       to the device types "x", "l", "a" in torch's default map, so it is named here)
    compile cache      XLA's persistent compile cache: XLA_PERSISTENT_CACHE_PATH (runtime.initialize_cache)
    profiler           torch.profiler sees the host only (XLA's device trace is torch_xla.debug.profiler)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
import torch_xla  # registers the xla device with torch
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr

from bringup.device.adapter import LAZY, DeviceAdapter, register_adapter
from bringup.device.eager import cpu_model_name


class XlaAdapter(DeviceAdapter):
    family = "xla"
    execution = LAZY
    default_compile_backend = "openxla"

    @property
    def calibration_n(self) -> int:  # type: ignore[override]  # a property where DeviceAdapter has a plain attribute
        return 1024 if self.pjrt_device() == "CPU" else 4096

    @staticmethod
    def pjrt_device() -> str:
        try:
            return str(xr.device_type() or os.environ.get("PJRT_DEVICE", ""))
        except Exception:
            return os.environ.get("PJRT_DEVICE", "")

    def available(self) -> tuple[bool, str]:
        # Asked in the driver too: the PJRT client is not started here (on a TPU host one process owns
        # the chips, and that must be the worker): the runtime's device type is an environment choice.
        kind = self.pjrt_device()
        return bool(kind), "" if kind else "PyTorch/XLA found no PJRT device (set PJRT_DEVICE, e.g. CPU or TPU)"

    def count(self) -> int:
        return int(xr.addressable_device_count())

    def hardware_name(self) -> str:
        kind = self.pjrt_device() or "?"  # (no PJRT client started for a name: see available())
        if kind == "CPU":
            return f"PyTorch/XLA on PJRT CPU ({cpu_model_name()})"
        return f"PyTorch/XLA on PJRT {kind}"

    # ---- sync and timing -----------------------------------------------------------------------
    def start(self) -> None:
        torch_xla.device()  # starts the PJRT client: xla's device count is 0 before (adapter.start)

    def synchronize(self) -> None:
        torch_xla.sync()
        xm.wait_device_ops()

    def materialize(self, tensors: Sequence[torch.Tensor]) -> None:
        # the graph is cut while the caller holds `tensors`: XLA computes every live tensor it recorded
        torch_xla.sync()
        xm.wait_device_ops()

    # ---- memory --------------------------------------------------------------------------------
    def _info(self) -> tuple[dict[str, Any] | None, str]:
        try:
            return dict(xm.get_memory_info(self.device.torch_device)), ""
        except Exception as e:
            why = f"{e}".splitlines()[0][:200]
            return None, f"xm.get_memory_info on PJRT {self.pjrt_device()}: {why}"

    def memory_allocated(self) -> int | None:
        info, _ = self._info()
        v = info.get("bytes_used") if info else None
        return int(v) if v is not None else None

    def peak_memory(self) -> int | None:
        """XLA's allocator peak since the process started (PyTorch/XLA has no reset)."""
        info, _ = self._info()
        v = info.get("peak_bytes_used") if info else None
        return int(v) if v is not None else None

    def memory_gap(self) -> str | None:
        info, why = self._info()
        if info is None:
            return why
        return None if info.get("peak_bytes_used") is not None else "xm.get_memory_info has no peak_bytes_used"

    # ---- the rest ------------------------------------------------------------------------------
    def fallback_counts(self) -> dict[str, int] | None:
        out: dict[str, int] = {}
        for name in met.counter_names():
            if name.startswith("aten::"):
                v = met.counter_value(name)
                if v:
                    out[name] = int(v)
        return out

    @property
    def has_inductor_codegen(self) -> bool:
        return False  # inductor generates no XLA code: openxla is the compile backend

    def distributed_backend(self) -> str | None:
        try:
            import torch_xla.distributed.xla_backend  # noqa: F401  (registers the "xla" process group)
        except Exception:
            return None
        return "xla"

    def profiler_activities(self) -> tuple[list[Any], str]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU], (
            "PyTorch/XLA's device trace is torch_xla.debug.profiler (a trace server), "
            "not torch.profiler: host events only"
        )

    def eager_switch(self) -> tuple[str, Callable[[], AbstractContextManager[Any]]] | None:
        try:
            from torch_xla.experimental import eager_mode, is_eager_mode
        except ImportError:
            return None

        @contextlib.contextmanager
        def on() -> Iterator[None]:
            before = is_eager_mode()
            eager_mode(True)
            try:
                yield
            finally:
                eager_mode(before)

        return "torch_xla.experimental.eager_mode(True)", on

    def compile_cache_counts(self) -> tuple[str, dict[str, int]] | None:
        names = {
            "hit": "PersistentCacheHit",
            "miss": "PersistentCacheMiss",
            "failed": "PersistentCacheDeserializeFailure",
        }
        return "XLA's persistent compile cache", {k: int(met.counter_value(v) or 0) for k, v in names.items()}

    def compile_cache_env(self, root: Path) -> dict[str, str]:
        # what torch_xla.runtime.initialize_cache(path) sets; read when the runtime compiles first
        return {"XLA_PERSISTENT_CACHE_PATH": str(root / "xla"), "XLA_PERSISTENT_CACHE_READ_ONLY": "0"}


register_adapter("xla", XlaAdapter)
