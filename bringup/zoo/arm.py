"""What both zoo drivers (zoo/run.py's tiny case, zoo/full.py's full-size one) share, in one place so that a fix
is made once: the compiled arm (`compiled_arm`: the run under the graph watcher, checks/graphs.py, its first step
reported as the compile phase with the case's time left, a failure classified as a compile failure, the graphs'
fields and compile time recorded and judged: a backend that raised, no graph at all) and the device eager run
under the CPU-fallback detector (`under_fallback_detector`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from bringup.case import CaseResult
from bringup.checks.errors import classify, first_line
from bringup.checks.fallbacks import FallbackDetector, FallbackReport
from bringup.checks.graphs import watch
from bringup.device import Device
from bringup.zoo.judge import judge_graphs
from bringup.zoo.steps import fail


class _Timed(Protocol):
    first_step_s: float


T = TypeVar("T", bound=_Timed)


@dataclass(frozen=True)
class Clock:
    """A case's time budget, counted from its start."""

    budget_s: float
    t0: float

    @staticmethod
    def start(budget_s: float) -> Clock:
        return Clock(budget_s, time.monotonic())

    def left(self) -> float:
        """Seconds the case has left (at least 1: a phase's budget is never zero)."""
        return max(1.0, self.budget_s - (time.monotonic() - self.t0))


def compiled_arm(r: CaseResult, ctx: Any, clock: Clock, run: Callable[[Callable[[], None]], T]) -> T | None:
    """run(on_first_step) under the graph watcher, its first step the compile phase (the case's time left as its
    budget); None, with `r` failed as the error classifies (compiling), when it raises. The graphs' fields, the
    compile time (the watcher's, else the first step's) and judge_graphs' verdict go on `r`."""
    left = clock.left()
    out: T | None = None
    try:
        with watch() as graphs:
            out = run(lambda: ctx.phase("compile", budget_s=left))
    except Exception as e:
        r.error = r.error or traceback.format_exc()
        fail(r, classify(e, compiling=True), f"compiled: {first_line(e)}")
    r.fields.update(graphs.fields())
    if out is not None:
        r.fields["compile_s"] = round(graphs.compile_s or out.first_step_s, 3)
        judge_graphs(r, graphs)
    return out


R = TypeVar("R")


def under_fallback_detector(r: CaseResult, dev: Device, run: Callable[[], R]) -> tuple[R, FallbackReport | None]:
    """run() under the fallback detector (which ops ran through the CPU fallback): (its result, the detector's
    report). A detector that can't start (another profiler active, ...) says so on `r` (fallback_note) and leaves
    the report None: fallback_ops unknown (null)."""
    try:
        det = FallbackDetector(dev)
        det.__enter__()
    except Exception as e:
        r.fields["fallback_note"] = f"fallback detector unavailable: {first_line(e)}"
        return run(), None
    try:
        out = run()
    finally:
        det.__exit__(None, None, None)
    return out, det.report()
