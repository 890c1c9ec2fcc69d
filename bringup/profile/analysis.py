"""torch.profiler capture and a device-agnostic summary of what it recorded.

`capture()` runs a step function under `torch.profiler` with the activities the device has (CPU
always; CUDA / XPU / MTIA / HPU / PrivateUse1 where the device type matches and this torch build
supports it) and exports a Chrome/Perfetto trace (`.json.gz`, opens offline in ui.perfetto.dev).

Everything else is small pure functions over the exported trace (a dict) or over copy records taken
from the profiler's event tree, so a saved trace from any machine can be summarised and every number
can be tested on hand-made events:

- `timeline_split`: per step, device busy / device idle / host overhead. Over the profiled step
  windows (the `ProfilerStep#N` annotations): busy = some device event (kernel, memcpy, memset) is
  running; host = the device is idle while the host is inside a torch op (dispatching, launching:
  the device waits on the framework); idle = the device is idle and the host is not in a torch op
  (Python, data, synchronisation). busy + host + idle = step time. Where the trace holds no device
  events the three are None ("n/a"), never zero: on cpu the device timeline IS the host timeline.
- `top_ops` (host ops and annotations by self time), `top_kernels` (device events by time),
  `compiled_regions` (Dynamo frames `Torch-Compiled Region: i/j`, AOTAutograd `CompiledFunction`
  and `CompiledFunctionBackward`), `device_memcpy` (memcpy events the device reports).
- `copy_records` + `count_transfers`: host<->device transfers from the innermost copy op of each
  copy (`aten::copy_`, `aten::_copy_from`, `aten::_to_cpu`, `aten::_local_scalar_dense`, ...) with the
  source and destination devices the profiler recorded (`record_shapes=True`). cpu->cpu and
  same-device copies are not transfers.

All times in a summary are seconds per step (the mean over the profiled steps); counts and bytes
are per step too.

Holistic Trace Analysis was considered and not used: it pulls in jupyterlab and plotting stacks (too
heavy for a CLI dependency), wants a directory of per-rank traces, and its temporal breakdown is for
GPU kernels only; the handful of interval sums needed here are a few dozen lines.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

# the trace as data (bringup/profile/trace.py), re-exported: bp.spans, bp.load_trace, bp.merge ...
from bringup.profile.trace import Interval, Span, _per_step, intersect, length, load_trace, merge, secs, spans

# Kineto categories of events that run ON the device (host-side runtime calls such as
# cudaLaunchKernel are "cuda_runtime" / "privateuse1_runtime" and are not device time).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events"})
# Host-side categories that nest (an op inside an annotation inside an op ...).
HOST_CATEGORIES = frozenset({"cpu_op", "user_annotation", "python_function"})
STEP_PREFIX = "ProfilerStep#"
COMPILED_PREFIX = "Torch-Compiled Region"  # Dynamo's frame marker ("Torch-Compiled Region: 0/0")
COMPILED_NAMES = frozenset({"CompiledFunction", "CompiledFunctionBackward"})  # AOTAutograd fwd / bwd


# ---- the step timeline --------------------------------------------------------------------------
def step_windows(sp: Sequence[Span]) -> list[Interval]:
    """The profiled steps (`ProfilerStep#N` annotations), merged. A trace without step markers is
    treated as one step spanning all its host events."""
    steps = [(s.ts, s.end) for s in sp if s.name.startswith(STEP_PREFIX)]
    if steps:
        return merge(steps)
    host = [s for s in sp if s.cat in HOST_CATEGORIES]
    if not host:
        return []
    return [(min(s.ts for s in host), max(s.end for s in host))]


def step_count(sp: Sequence[Span]) -> int:
    n = len({s.name for s in sp if s.name.startswith(STEP_PREFIX)})
    return n or (1 if step_windows(sp) else 0)


def device_spans(sp: Iterable[Span]) -> list[Span]:
    return [s for s in sp if s.cat in DEVICE_CATEGORIES]


@dataclass(frozen=True)
class TimelineSplit:
    """Seconds per step. busy/idle/host are None when the trace has no device events."""

    steps: int
    step_s: float
    ops_s: float  # host inside torch ops (any thread), per step
    busy_s: float | None
    idle_s: float | None
    host_s: float | None
    device_events: int


def timeline_split(sp: Sequence[Span]) -> TimelineSplit:
    windows = step_windows(sp)
    n = max(step_count(sp), 1)
    step_us = length(windows)
    ops = intersect(merge((s.ts, s.end) for s in sp if s.cat == "cpu_op"), windows)
    dev = device_spans(sp)
    busy_s = idle_s = host_s = None
    if dev:
        busy = intersect(merge((s.ts, s.end) for s in dev), windows)
        busy_us = length(busy)
        host_us = length(ops) - length(intersect(ops, busy))  # host in an op while the device is idle
        busy_s, host_s = secs(busy_us, n), secs(host_us, n)
        idle_s = secs(max(step_us - busy_us - host_us, 0.0), n)
    return TimelineSplit(n, secs(step_us, n), secs(length(ops), n), busy_s, idle_s, host_s, len(dev))


# ---- ops by self time ---------------------------------------------------------------------------
def self_times(sp: Sequence[Span]) -> list[tuple[Span, float]]:
    """(span, self time in us) for each host span: its duration minus the parts covered by its
    direct children on the same thread. Children are found by nesting (start inside the parent)."""
    by_thread: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for i, s in enumerate(sp):
        if s.cat in HOST_CATEGORIES:
            by_thread[(s.pid, s.tid)].append(i)
    self_us = {i: sp[i].dur for idx in by_thread.values() for i in idx}
    for idx in by_thread.values():
        idx.sort(key=lambda i: (sp[i].ts, -sp[i].dur))
        stack: list[int] = []
        for i in idx:
            s = sp[i]
            while stack and s.ts >= sp[stack[-1]].end:
                stack.pop()
            if stack:
                parent = sp[stack[-1]]
                self_us[stack[-1]] -= min(s.end, parent.end) - s.ts
            stack.append(i)
    return [(sp[i], max(v, 0.0)) for i, v in sorted(self_us.items())]


def top_ops(sp: Sequence[Span], n: int = 15) -> list[dict[str, Any]]:
    """Host ops (cpu_op) and annotations (e.g. an inductor graph call) ranked by self time."""
    steps = max(step_count(sp), 1)
    step_us = length(step_windows(sp)) or 1.0
    agg: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for s, self_us in self_times(sp):
        if s.name.startswith(STEP_PREFIX) or s.cat == "python_function":
            continue
        a = agg[(s.name, "op" if s.cat == "cpu_op" else "annotation")]
        a[0] += 1
        a[1] += self_us
        a[2] += s.dur
    rows = sorted(agg.items(), key=lambda kv: -kv[1][1])[:n]
    return [
        {
            "name": name,
            "kind": kind,
            "calls": _per_step(c, steps),
            "self_s": secs(su, steps),
            "total_s": secs(tu, steps),
            "pct": round(100.0 * su / step_us, 2),
            "fallback": False,
        }
        for (name, kind), (c, su, tu) in rows
    ]


def top_kernels(sp: Sequence[Span], n: int = 15) -> list[dict[str, Any]] | None:
    """Device events (kernels, memcpys, memsets) ranked by time; None when there are none."""
    dev = device_spans(sp)
    if not dev:
        return None
    steps = max(step_count(sp), 1)
    busy_us = length(merge((s.ts, s.end) for s in dev)) or 1.0
    agg: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for s in dev:
        a = agg[(s.name, s.cat)]
        a[0] += 1
        a[1] += s.dur
    rows = sorted(agg.items(), key=lambda kv: -kv[1][1])[:n]
    return [
        {
            "name": name,
            "kind": cat,
            "calls": _per_step(c, steps),
            "time_s": secs(us, steps),
            "pct_busy": round(100.0 * us / busy_us, 2),
        }
        for (name, cat), (c, us) in rows
    ]


def is_compiled_region(s: Span) -> bool:
    return s.cat in HOST_CATEGORIES and (s.name.startswith(COMPILED_PREFIX) or s.name in COMPILED_NAMES)


def compiled_regions(sp: Sequence[Span]) -> tuple[list[dict[str, Any]], float]:
    """Compiled code in the timeline: each region name with calls and inclusive time per step, and
    the share of step time (seconds per step) spent inside any of them."""
    steps = max(step_count(sp), 1)
    regions = [s for s in sp if is_compiled_region(s)]
    agg: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for s in regions:
        agg[s.name][0] += 1
        agg[s.name][1] += s.dur
    rows: list[dict[str, Any]] = [
        {"name": k, "calls": _per_step(c, steps), "time_s": secs(us, steps)} for k, (c, us) in agg.items()
    ]
    rows.sort(key=lambda r: -r["time_s"])
    inside = length(intersect(merge((s.ts, s.end) for s in regions), step_windows(sp)))
    return rows, secs(inside, steps)


# ---- transfers ----------------------------------------------------------------------------------
DIRECTIONS = ("h2d", "d2h", "d2d")


def memcpy_direction(name: str) -> str | None:
    """Direction of a device memcpy event from its name: CUPTI 'Memcpy HtoD (Pageable -> Device)',
    ROCm 'CopyHostToDevice', XPU 'Memcpy M2D' ... None when the name doesn't say."""
    n = name.replace(" ", "")
    if re.search(r"HtoD|H2D|HostToDevice|M2D|HostToGpu", n, re.IGNORECASE):
        return "h2d"
    if re.search(r"DtoH|D2H|DeviceToHost|D2M|GpuToHost", n, re.IGNORECASE):
        return "d2h"
    if re.search(r"DtoD|D2D|DeviceToDevice|PtoP|P2P|PeerToPeer", n, re.IGNORECASE):
        return "d2d"
    return None


