"""train's HTML section: the seeds' table (first step, steady step, tok/s, MFU, speed-up), loss curves
and the time-to-first-step bars with compile phases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bringup.api import Page
from bringup.case import CaseResult, Status
from bringup.report import plots
from bringup.report.kit import (
    badge,
    col_num,
    col_reason,
    col_status,
    col_text,
    counts_line,
    data_table,
    esc,
    fmt,
    fmt_bytes,
    get,
    metric,
    mfu_percent,
    num,
    seconds,
)

# -- train
_MODE_ORDER = {"eager": 0, "compile": 1, "regional": 2, "nested": 3, "aot": 4}
_CACHE_ORDER = {"": 0, "cold": 1, "warm": 2, "artifact": 3}
_PHASES = {
    "load_artifact_s": "load artifact",
    "build_s": "build",
    "apply_mode_s": "apply mode",
    "dynamo_s": "dynamo",
    "aot_autograd_s": "AOT autograd",
    "backend_s": "backend",
    "run_s": "step 1 (rest)",
}


def job_bars(results: Sequence[CaseResult]) -> list[tuple[str, list[tuple[str, float]]]]:
    """Each arm's time to first step as a new job meets it (fields["ttfs_phases"]): its waterfall."""
    bars = []
    for r in results:
        ph = r.fields.get("ttfs_phases")
        if isinstance(ph, dict) and r.status is Status.PASS:
            bars.append((train_label(r), [(str(_PHASES.get(k, k)), float(v)) for k, v in ph.items() if num(v)]))
    return bars


def train_label(r: CaseResult) -> str:
    mode = str(get(r, "mode") or r.name)
    cache = get(r, "cache")
    nproc = get(r, "nproc")
    label = mode if not cache or cache == "none" or (mode == "eager" and cache == "cold") else f"{mode} ({cache})"
    dynamic = get(r, "dynamic")
    label += f" dynamic {dynamic}" if dynamic and dynamic != "auto" and mode != "eager" else ""
    return label + (f" x{nproc}" if isinstance(nproc, int) and nproc > 1 else "")


def _train_key(r: CaseResult) -> tuple[Any, ...]:
    mode, cache = str(get(r, "mode") or r.name), str(get(r, "cache") or "")
    return (_MODE_ORDER.get(mode, 9), mode, _CACHE_ORDER.get(cache, 9), cache, r.name)


def compile_phases(r: CaseResult) -> list[tuple[str, float]]:
    """Compile phase seconds: fields["compile_breakdown"] (phase -> s) or metrics named compile_* (not the
    totals compile_s / *total*)."""
    bd = r.fields.get("compile_breakdown")
    out: list[tuple[str, float]] = []
    if isinstance(bd, dict) and bd:
        for k, v in bd.items():
            f = num(v)
            if f is not None and "total" not in str(k):
                out.append((str(k).removesuffix("_s").replace("_", " "), f))
        return out
    for name in r.metrics:
        if name.startswith("compile_") and name != "compile_s" and not any(w in name for w in ("total", "after")):
            v = seconds(r, name)
            if v is not None:
                label = name.removeprefix("compile_").removesuffix("_s").replace("_", " ")
                out.append((label, v))
    return out


REST = "first step run (rest)"
# The two first-step figures, named apart (the in-process one is often 20x shorter for eager: it starts
# with the model already built), with what each counts.
FIRST_IN_WORKER = "first step in the suite's worker"
FIRST_AS_JOB = "first step as a new job"
FIRST_STEP_NOTE = (
    f"{FIRST_IN_WORKER}: step 1 alone in the case's worker process, its compile included, the "
    f"model already built and the mode applied. {FIRST_AS_JOB}: what a fresh process waits "
    "for: artifact load + model build + applying the mode + step 1."
)


def ttfs_bars(results: Sequence[CaseResult]) -> list[tuple[str, list[tuple[str, float]]]]:
    bars = []
    for r in results:
        ttfs = seconds(r, "ttfs_s")
        if ttfs is None:
            continue
        phases = compile_phases(r)
        rest = ttfs - sum(v for _, v in phases)
        segs = [(f"compile: {k}", v) for k, v in phases]
        segs.append((REST, max(rest, 0.0)))
        bars.append((train_label(r), segs))
    return bars


def _train_setup(r: CaseResult) -> str:
    """model: params, FLOPs/token; batch x seq x ranks, dtype; the MFU peak and its source."""
    parts = [str(get(r, "model") or "?")]
    n, f = metric(r, "params"), metric(r, "flops_per_token")
    if n:
        parts.append(f"{plots.fmt_num(n)} params")
    if f:
        parts.append(f"{f:.3g} FLOPs/token")
    shape = [f"{k} {r.params[k]}" for k in ("batch", "seq", "nproc", "dtype") if k in r.params]
    text = ", ".join(parts) + ("; " + ", ".join(shape) if shape else "")
    peak = metric(r, "peak_flops")
    if peak:
        text += f"; MFU against {peak:.3g} FLOP/s" + (
            f" ({r.fields['peak_flops_source']})" if r.fields.get("peak_flops_source") else ""
        )
    return text


@dataclass(frozen=True)
class _Eager:
    """The passing eager arm, the measure of the others' speed-up (None: there is none)."""

    r: CaseResult | None

    def speedup(self, r: CaseResult) -> float | None:
        e_tps = metric(self.r, "tokens_per_s") if self.r else None
        e_step = seconds(self.r, "step_s") if self.r else None
        tps = metric(r, "tokens_per_s")
        if e_tps and tps:
            return tps / e_tps
        step = seconds(r, "step_s")
        return e_step / step if e_step and step else None


