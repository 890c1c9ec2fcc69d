"""A profiler trace as data: reading a Chrome trace (`load_trace`), its complete events (`spans`), and the interval
arithmetic the summary sums with (`merge`, `intersect`, `length`, `secs`). Pure functions, no torch: a trace
from any machine reads the same. Re-exported by bringup/profile/analysis.py, where the summary lives."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Interval = tuple[float, float]


# ---- trace I/O ----------------------------------------------------------------------------------
def load_trace(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A Chrome trace file (gzip or plain JSON) -> dict with `traceEvents`. ValueError if it isn't one."""
    p = Path(path)
    raw = p.read_bytes()
    try:
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        data = json.loads(text)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a Chrome trace: {e}") from e
    if isinstance(data, list):  # the JSON Array Format is a valid Chrome trace too
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError(f"{p}: not a Chrome trace: no traceEvents list")
    return data


@dataclass(frozen=True, eq=False)
class Span:
    """One complete ('X') trace event. ts and dur in microseconds, as in the trace."""

    name: str
    cat: str
    pid: Any
    tid: Any
    ts: float
    dur: float
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> float:
        return self.ts + self.dur


def spans(trace: dict[str, Any]) -> list[Span]:
    """The trace's complete events with a duration (metadata, flows and instants dropped)."""
    out = []
    for e in trace.get("traceEvents", []):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        if dur < 0:
            continue
        args: dict[str, Any] = e["args"] if isinstance(e.get("args"), dict) else {}
        out.append(Span(str(e.get("name", "")), str(e.get("cat") or ""), e.get("pid"), e.get("tid"), ts, dur, args))
    return out


# ---- interval arithmetic ------------------------------------------------------------------------
def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Union of intervals as a sorted list of disjoint intervals (empty ones dropped)."""
    out: list[Interval] = []
    for a, b in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Intersection of two merged (sorted, disjoint) interval lists."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(intervals: Iterable[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def secs(us: float, steps: int = 1) -> float:
    """Microseconds in total -> seconds per step, to the nanosecond."""
    return round(us / max(steps, 1) / 1e6, 9)


def _per_step(x: float, steps: int) -> float | int:
    v = x / max(steps, 1)
    return int(v) if float(v).is_integer() else round(v, 3)