def device_memcpy(sp: Sequence[Span]) -> dict[str, dict[str, Any]] | None:
    """Memcpy events the device reports, per direction (count, bytes, time_s per step). None when
    the trace has no device memcpy events at all."""
    copies = [s for s in sp if s.cat == "gpu_memcpy"]
    if not copies:
        return None
    steps = max(step_count(sp), 1)
    out: dict[str, list[float]] = {d: [0, 0, 0.0] for d in (*DIRECTIONS, "other")}
    for s in copies:
        a = out[memcpy_direction(s.name) or "other"]
        a[0] += 1
        nbytes = s.args.get("bytes", 0)
        a[1] += int(nbytes) if isinstance(nbytes, (int, float)) else 0
        a[2] += s.dur
    return {
        d: {"count": _per_step(c, steps), "bytes": _per_step(b, steps), "time_s": secs(us, steps)}
        for d, (c, b, us) in out.items()
        if d != "other" or c
    }


@dataclass(frozen=True)
class CopyRecord:
    """One innermost copy op: devices as strings ('cpu', 'cuda:0', 'testdev:0'), bytes moved, host us."""

    op: str
    src: str
    dst: str | None  # None: the profiler did not record where it went
    nbytes: int
    host_us: float


def _dev_type(dev: str) -> str:
    return dev.split(":", 1)[0]


