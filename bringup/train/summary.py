"""What a train case records, and what the train suite prints and returns as top-level JSON.

Top-level JSON (besides the common `cases` rows):
    model, params, flops_per_token, seq, batch, nproc, dtype, peak_flops, peak_flops_source,
    modes.<eager|compile|regional>: {status, cache, ttfs_s, step_s, first_over_steady, tokens_per_s,
        tokens_per_s_per_device, mfu, peak_mem_bytes, graph_breaks, recompiles, compile_s,
        compile_breakdown, speedup_vs_eager, loss: [per step]; eager: eager_check {reference, ok, summary,
        tensors, model, max_rel_err} and tying_broken; compiled: loss_reference}
        With --cache both, a compiled mode's entry is its cold run and holds its warm rerun under
        "warm" (same keys); with --cache warm alone the entry is the warm run ("cache": "warm").
    fast_start: the entry that reaches step 1 first and what its steady step costs, measured; advice:
        the same as one sentence.
    fastest_start: one row per usable arm (arm, job_ttfs_s, phases, step_s, tokens_per_s, recompiles,
        steady_vs_full_compile, reach_s {"1", "100", "10000"}), sorted by job_ttfs_s; fastest_by_steps
        {"1", "100", "10000": arm}; advice_steps: the same as one sentence (train/arms.py).
    Each mode entry also holds arm, job_ttfs_s, phases and, where measured, cache_layers,
    cache_warnings, artifact, artifact_from, rank_compile_s, rank_compile_skew_s, slow_rank; with
    --cache artifact / all a compiled mode's cold entry holds its "artifact" (and "warm") reruns.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from rich.table import Table

from bringup.case import CaseResult, Status
from bringup.console import fmt, print_wide, styled
from bringup.device import Device, run_peak
from bringup.models.lm import PRESETS, QWEN3_COMMON
from bringup.precision import parse_precision
from bringup.train import arms, compile_metrics
from bringup.train.loop import TrainOutcome
from bringup.train.spec import CACHE_ARTIFACT, CACHE_COLD, CACHE_NONE, CACHE_WARM, TrainSpec

if TYPE_CHECKING:
    from rich.console import Console

MODE_ORDER: dict[tuple[str | None, str | None], int] = {  # read with a case's params (a missing one: None)
    ("eager", CACHE_NONE): 0,
    ("compile", CACHE_COLD): 1,
    ("compile", CACHE_WARM): 2,
    ("compile", CACHE_ARTIFACT): 3,
    ("regional", CACHE_COLD): 4,
    ("regional", CACHE_WARM): 5,
    ("regional", CACHE_ARTIFACT): 6,
    ("nested", CACHE_COLD): 7,
    ("nested", CACHE_WARM): 8,
    ("nested", CACHE_ARTIFACT): 9,
    ("aot", CACHE_COLD): 10,
    ("aot", CACHE_ARTIFACT): 11,
}
USABLE = (Status.PASS, Status.FALLBACK)  # ran and measured: may give advice


def mfu_impossible(r: CaseResult) -> str:
    """'' unless the case's MFU is above 100%: then why that is an `error` (a wrong peak or a timer
    that did not time the work), with the numbers."""
    mfu = r.value("mfu")
    if mfu is None or mfu <= 1.0:
        return ""
    peak, got = r.value("peak_flops"), r.fields.get("achieved_flops")
    return (
        f"MFU {mfu:.1%} is above 100%: {got or 0:.4g} FLOP/s achieved per device vs a peak of {peak or 0:.4g} "
        f"FLOP/s ({r.fields.get('peak_flops_source', '?')}): the peak or the step timing is wrong"
    )


# ---- recording (in the worker) -------------------------------------------------------------------
def record_outcome(
    r: CaseResult, spec: TrainSpec, out: TrainOutcome, device: Device, load_s: float = 0.0, run_dir: Path | None = None
) -> None:
    """The case's metrics and fields. MFU is against the run's one peak for (device, dtype) (`run_peak`:
    computed by the first case that asks, shared through the run dir)."""
    steady, tok_s, flop_s = out.window(spec)
    # The job's time to first step as a new job meets it: load an artifact, build, apply the mode, step 1.
    r.metric("job_ttfs_s", load_s + out.setup_s + out.ttfs_s, "s")
    phases = {"load_artifact_s": load_s, **out.phases}
    per_dev = tok_s / spec.nproc if tok_s else None
    r.metric("ttfs_s", out.ttfs_s, "s")
    r.metric("step_s", steady, "s")
    r.metric("first_over_steady", out.ttfs_s / steady if steady > 0 else None)
    r.metric("tokens_per_s", tok_s, "tok/s")
    r.metric("tokens_per_s_per_device", per_dev, "tok/s")
    r.metric("setup_s", out.setup_s, "s")
    r.metric("params", out.params)
    r.metric("flops_per_token", out.flops_per_token, "FLOP")
    r.metric("peak_mem_bytes", out.peak_mem_bytes, "B")
    if out.peak_mem_bytes is None and out.memory_gap:
        r.fields["peak_mem_gap"] = out.memory_gap
    peak = run_peak(device, parse_precision(spec.dtype).compute_dtype, run_dir)  # amp-bf16: the bf16 peak
    if peak is not None and peak.flops > 0:
        r.metric("peak_flops", peak.flops, "FLOP/s")
        r.fields["peak_flops_source"] = peak.source
        if flop_s:
            r.metric("mfu", flop_s / spec.nproc / peak.flops)
            r.fields["achieved_flops"] = flop_s / spec.nproc
    if len(out.rank_first_s) > 1:
        record_ranks(r, out.rank_first_s)
    if spec.compiled:
        first = compile_metrics.breakdown(out.first["times"])
        r.fields["compile_breakdown"] = first
        phases.update(dynamo_s=first["dynamo_s"], aot_autograd_s=first["aot_autograd_s"], backend_s=first["backend_s"])
        r.metric("compile_s", first["total_s"], "s")
        later = compile_metrics.breakdown(out.final["times"])["total_s"] - first["total_s"]
        r.metric("compile_after_first_s", max(later, 0.0), "s")
        r.metric("graph_breaks", out.final["graph_breaks"])
        r.metric("recompiles", out.final["recompiles"])
        r.metric("graphs", out.final["graphs"])
        r.fields["compile_cache"] = out.first["cache"]
        r.fields["break_reasons"] = out.final["break_reasons"]
        r.fields["recompile_reasons"] = out.final["recompile_reasons"]
        # which steps after the first compiled again, and for how long (recompiles during the first N steps)
        r.fields["recompiled_at"] = {str(i): round(s, 4) for i, s in enumerate(out.compiled_s, 1) if i > 1 and s > 0}
    phases["run_s"] = max(out.ttfs_s - (first["total_s"] if spec.compiled else 0.0), 0.0)
    r.fields["ttfs_phases"] = {k: round(v, 4) for k, v in phases.items()}
    if out.fallback_ops is not None:
        r.fields["fallback_ops"] = out.fallback_ops
    if out.host_reads:  # the model's .item()-style reads in a step: on a lazy device, graph cuts
        r.fields["host_reads_per_step"] = out.host_reads
    if out.notes:
        r.fields["notes"] = out.notes
    r.series["loss"] = [(i + 1, x) for i, x in enumerate(out.losses)]
    r.series["step_s"] = [(i + 1, x) for i, x in enumerate(out.step_s)]


SKEW_FACTOR = 2.0  # a rank whose step 1 takes over twice the ranks' median compiled (mostly) alone


def record_ranks(r: CaseResult, firsts: list[float]) -> None:
    """Per-rank compile seconds (eager: step 1) under --nproc, the skew, and a rank that compiled alone."""
    med = statistics.median(firsts)
    slow = max(range(len(firsts)), key=lambda i: firsts[i])
    r.fields["rank_compile_s"] = [round(x, 4) for x in firsts]
    r.metric("rank_compile_skew_s", max(firsts) - min(firsts), "s")
    if med > 0 and firsts[slow] > SKEW_FACTOR * med:
        r.fields["slow_rank"] = (
            f"rank {slow} compiled for {firsts[slow]:.3g} s, {firsts[slow] / med:.1f}x the ranks' "
            f"median ({med:.3g} s): it compiled alone while the others waited"
        )


# ---- choosing a model for `bringup run --full` ---------------------------------------------------
def total_memory(device: Device) -> int | None:
    try:
        if device.is_accelerator:
            return int(torch.accelerator.get_memory_info(device.index or 0)[1])
        props = device.module.get_device_properties(device.index or 0)
        return int(props.total_memory)
    except Exception:
        return None


def training_bytes(cfg: dict[str, Any], batch: int, seq: int) -> float:
    """Rough bf16 AdamW footprint: 8 B/param (weights, grads, two moments) + activations without
    checkpointing (~34 B per layer x token x hidden, Korthikanti et al.) + logits (bf16, fp32 loss, grad)."""
    h, i, L, q, kv = (
        cfg[k]
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    )
    hd, V = cfg.get("head_dim", 128), cfg.get("vocab_size", 151936)
    layer = h * (q + 2 * kv) * hd + q * hd * h + 3 * h * i
    params = L * layer + V * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return 8.0 * params + 34.0 * L * batch * seq * h + 10.0 * batch * seq * V


def preset_that_fits(device: Device, batch: int, seq: int) -> str:
    mem = total_memory(device)
    if not mem:
        return "qwen3-0.6b"
    for name in ("qwen3-8b", "qwen3-4b", "qwen3-1.7b", "qwen3-0.6b"):
        if training_bytes({**QWEN3_COMMON, **PRESETS[name]}, batch, seq) <= 0.8 * mem:
            return name
    return "qwen3-tiny"


# ---- summarising (in the driver) -----------------------------------------------------------------
def _m(r: CaseResult, k: str) -> float | None:
    return r.value(k)  # by catalogue name; bundles from before it kept loss_divergence as loss_max_rel_dev


def entry(r: CaseResult) -> dict[str, Any]:
    spec = TrainSpec.from_params(r.params)
    e: dict[str, Any] = {"status": r.status.value, "reason": r.reason, "cache": spec.cache}
    for k in (
        "ttfs_s",
        "step_s",
        "first_over_steady",
        "tokens_per_s",
        "tokens_per_s_per_device",
        "mfu",
        "peak_mem_bytes",
        "graph_breaks",
        "recompiles",
        "compile_s",
        "loss_divergence",
    ):
        e[k] = _m(r, k)
    for k in ("peak_mem_bytes", "graph_breaks", "recompiles"):
        e[k] = int(e[k]) if e[k] is not None else None
    e["compile_breakdown"] = r.fields.get("compile_breakdown")
    e["arm"] = spec.name
    e["job_ttfs_s"] = _m(r, "job_ttfs_s")
    for k in (
        "ttfs_phases",
        "cache_layers",
        "cache_warnings",
        "artifact",
        "artifact_from",
        "rank_compile_s",
        "slow_rank",
        "recompiled_at",
        "recompile_reasons",
    ):
        if k in r.fields:
            e[k] = r.fields[k]
    e["phases"] = r.fields.get("ttfs_phases")
    if spec.nproc > 1:
        e["rank_compile_skew_s"] = _m(r, "rank_compile_skew_s")
    if spec.mode == "eager":  # what eager was judged against (train/reference.py) and what it found
        e["eager_check"] = r.fields.get("eager_check")
        e["tying_broken"] = r.fields.get("tying_broken", [])
    else:
        e["loss_reference"] = r.fields.get("loss_reference")
    e["loss"] = [v for _, v in r.series.get("loss", [])]
    return e


def label(spec: TrainSpec) -> str:
    text = spec.mode if spec.cache == CACHE_NONE else f"{spec.mode} ({spec.cache} cache)"
    return text + spec.dynamic_suffix.replace("-", " ")


def fast_start(rows: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """Which measured entry reaches step 1 first, and what its steady step costs vs the fastest."""
    ok = [(n, e) for n, e in rows if e["status"] in {s.value for s in USABLE} and e["ttfs_s"] and e["step_s"]]
    if not ok:
        return None
    fn, fe = min(ok, key=lambda x: x[1]["ttfs_s"])
    sn, se = min(ok, key=lambda x: x[1]["step_s"])
    ln, le = max(ok, key=lambda x: x[1]["ttfs_s"])
    out: dict[str, Any] = {
        "entry": fn,
        "ttfs_s": fe["ttfs_s"],
        "step_s": fe["step_s"],
        "fastest_steady": sn,
        "steady_cost_vs_fastest": fe["step_s"] / se["step_s"],
        "break_even_steps": None,
    }
    text = f"fast start: {fn} reaches step 1 first, in {fe['ttfs_s']:.3g} s"
    if ln != fn:
        text += f" ({le['ttfs_s'] / fe['ttfs_s']:.1f}x sooner than {ln}, {le['ttfs_s']:.3g} s)"
    if sn == fn:
        text += f", and has the fastest steady step too ({fe['step_s']:.3g} s)"
    else:
        cost = fe["step_s"] / se["step_s"]
        text += f"; its steady step costs {cost:.2f}x that of {sn} ({fe['step_s']:.3g} s vs {se['step_s']:.3g} s)"
        gain = fe["step_s"] - se["step_s"]
        if gain > 0:
            n = math.ceil((se["ttfs_s"] - fe["ttfs_s"]) / gain)
            out["break_even_steps"] = max(n, 0)
            text += f": {sn} makes up its later start after {max(n, 0)} steps"
    out["advice"] = text
    return out


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    """The run's JSON extras and its console summary: the --flops-only lines, then one row per arm."""
    extras: dict[str, Any] = {}
    for r in (r for r in results if r.params.get("flops_only")):
        extras.update(_flops_only(r, console))
    runs = sorted(
        (r for r in results if not r.params.get("flops_only")),
        key=lambda r: MODE_ORDER.get((r.params.get("mode"), r.params.get("cache")), 9),
    )
    if not runs:
        return extras
    spec = TrainSpec.from_params(runs[0].params)
    extras.update(_run_extras(spec, runs))
    specs = {r.case_id: TrainSpec.from_params(r.params) for r in runs}
    rows = [(label(specs[r.case_id]), entry(r), r) for r in runs]
    eager = next((e for n, e, _ in rows if n == "eager"), None)
    for _, e, r in rows:
        ok = eager and eager["step_s"] and e["step_s"] and r.status in USABLE
        e["speedup_vs_eager"] = eager["step_s"] / e["step_s"] if ok else None  # type: ignore[index]  # ok implies eager is not None
    extras["modes"] = _modes(rows, specs)
    fs = fast_start([(n, e) for n, e, _ in rows])
    extras["fast_start"] = fs
    extras["advice"] = fs["advice"] if fs else None
    usable = [e for _, e, r in rows if r.status in USABLE]
    extras["fastest_start"] = arms.table(usable)
    extras["fastest_by_steps"] = {str(n): a for n, a in arms.fastest(usable).items()}
    extras["advice_steps"] = arms.advice(usable) or None
    _print_table(console, spec, rows, specs)
    _print_notes(console, spec, rows, extras)
    return extras


