"""Timed regions that cannot be fooled by a lazy or asynchronous device.

A lazy device (PyTorch/XLA, the test device's lazy mode) computes nothing until a value is needed, and a
value nobody reads is never computed; an asynchronous one (cuda, xpu) returns before the work is done.
So the timer's `stop()` takes what the timed region produced (the step's loss and the module its
optimizer updated; the GEMM's result) and has the device materialize it before the clock stops: the
work is in the measurement by construction, whatever the device. `stop()` with nothing to materialize
is a TypeError, not a zero.

    timer = device.timer()          # torch.Event where the backend records them, else perf_counter
    timer.start()
    loss = step()
    seconds = timer.stop(loss, model)

`Timer(adapter, wall=True)` is always the wall clock (a first step that holds a compile).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from bringup.device.peaks import PeakFlops

if TYPE_CHECKING:
    from bringup.device.iface import Clock

NOTHING_PRODUCED = (
    "Timer.stop() needs what the timed region produced (tensors, a module, an optimizer): a lazy device "
    "never computes a value nobody reads, and an async one has not finished it"
)


def produced_tensors(values: Iterable[Any]) -> list[torch.Tensor]:
    """The tensors in `values`: tensors, (nested) lists / tuples / dicts of them, a module's parameters
    and buffers (and their grads), an optimizer's state."""
    out: list[torch.Tensor] = []
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, torch.nn.Module):
            params = list(v.parameters())
            stack.extend(params)
            stack.extend(p.grad for p in params if p.grad is not None)
            stack.extend(v.buffers())
        elif isinstance(v, torch.optim.Optimizer):
            stack.extend(v.state.values())
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return out


class Timer:
    """start() ... stop(*produced) -> seconds (see the module doc)."""

    def __init__(self, adapter: Clock, wall: bool = False) -> None:
        self.adapter = adapter
        self.events = not wall and adapter.has_timing_events
        self._t0 = 0.0
        self._e0: Any = None

    def start(self) -> None:
        if self.events:  # the device's clock: work queued before this is not counted
            self._e0 = torch.Event(self.adapter.device.torch_device, enable_timing=True)
            self._e0.record()
        else:  # the host's clock, once earlier work has drained
            self.adapter.synchronize()
            self._t0 = time.perf_counter()

    def stop(self, *produced: Any) -> float:
        tensors = produced_tensors(produced)
        if not tensors:
            raise TypeError(NOTHING_PRODUCED)
        self.adapter.materialize(tensors)  # held here: alive when the device runs what it queued
        if self.events:
            e1 = torch.Event(self.adapter.device.torch_device, enable_timing=True)
            e1.record()
            e1.synchronize()
            return float(self._e0.elapsed_time(e1)) / 1000.0
        return time.perf_counter() - self._t0

    def time(self, fn: Any) -> tuple[float, Any]:
        """(seconds, fn()) with fn's result materialized inside the timed region."""
        self.start()
        out = fn()
        return self.stop(out), out


# The calibration GEMM: big enough to be compute-bound where it runs, small enough for a second.
CALIBRATION_N = {"cpu": 1024}
CALIBRATION_N_DEFAULT = 4096


def calibrate_gemm(
    adapter: Clock, dtype: torch.dtype = torch.float32, seconds: float = 1.0, n: int | None = None
) -> PeakFlops:
    """Measure a large square GEMM: the fastest of several timed repeats, in FLOP/s (a peak: on a shared
    machine other work only ever slows a repeat down, so the median would be the neighbours' figure).
    Each repeat's result is handed to the timer (materialized before its clock stops); the last is read."""
    dev = adapter.device.torch_device
    n = n or adapter.calibration_n
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    adapter.materialize([a, b])
    timer = Timer(adapter)
    for _ in range(2):  # warm up: the first call may compile (lazy devices), pick kernels, allocate
        timer.start()
        timer.stop(torch.mm(a, b))
    times: list[float] = []
    c: torch.Tensor | None = None
    deadline = time.perf_counter() + seconds
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 50):
        timer.start()
        c = torch.mm(a, b)
        times.append(timer.stop(c))
    assert c is not None
    check = float(c[0, :8].float().sum().cpu())  # the result read back: it exists, and is a number
    if check != check:
        raise RuntimeError(f"the calibration GEMM on {adapter.device} gave NaN")
    flops = 2.0 * n**3 / min(times)
    what = f"calibrated: fastest of {len(times)} x {n}x{n} {str(dtype).removeprefix('torch.')} GEMM"
    return PeakFlops(flops, what, "device")


def timed_repeats(fn: Any, timer: Timer, min_iters: int = 3, max_iters: int = 20, max_s: float = 2.0) -> list[float]:
    """Time `fn()` at least min_iters times (up to max_iters, within max_s): each call's result is
    materialized inside its timed region."""
    times: list[float] = []
    t_end = time.perf_counter() + max_s
    while len(times) < min_iters or (len(times) < max_iters and time.perf_counter() < t_end):
        timer.start()
        out = fn()
        times.append(timer.stop(out))
    return times


def median(times: Sequence[float]) -> float:
    return float(statistics.median(times))