def transfer_kind(src: str, dst: str | None) -> str | None:
    """h2d / d2h / d2d (between two different devices), 'unknown' when the destination was not
    recorded for a non-cpu source, None when it is no transfer (cpu->cpu, same device, meta)."""
    if "meta" in (_dev_type(src), _dev_type(dst or "")):
        return None
    if dst is None:
        return None if _dev_type(src) == "cpu" else "unknown"
    s_cpu, d_cpu = _dev_type(src) == "cpu", _dev_type(dst) == "cpu"
    if s_cpu and d_cpu:
        return None
    if s_cpu:
        return "h2d"
    if d_cpu:
        return "d2h"
    return "d2d" if _norm_dev(src) != _norm_dev(dst) else None


def _norm_dev(dev: str) -> str:
    return dev if ":" in dev else f"{dev}:0"


def count_transfers(
    records: Iterable[CopyRecord], steps: int = 1, memcpy: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Per direction: count, bytes, time_s (device memcpy time where the device reports memcpy
    events for that direction, else host time inside the copy ops; `time_from` says which) and
    host_s. Per step. 'unknown' (a non-cpu source with no recorded destination) only when present."""
    acc: dict[str, list[float]] = {d: [0, 0, 0.0] for d in (*DIRECTIONS, "unknown")}
    for r in records:
        kind = transfer_kind(r.src, r.dst)
        if kind is None:
            continue
        a = acc[kind]
        a[0] += 1
        a[1] += r.nbytes
        a[2] += r.host_us
    out: dict[str, Any] = {}
    for d, (c, b, us) in acc.items():
        if d == "unknown" and not c:
            continue
        dev = (memcpy or {}).get(d)
        host_s = secs(us, steps)
        row: dict[str, Any] = {"count": _per_step(c, steps), "bytes": _per_step(b, steps), "host_s": host_s}
        if dev and dev.get("count"):
            row |= {"time_s": dev["time_s"], "time_from": "device"}
        else:
            row |= {"time_s": host_s, "time_from": "host"}
        out[d] = row
    return out


# Copy ops and which input is the source / destination (None: the destination is not an input).
_COPY_OPS: dict[str, tuple[int, int | None]] = {
    "aten::copy_": (1, 0),  # copy_(self=dst, src)
    "aten::_copy_from": (0, 1),  # _copy_from(self=src, dst): how PrivateUse1 / XLA / MPS copy
    "aten::_copy_from_and_resize": (0, 1),
    "aten::_to_copy": (0, None),  # only innermost when a backend implements it without copy_
    "aten::_to_cpu": (0, -1),  # list of tensors -> cpu
    "aten::_local_scalar_dense": (0, -1),  # .item(): one element -> cpu
}


def _tensors(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [t for t in x if hasattr(t, "device") and hasattr(t, "sizes")]
    return [x] if hasattr(x, "device") and hasattr(x, "sizes") else []


def _nbytes(t: Any) -> int:
    numel = 1
    for d in t.sizes or []:
        numel *= int(d)
    return numel * int(getattr(t.dtype, "itemsize", 0) or 0)


def copy_records(roots: Sequence[Any]) -> list[CopyRecord]:
    """Transfers in a profiler event tree (`prof.profiler.kineto_results.experimental_event_tree()`,
    recorded with `record_shapes=True`): the OUTERMOST copy op whose source and destination devices
    differ, once, with its bytes and host time; what it calls inside is its implementation (a
    backend's `copy_` -> `_copy_from` -> a cpu `copy_` on host-mapped memory) and is not counted
    again. Copies within one device or within the host are no transfers and are looked through. A
    backend `_to_copy` with no copy op inside and a non-cpu source has an unrecorded destination:
    reported with dst=None ('unknown')."""
    out: list[CopyRecord] = []

    def has_copy_below(e: Any) -> bool:
        return any(c.name in _COPY_OPS or has_copy_below(c) for c in e.children)

    def records(e: Any) -> list[CopyRecord]:
        src_i, dst_i = _COPY_OPS[e.name]
        inputs = list(getattr(e.extra_fields, "inputs", None) or [])
        srcs = _tensors(inputs[src_i]) if src_i < len(inputs) else []
        dst: str | None = None
        if dst_i == -1:
            dst = "cpu"
        elif dst_i is not None and dst_i < len(inputs):
            d = _tensors(inputs[dst_i])
            dst = str(d[0].device) if d else None
        host_us = float(e.duration_time_ns) / 1e3 / max(len(srcs), 1)
        return [CopyRecord(e.name, str(t.device), dst, _nbytes(t), host_us) for t in srcs]

    def visit(e: Any) -> None:
        if e.name in _COPY_OPS:
            recs = records(e)
            if any(r.dst is not None and transfer_kind(r.src, r.dst) for r in recs):
                out.extend(recs)
                return
            if recs and recs[0].dst is None and not has_copy_below(e):
                out.extend(r for r in recs if transfer_kind(r.src, None))
                return
        for c in e.children:
            visit(c)

    for r in roots:
        visit(r)
    return out


# ---- fallbacks ----------------------------------------------------------------------------------
def op_key(name: str) -> str:
    """'aten::add_.Tensor' / 'aten.add_.Tensor' / 'add_' -> 'add_' (what both sides can agree on)."""
    n = name.split("::", 1)[-1]
    if n.startswith("aten."):
        n = n[5:]
    return n.split(".", 1)[0]


def mark_fallbacks(rows: list[dict[str, Any]], fallback_ops: Iterable[str]) -> list[dict[str, Any]]:
    keys = {op_key(o) for o in fallback_ops}
    return [{**r, "fallback": r.get("kind") == "op" and op_key(r["name"]) in keys} for r in rows]


# ---- summary ------------------------------------------------------------------------------------
def summarize_trace(trace: dict[str, Any], top_n: int = 15) -> dict[str, Any]:
    """Everything the trace alone says, per step."""
    sp = spans(trace)
    split = timeline_split(sp)
    regions, compiled_s = compiled_regions(sp)
    return {
        "steps": split.steps,
        "step_s": split.step_s,
        "busy_s": split.busy_s,
        "idle_s": split.idle_s,
        "host_s": split.host_s,
        "ops_s": split.ops_s,
        "device_events": split.device_events,
        "top_ops": top_ops(sp, top_n),
        "top_kernels": top_kernels(sp, top_n),
        "compiled_regions": regions,
        "compiled_s": compiled_s if regions else None,
        "device_memcpy": device_memcpy(sp),
    }


# ---- capture ------------------------------------------------------------------------------------
_ACTIVITY_BY_TYPE = {"cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA", "hpu": "HPU"}


def activities_for(device_type: str) -> tuple[list[Any], str]:
    """Profiler activities for a device type: CPU always, plus the device's own where this torch
    build supports it. Returns (activities, note) with the note saying why a device gets CPU only."""
    acts = [ProfilerActivity.CPU]
    if device_type == "cpu":
        return acts, ""
    supported = set(torch.profiler.supported_activities())
    name = _ACTIVITY_BY_TYPE.get(device_type)
    if name is None and device_type == torch._C._get_privateuse1_backend_name():
        name = "PrivateUse1"
    act = getattr(ProfilerActivity, name, None) if name else None
    if act is None:
        return acts, f"torch.profiler has no activity for device type {device_type!r}: host events only"
    if act not in supported:
        return acts, f"this torch build does not support ProfilerActivity.{name}: host events only"
    return [*acts, act], ""


@dataclass
class Capture:
    trace_path: Path
    steps: int
    activities: list[str]
    copies: list[CopyRecord] | None  # None: the profiler gave no event tree
    note: str = ""


def _export(prof: Any, path: Path) -> None:
    """Export the trace atomically (temp name + rename); gzip when the name ends in .gz (torch's
    export_chrome_trace writes gzip itself for such names)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp" + (".json.gz" if path.name.endswith(".gz") else ".json"))
    try:
        prof.export_chrome_trace(str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def capture(
    step: Callable[[], Any],
    device_type: str,
    steps: int,
    trace_path: str | os.PathLike[str],
    sync: Callable[[], None] | None = None,
    warmup: int = 1,
    activities: tuple[list[Any], str] | None = None,
) -> Capture:
    """Run `step` warmup + steps times under torch.profiler (schedule: `warmup` untraced profiler
    warm-up steps, then `steps` recorded ones, each marked ProfilerStep#N), calling `sync` at the end
    of each step so its device work falls inside its window; export the trace to `trace_path`."""
    acts, note = activities if activities is not None else activities_for(device_type)
    path = Path(trace_path)
    got: dict[str, Any] = {}

    def ready(prof: Any) -> None:
        _export(prof, path)
        try:
            got["copies"] = copy_records(prof.profiler.kineto_results.experimental_event_tree())
        except Exception as e:  # private API; transfers become n/a rather than wrong
            got["copies_error"] = f"{type(e).__name__}: {e}"

    def start(activities: list[Any]) -> Any:
        sched = schedule(wait=0, warmup=warmup, active=steps, repeat=1)
        prof = profile(activities=activities, schedule=sched, on_trace_ready=ready, record_shapes=True)
        prof.__enter__()
        return prof

    try:
        prof = start(acts)
    except Exception as e:  # a device profiler plugin that fails to start: still trace the host
        if len(acts) == 1:
            raise
        why = (f"{type(e).__name__}: {e}".splitlines() or [""])[0][:200]
        note = f"the device's profiler failed to start ({why}): host events only"
        acts = acts[:1]
        prof = start(acts)
    try:
        for _ in range(warmup + steps):
            step()
            if sync is not None:
                sync()
            prof.step()
    finally:
        prof.__exit__(None, None, None)
    if not path.exists():
        raise RuntimeError("torch.profiler produced no trace")
    if "copies_error" in got:
        note = "; ".join(x for x in (note, f"no event tree for transfers: {got['copies_error']}") if x)
    return Capture(path, steps, [str(a).rsplit(".", 1)[-1] for a in acts], got.get("copies"), note)


def summarize_capture(cap: Capture, top_n: int = 15, fallback_ops: dict[str, int] | None = None) -> dict[str, Any]:
    """The summary of a capture: the trace's numbers, transfers, fallbacks marked."""
    summary = summarize_trace(load_trace(cap.trace_path), top_n)
    steps = summary["steps"] or cap.steps
    summary["transfers"] = (
        count_transfers(cap.copies, steps, summary["device_memcpy"]) if cap.copies is not None else None
    )
    summary["fallback_ops"] = fallback_ops
    if fallback_ops:
        summary["top_ops"] = mark_fallbacks(summary["top_ops"], fallback_ops)
    summary["activities"] = cap.activities
    summary["note"] = cap.note
    summary["trace"] = str(cap.trace_path)
    return summary