_Row = tuple[str, dict[str, Any], CaseResult]  # (label, entry, result) of one arm


def _flops_only(r: CaseResult, console: Console) -> dict[str, Any]:
    """A --flops-only case: its line, and its extras."""
    console.print(
        f"[bold]train --flops-only[/]: {r.params['model']}: {_int(_m(r, 'params')) or 0:,} params "
        f"({_int(_m(r, 'embedding_params')) or 0:,} embedding); FLOPs/token at seq {r.params['seq']}: "
        f"{fmt(_m(r, 'flops_per_token'))} (TorchTitan's formula)"
        + (f" [{r.status}: {r.reason}]" if r.status is not Status.PASS else ""),
        highlight=False,
    )
    return dict(
        model=r.params["model"],
        params=_int(_m(r, "params")),
        seq=r.params["seq"],
        embedding_params=_int(_m(r, "embedding_params")),
        flops_per_token=_int(_m(r, "flops_per_token")),
        config=r.fields.get("config", {}),
    )


def _run_extras(spec: TrainSpec, runs: list[CaseResult]) -> dict[str, Any]:
    """The run's model and shape, and the counts read off the first case that has them."""
    first = next((r for r in runs if "params" in r.metrics), runs[0])
    return dict(
        model=spec.model,
        params=_int(_m(first, "params")),
        flops_per_token=_int(_m(first, "flops_per_token")),
        seq=spec.seq,
        batch=spec.batch,
        nproc=spec.nproc,
        dtype=spec.dtype,
        peak_flops=_m(first, "peak_flops"),
        peak_flops_source=first.fields.get("peak_flops_source"),
    )


