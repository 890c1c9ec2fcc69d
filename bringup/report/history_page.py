"""The history page: one self-contained HTML file (the scorecard's CSS, JS and page shell; SVG plots; no
CDN) with the trend lines of bringup/report/history.py and their moves.

Sections: the header (sources, filters, runs, machines, the rule), moves (newest first, each named
with the run and what changed since the line's run before), pass rate per suite, one section per case
metric (tokens/s, MFU, the two first-step figures), the runs (a sortable table, each run's scorecard
linked where it sits next to its store), and the data as JSON (`<script id="bringup-history">`). Every
path in it is relative or named (bringup/report/portable.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bringup.outcomes import outcome_line
from bringup.report import bug_history, plots
from bringup.report.history import MAX_LINES, METRICS, History, Line, NamedMove, StoredRun, named_moves
from bringup.report.html import fmt_time, json_for_script, page_html, section
from bringup.report.plots import TrendPoint, esc, fmt_num
from bringup.report.portable import Portable, here, portable, recorded_run_dir
from bringup.report.trend import PASS_RATE, TIMING

TITLES = {"pass_rate": "pass rate", **dict(METRICS)}


def value_text(v: float, unit: str) -> str:
    if unit == "%":
        return f"{v:.1f}%" if abs(v) >= 1 or v == 0 else f"{v:.3g}%"
    return f"{fmt_num(v)} {unit}".strip()


def _short(sha: Any) -> str:
    return str(sha)[:10] if sha else "not recorded"


def run_label(sr: StoredRun) -> str:
    return f"#{sr.n} {sr.run.run_id}"


def point_title(line: Line, sr: StoredRun, value: float, detail: str) -> str:
    extra = f"; {detail}" if detail else ""
    return (
        f"{run_label(sr)} ({fmt_time(sr.run.started_at)}), {sr.machine}, torch {sr.run.torch_version}: "
        f"{TITLES.get(line.chart, line.chart)} {value_text(value, line.unit)}{extra}"
    )


def move_text(m: NamedMove) -> str:
    ln, mv = m.line, m.move
    rel = f" ({mv.relative:+.0%})" if mv.relative is not None and ln.chart != "pass_rate" else ""
    what = {
        "moved": "moved" if mv.confirmed else "moved (latest run: not confirmed yet)",
        "outlier": "one-run outlier (the next run is back)",
    }[mv.kind]
    since = (
        "; ".join(m.changed)
        if m.changed
        else (
            "nothing recorded changed since the run before (same torch, bringup and libraries)"
            if m.recorded
            else "nothing changed in the versions recorded (commits not recorded by these runs)"
        )
    )
    return (
        f"{TITLES.get(ln.chart, ln.chart)}, {ln.suite} / {ln.label}: "
        f"{value_text(mv.before, ln.unit)} → {value_text(mv.value, ln.unit)}{rel}"
        f"{', ' + m.direction if m.direction else ''} — {what}, at run {run_label(m.at)} "
        f"({fmt_time(m.at.run.started_at)}); since run #{m.before.n}: {since}"
    )


def chart(lines: Sequence[Line], title: str, ticks: Sequence[tuple[float, str]], ylabel: str) -> str:
    shown = sorted(lines, key=lambda ln: (-len(ln.points), ln.label))[:MAX_LINES]
    series: dict[str, list[TrendPoint]] = {}
    for ln in shown:
        marks = {mv.index: mv.kind for mv in ln.moves}
        series[ln.label] = [
            TrendPoint(sr.n, v, point_title(ln, sr, v, d), marks.get(i, ""), sr.run.run_id)
            for i, (sr, v, d) in enumerate(ln.points)
        ]
    pct = ylabel == "%"
    svg = plots.trend_chart(
        series,
        title,
        ylabel,
        ticks,
        "run (numbered in start order; table below)",
        y_bounds=(0.0, 100.0) if pct else (None, None),
    )
    left = [ln.label for ln in lines if ln not in shown]
    note = (
        f'<p class="muted">{len(left)} more line(s) not drawn: {esc(", ".join(left))}. '
        "Narrow with --suite or --device.</p>"
        if left
        else ""
    )
    return f'<div class="trend" data-chart="{esc(title)}">{svg}{note}</div>'


def charts_section(area: str, title: str, lines: Sequence[Line], ticks: Sequence[tuple[float, str]], what: str) -> str:
    if not lines:
        return section(area, title, f'<p class="empty">No {esc(what)} recorded by the runs shown.</p>')
    by_suite: dict[str, list[Line]] = {}
    for ln in lines:
        by_suite.setdefault(ln.suite, []).append(ln)
    unit = lines[0].unit
    body = [chart(ls, f"{what}: {suite}", ticks, unit) for suite, ls in sorted(by_suite.items())]
    return section(area, title, f'<div class="plots">{"".join(body)}</div>')


def moves_section(moves: Sequence[NamedMove]) -> str:
    rule = (
        f'<p class="muted">The rule: {esc(TIMING.describe())} (timings and throughputs); pass rates '
        f"the same without the floor. Why these numbers: docs/report.md.</p>"
    )
    if not moves:
        return section("moves", "Moves beyond the noise", rule + '<p class="empty">No line moved beyond its noise.</p>')
    items = []
    for m in moves:
        cls = f"move {m.move.kind} {m.direction}".strip()
        items.append(
            f'<li class="{esc(cls)}" data-run="{esc(m.at.run.run_id)}" data-chart="{esc(m.line.chart)}">'
            f"{esc(move_text(m))}</li>"
        )
    return section(
        "moves",
        f"Moves beyond the noise ({sum(m.move.kind == 'moved' for m in moves)})",
        rule + f'<ul class="moves">{"".join(items)}</ul>',
    )


def runs_table(runs: Sequence[StoredRun], out_dir: Path | None) -> str:
    head = (
        "#",
        "started",
        "machine",
        "device name",
        "torch",
        "torch commit",
        "bringup",
        "bringup commit",
        "run",
        "command",
        "outcome",
        "source",
        "scorecard",
    )
    rows = []
    for sr in runs:
        link = "-"
        if sr.report is not None and out_dir is not None:
            href = os.path.relpath(sr.report.absolute(), out_dir)
            link = f'<a href="{esc(href)}">report</a>'
        cells = [
            str(sr.n),
            fmt_time(sr.run.started_at),
            sr.machine,
            sr.run.device_name,
            sr.run.torch_version,
            _short(sr.build.get("torch_git")),
            sr.run.bringup_version,
            _short(sr.build.get("bringup_git")),
            sr.run.run_id,
            sr.run.command,
            outcome_line(sr.results),
            sr.source,
        ]
        tds = "".join(f'<td data-v="{esc(sr.n) if i == 0 else esc(c)}">{esc(c)}</td>' for i, c in enumerate(cells))
        rows.append(f'<tr data-run="{esc(sr.run.run_id)}">{tds}<td>{link}</td></tr>')
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
    return (
        f'<table class="data sortable" id="tbl-runs"><thead><tr>{ths}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def header(h: History) -> str:
    machines = sorted({sr.machine for sr in h.runs})
    torches = sorted({sr.run.torch_version for sr in h.runs})
    left = ", ".join(f"{n} {why}" for why, n in h.skipped.items() if n)
    rows = [
        ("sources", ", ".join(h.sources)),
        ("runs", f"{len(h.runs)} of {h.seen}" + (f" ({left})" if left else "")),
        ("machines", ", ".join(machines)),
        ("torch", ", ".join(torches)),
        ("filters", h.filters.describe()),
        ("span", f"{fmt_time(h.runs[0].run.started_at)} … {fmt_time(h.runs[-1].run.started_at)}"),
    ]
    kv = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    return (
        f'<header class="top" id="sec-header"><h1>bringup history: {esc(", ".join(machines))}</h1>'
        f'<table class="kv">{kv}</table></header>'
    )


def page_data(h: History, moves: Sequence[NamedMove]) -> dict[str, Any]:
    return {
        "rule": {"timing": TIMING.__dict__, "pass_rate": PASS_RATE.__dict__},
        "filters": h.filters.__dict__,
        "runs": [
            {
                "n": sr.n,
                "run_id": sr.run.run_id,
                "source": sr.source,
                "machine": sr.machine,
                "device": sr.run.device,
                "device_name": sr.run.device_name,
                "host": sr.run.host,
                "torch": sr.run.torch_version,
                "bringup": sr.run.bringup_version,
                "build": sr.build,
                "versions": sr.versions,
                "started_at": sr.run.started_at,
                "command": sr.run.command,
            }
            for sr in h.runs
        ],
        "lines": [
            {
                "chart": ln.chart,
                "suite": ln.suite,
                "label": ln.label,
                "unit": ln.unit,
                "points": [[sr.n, v] for sr, v, _ in ln.points],
            }
            for ln in h.lines
        ],
        "moves": [
            {
                "chart": m.line.chart,
                "suite": m.line.suite,
                "line": m.line.label,
                "run": m.at.run.run_id,
                "n": m.at.n,
                "kind": m.move.kind,
                "confirmed": m.move.confirmed,
                "before": m.move.before,
                "value": m.move.value,
                "direction": m.direction,
                "changed": list(m.changed),
            }
            for m in moves
        ],
    }


def travel(h: History, out_dir: Path | None) -> Portable:
    recorded = [sr.run.info["paths"] for sr in h.runs if isinstance(sr.run.info.get("paths"), dict)]
    dirs = [d for sr in h.runs if (d := recorded_run_dir(sr.run.info)) is not None]
    return portable(None, out_dir, dirs, [*recorded, here()])


def render(h: History, out_dir: Path | None = None) -> str:
    ticks = [(float(sr.n), f"#{sr.n}") for sr in h.runs]
    moves = named_moves(h.lines)
    sections = [
        moves_section(moves),
        charts_section(
            "pass_rate", "Pass rate per suite", [ln for ln in h.lines if ln.chart == "pass_rate"], ticks, "pass rate"
        ),
    ]
    for name, title in METRICS:
        lines = [ln for ln in h.lines if ln.chart == name]
        sections.append(charts_section(name, title[0].upper() + title[1:], lines, ticks, title))
    sections.append(bug_history.section_html(h.runs))  # the bug groups followed over the runs
    sections.append(section("runs", f"Runs ({len(h.runs)})", runs_table(h.runs, out_dir)))
    toc = "".join(
        f'<a href="#sec-{esc(a)}">{esc(t)}</a>'
        for a, t in [("moves", "moves"), ("pass_rate", "pass rate"), *METRICS, ("bugs", "bugs"), ("runs", "runs")]
    )
    body = "".join(
        [
            header(h),
            f'<nav class="toc">{toc}</nav><main>',
            *sections,
            "</main>",
            f"<footer>Generated by bringup from {len(h.runs)} stored run(s) on {esc(fmt_time(time.time()))}. "
            "Self-contained: no network access needed.</footer>",
            f'<script type="application/json" id="bringup-history">{json_for_script(page_data(h, moves))}</script>',
        ]
    )
    title = f"bringup history: {', '.join(sorted({sr.machine for sr in h.runs}))}"
    return page_html(title, body, travel(h, out_dir))
