"""Dynamo's own compile metrics, read after the first step and at the end of a case.

Sources (torch 2.13): `torch._dynamo.utils.calculate_time_spent()` (cumulative seconds per phase that
dynamo times: `entire_frame_compile` = dynamo tracing + the backend for the forward,
`backend_compile` = AOT autograd + inductor for the forward, `entire_backward_compile` = the lazy
backward compile, `inductor_compile` = inductor's own part, forward and backward),
`torch._dynamo.utils.compilation_time_metrics` for an ahead-of-time compile (`aot_compile` runs no
frame compile: its whole compile is the `fullgraph_capture` event, its tracing `bytecode_tracing`),
`torch._dynamo.utils.counters` (graph breaks, graphs, FX-graph and AOT-autograd cache hits and
misses) and `get_compilation_metrics()` (one record per frame compile, with `recompile_reason`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def snapshot() -> dict[str, Any]:
    """The process's compile metrics so far (cumulative)."""
    from torch._dynamo.utils import counters, get_compilation_metrics  # lazy: private torch API, loaded only when used

    metrics = get_compilation_metrics()
    times = times_now()
    reasons = [m.recompile_reason for m in metrics if m.recompile_reason]
    unimpl = counters.get("unimplemented", Counter())
    return {
        "times": times,
        "graph_breaks": int(sum(counters.get("graph_break", {}).values())),
        "break_reasons": sorted(counters.get("graph_break", {}))[:5],
        "graphs": int(counters.get("stats", Counter()).get("unique_graphs", 0)),
        "frames_ok": int(counters.get("frames", Counter()).get("ok", 0)),
        "recompiles": len(reasons),
        "recompile_reasons": [str(r)[:200] for r in reasons[:5]],
        "recompile_limit_hit": any("recompile limit" in k.lower() or "recompile_limit" in k for k in unimpl),
        "cache": {k: int(counters.get(group, Counter()).get(name, 0)) for k, (group, name) in CACHE_COUNTERS.items()},
    }


# Cache counters of torch 2.13 (`torch._dynamo.utils.counters[group][name]`), by layer and outcome.
CACHE_COUNTERS: dict[str, tuple[str, str]] = {
    "fx_hit": ("inductor", "fxgraph_cache_hit"),
    "fx_miss": ("inductor", "fxgraph_cache_miss"),
    "fx_bypass": ("inductor", "fxgraph_cache_bypass"),
    "aot_hit": ("aot_autograd", "autograd_cache_hit"),
    "aot_miss": ("aot_autograd", "autograd_cache_miss"),
    "aot_bypass": ("aot_autograd", "autograd_cache_bypass"),
    "aot_guard_miss": ("aot_autograd", "autograd_cache_guard_miss"),
    "kernel_hit": ("inductor", "async_compile_cache_hit"),
    "kernel_miss": ("inductor", "async_compile_cache_miss"),
    "module_hit": ("inductor", "generated_module_cache_hit"),
    "module_miss": ("inductor", "generated_module_cache_miss"),
    "autotune": ("inductor", "select_algorithm_autotune"),
    "precompile_hit": ("dynamo_cache", "dynamo_cache_hit"),
    "precompile_miss": ("dynamo_cache", "dynamo_cache_miss"),
}


def times_now() -> dict[str, float]:
    """Dynamo's cumulative seconds per phase, and the AOT_EVENTS' (each summed over its calls)."""
    from torch._dynamo.utils import (  # lazy: private torch API, loaded only when used
        calculate_time_spent,
        compilation_time_metrics,
    )

    times = {k: round(float(v), 4) for k, v in calculate_time_spent().items()}
    for k in AOT_EVENTS:
        if compilation_time_metrics.get(k):
            times[k] = round(float(sum(compilation_time_metrics[k])), 4)
    return times


def compile_seconds(times: dict[str, float] | None = None) -> float:
    """This process's compile seconds so far (`breakdown`'s total), from `times` or read now (cheap: sums
    over dynamo's counters, no device work)."""
    return breakdown(times if times is not None else times_now())["total_s"]


# dynamo_timed events of an ahead-of-time compile (torch 2.13): the whole `aot_compile`, and its tracing.
AOT_EVENTS = ("fullgraph_capture", "bytecode_tracing")


def breakdown(times: dict[str, float]) -> dict[str, float]:
    """Compile seconds by phase: dynamo tracing, AOT autograd (joint graph, partition, cache loads),
    the backend (inductor codegen + kernel compile, forward and backward), and their total. An
    ahead-of-time compile (no frame compile, a `fullgraph_capture`): its total, its bytecode tracing,
    inductor's part, and AOT autograd as the rest (forward and backward are compiled inside it)."""
    inductor = times.get("inductor_compile", 0.0)
    whole = times.get("fullgraph_capture", 0.0)
    if whole and not times.get("entire_frame_compile"):
        tracing = min(times.get("bytecode_tracing", 0.0), whole)
        return {
            "total_s": round(whole, 4),
            "dynamo_s": round(tracing, 4),
            "aot_autograd_s": round(max(whole - tracing - inductor, 0.0), 4),
            "backend_s": round(min(inductor, whole - tracing), 4),
        }
    frame = times.get("entire_frame_compile", 0.0)
    backend_fw = times.get("backend_compile", 0.0)
    backward = times.get("entire_backward_compile", 0.0)
    after_dynamo = backend_fw + backward
    return {
        "total_s": round(frame + backward, 4),
        "dynamo_s": round(max(frame - backend_fw, 0.0), 4),
        "aot_autograd_s": round(max(after_dynamo - inductor, 0.0), 4),
        "backend_s": round(inductor, 4),
    }


def silent_eager_reason(snap: dict[str, Any], mode: str) -> str:
    """Non-empty when a compiled mode did not really run compiled code. aot: the loss function is called
    as the fullgraph AOT-compiled function itself (no dynamo frame, no fallback to eager: a failed
    guard raises), so there is no frame count to check."""
    if mode == "aot":
        return ""
    if snap["graphs"] == 0:
        return f"{mode}: torch.compile produced no graph (dynamo skipped the frames): the model ran eager"
    if snap["recompile_limit_hit"]:
        return f"{mode}: dynamo hit its recompile limit; later calls ran eager ({snap['recompiles']} recompiles)"
    return ""