def _modes(rows: list[_Row], specs: dict[str, TrainSpec]) -> dict[str, Any]:
    """The JSON `modes` key: the mode, and its dynamic-shape setting when not the default; a warm or
    artifact arm nests under its mode's cold entry."""
    modes: dict[str, Any] = {}
    for _, e, r in rows:
        mode, cache = specs[r.case_id].mode + specs[r.case_id].dynamic_suffix, r.params["cache"]
        if cache in (CACHE_WARM, CACHE_ARTIFACT) and mode in modes and modes[mode]["cache"] == CACHE_COLD:
            modes[mode][cache] = e
        else:
            modes[mode] = e
    return modes


_COLUMNS = (
    "mode",
    "status",
    "first step s",
    "steady step s",
    "ratio",
    "tok/s",
    "tok/s/dev",
    "MFU %",
    "speed-up",
    "compile s",
    "breaks",
    "peak mem GB",
)


def _print_table(console: Console, spec: TrainSpec, rows: list[_Row], specs: dict[str, TrainSpec]) -> None:
    t = Table(
        title=f"train: {spec.model}, {spec.batch} x {spec.seq} tokens x {spec.nproc} rank(s), {spec.dtype}",
        title_justify="left",
    )
    for c in _COLUMNS:
        t.add_column(c, justify="left" if c in ("mode", "status") else "right", no_wrap=c in ("mode", "status"))
    for _, e, r in rows:
        mfu = e["mfu"] * 100 if e["mfu"] is not None else None
        mem = e["peak_mem_bytes"] / 1e9 if e["peak_mem_bytes"] else None
        name = specs[r.case_id].name.replace("-", " ")  # "compile cold", "compile cold dynamic on"
        t.add_row(
            name,
            styled(r.status),
            fmt(e["ttfs_s"]),
            fmt(e["step_s"]),
            fmt(e["first_over_steady"]),
            fmt(e["tokens_per_s"]),
            fmt(e["tokens_per_s_per_device"]),
            fmt(mfu),
            _x(e["speedup_vs_eager"]),
            fmt(e["compile_s"]),
            fmt(e["graph_breaks"]),
            fmt(mem),
        )
    print_wide(console, t, 150)  # a log or CI: wider, unfolded