def _ratio(r: CaseResult) -> float | None:
    v = metric(r, "first_over_steady")
    if v is None:
        t, s = seconds(r, "ttfs_s"), seconds(r, "step_s")
        v = t / s if t and s else None
    return v


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    if not results:
        return None
    flops_only = [r for r in results if get(r, "flops_only")]
    rs = sorted((r for r in results if not get(r, "flops_only")), key=_train_key)
    head = [f"<p>FLOPs only: {esc(_train_setup(r))} {badge(r.status)} {esc(r.reason)}</p>" for r in flops_only]
    if not rs:
        return "".join(head)
    eager = _Eager(next((r for r in rs if str(get(r, "mode")) == "eager" and r.status is Status.PASS), None))
    first = next((r for r in rs if "params" in r.metrics), rs[0])
    body = [
        *head,
        f'<p class="muted">{esc(_train_setup(first))}</p>',
        counts_line(rs),
        data_table("tbl-train", _columns(eager), rs),
        f'<p class="muted" id="train-first-step-note">{esc(FIRST_STEP_NOTE)}</p>',
    ]
    body += _advice(page.summary.get("train"))
    body += _fastest(rs, eager)
    body += _plots(rs, eager)
    return "".join(body)


def _columns(eager: _Eager) -> list[Any]:
    return [
        col_text("mode", train_label),
        col_status(),
        col_num(FIRST_IN_WORKER + " s", lambda r: seconds(r, "ttfs_s")),
        col_num(FIRST_AS_JOB + " s", lambda r: seconds(r, "job_ttfs_s")),
        col_num("steady step s", lambda r: seconds(r, "step_s")),
        col_num("ratio", _ratio, lambda v: f"{v:.1f}x"),
        col_num("tok/s", lambda r: metric(r, "tokens_per_s"), lambda v: f"{v:,.0f}"),
        col_num("tok/s/device", lambda r: metric(r, "tokens_per_s_per_device"), lambda v: f"{v:,.0f}"),
        col_num("MFU %", mfu_percent, lambda v: f"{v:.2f}"),
        col_num("speed-up vs eager", eager.speedup, lambda v: f"{v:.2f}x"),
        col_num("peak mem", lambda r: metric(r, "peak_mem_bytes"), fmt_bytes),
        col_num("graph breaks", lambda r: metric(r, "graph_breaks"), lambda v: f"{v:.0f}"),
        col_num("recompiles", lambda r: metric(r, "recompiles"), lambda v: f"{v:.0f}"),
        col_reason(),
    ]


def _advice(t_extra: Any) -> list[str]:
    """The summary's fast-start advice lines (capitalised)."""
    out = []
    for key in ("advice", "advice_steps"):
        text = t_extra.get(key) if isinstance(t_extra, dict) else None
        if isinstance(text, str) and text:
            out.append(f'<p class="summary-line">{esc(text[0].upper() + text[1:])}</p>')
    return out


def _fastest(rs: list[CaseResult], eager: _Eager) -> list[str]:
    """The passing compiled arm with the fastest first step, against eager."""
    fast = [
        r for r in rs if r.status is Status.PASS and seconds(r, "ttfs_s") is not None and str(get(r, "mode")) != "eager"
    ]
    if not fast:
        return []
    best = min(fast, key=lambda r: seconds(r, "ttfs_s") or 0.0)
    sp = eager.speedup(best)
    e_ttfs = seconds(eager.r, "ttfs_s") if eager.r else None
    return [
        f'<p class="summary-line">Fastest compiled start: {esc(train_label(best))}, {esc(FIRST_IN_WORKER)} '
        f"{esc(fmt(seconds(best, 'ttfs_s')))} s"
        + (f" (eager {esc(fmt(e_ttfs))} s)" if e_ttfs else "")
        + f"; steady {esc(fmt(seconds(best, 'step_s')))} s/step"
        + (f", {esc(f'{sp:.2f}')}x eager throughput" if sp else "")
        + "</p>"
    ]


def _plots(rs: list[CaseResult], eager: _Eager) -> list[str]:
    """Loss curves (and their difference to eager's), the first step's phases, the job waterfall; a note
    when the recorded compile phases overlap."""
    out = []
    losses = {train_label(r): r.series["loss"] for r in rs if r.series.get("loss")}
    plots_html = [plots.line_chart(losses, "Loss per step (same seed, same data)", "step", "loss")]
    ref = dict(eager.r.series.get("loss", [])) if eager.r else {}
    if eager.r is not None and ref and len(losses) > 1:
        dev = {
            label: [(s, v - ref[s]) for s, v in pts if s in ref]
            for label, pts in losses.items()
            if label != train_label(eager.r)
        }
        plots_html.append(plots.line_chart(dev, "Loss minus eager loss, per step", "step", "difference"))
    nested = [train_label(r) for r in rs if (seconds(r, "ttfs_s") or 0) * 1.02 < sum(v for _, v in compile_phases(r))]
    if nested:
        out.append(
            f'<p class="muted">compile phases add up to more than the first step for {esc(", ".join(nested))}'
            ": the recorded phases overlap (nested timers); their bars show the phases' sum.</p>"
        )
    in_worker = f"{FIRST_IN_WORKER[0].upper()}{FIRST_IN_WORKER[1:]}: compile phases + the rest of step 1"
    plots_html.append(plots.stacked_bars(ttfs_bars(rs), in_worker, "s", last=[REST], colours={REST: "#7f8c8d"}))
    if len(jb := job_bars(rs)) > 1:
        as_job = f"{FIRST_AS_JOB[0].upper()}{FIRST_AS_JOB[1:]}: each arm a fresh process (waterfall)"
        plots_html.append(plots.stacked_bars(jb, as_job, "s"))
    out.append(f'<div class="plots">{"".join(plots_html)}</div>')
    return out