def _print_notes(console: Console, spec: TrainSpec, rows: list[_Row], extras: dict[str, Any]) -> None:
    """Under the table: the model's counts, each arm's reason, the fast-start advice, warnings."""
    params, fpt = extras["params"], extras["flops_per_token"]
    if params:
        peak = f"{fmt(extras['peak_flops'])} FLOP/s per device ({extras['peak_flops_source'] or 'no peak'})"
        console.print(
            f"{spec.model}: {params:,} params, {fmt(fpt)} FLOPs/token at seq {spec.seq}; MFU against {peak}",
            highlight=False,
            markup=False,
        )
    for n, _, r in rows:
        if r.reason:
            console.print(f"  {n}: {r.status.value}: {r.reason}", highlight=False, markup=False)
    if fs := extras["fast_start"]:
        console.print(fs["advice"], highlight=False, markup=False)
    if len(extras["fastest_start"]) > 1:
        _print_fastest(console, extras["fastest_start"])
        console.print(extras["advice_steps"], highlight=False, markup=False)
    for n, e, _ in rows:
        for w in e.get("cache_warnings", []):
            console.print(f"  warning: {n}: {w}", highlight=False, markup=False)
        if e.get("slow_rank"):
            console.print(f"  {n}: {e['slow_rank']}", highlight=False, markup=False)


def _print_fastest(console: Console, rows: list[dict[str, Any]]) -> None:
    """The fastest-start table: each arm's time to first step as a new job meets it, its phases (a text
    waterfall: . load artifact, b build, m apply mode, d dynamo, a AOT autograd, k backend, r rest of
    step 1), steady step and cost vs full compile, and when it reaches steps 100 and 10k."""

    t = Table(
        title="fastest start (each arm a fresh process; job first step = load + build + mode + step 1)",
        title_justify="left",
    )
    for c in (
        "arm",
        "job first step s",
        "waterfall .bmdakr",
        "load",
        "build",
        "mode",
        "dynamo",
        "aot",
        "backend",
        "rest",
        "steady s",
        "vs compile",
        "step 100 s",
        "step 10k s",
    ):
        t.add_column(c, justify="left" if c in ("arm", "waterfall .bmdakr") else "right", no_wrap=True)
    for row in rows:
        ph = row.get("phases") or {}
        t.add_row(
            row["arm"],
            fmt(row["job_ttfs_s"]),
            arms.waterfall(ph, 24),
            *[
                fmt(ph.get(k))
                for k in (
                    "load_artifact_s",
                    "build_s",
                    "apply_mode_s",
                    "dynamo_s",
                    "aot_autograd_s",
                    "backend_s",
                    "run_s",
                )
            ],
            fmt(row["step_s"]),
            _x(row["steady_vs_full_compile"]),
            fmt(row["reach_s"]["100"]),
            fmt(row["reach_s"]["10000"]),
        )
    print_wide(console, t, 170)  # a log or CI: wider, unfolded


def _int(v: float | None) -> int | None:
    return int(v) if v is not None else None


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


# ---- the backend scorecard (`bringup compare`) -----------------------------------------------------
def scorecard(results: list[CaseResult]) -> list[tuple[str, str]]:
    """Per arm: time to first step, steady tokens/s, MFU; the fallbacks and host reads of a step."""
    runs = sorted(
        (r for r in results if not r.params.get("flops_only")),
        key=lambda r: MODE_ORDER.get((r.params.get("mode"), r.params.get("cache")), 99),
    )
    if not runs:
        return []

    def per_arm(metric: str, fmt: Any) -> str:
        parts = []
        for r in runs:
            v = r.value(metric)
            arm = label(TrainSpec.from_params(r.params))
            parts.append(f"{arm} {fmt(v) if v is not None else r.status.value}")
        return "; ".join(parts)

    rows = [
        ("train status", "; ".join(f"{label(TrainSpec.from_params(r.params))} {r.status.value}" for r in runs)),
        ("first step s", per_arm("ttfs_s", lambda v: f"{v:.3g}")),
        ("tokens/s", per_arm("tokens_per_s", lambda v: f"{v:,.0f}")),
        ("MFU", per_arm("mfu", lambda v: f"{v:.2%}")),
    ]
    peak = next((r for r in runs if r.value("peak_flops")), None)
    if peak is not None:
        rows.append(("peak FLOP/s", f"{peak.value('peak_flops'):.3g} ({peak.fields.get('peak_flops_source', '?')})"))
    eager = next((r for r in runs if r.params.get("mode") == "eager"), None)
    if eager is not None and "fallback_ops" in eager.fields:
        fb = eager.fields["fallback_ops"] or {}
        ops = ": " + ", ".join(sorted(fb)[:4]) if fb else ""
        rows.append(("fallbacks in a train step", f"{len(fb)} op(s){ops}"))
    if eager is not None and eager.fields.get("host_reads_per_step"):
        n = sum(eager.fields["host_reads_per_step"].values())
        rows.append(("host reads in a train step", f"{n} (the model's own .item()-style reads)"))
    return rows
