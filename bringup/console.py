"""Rich tables for the terminal."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from bringup.case import CaseResult, Status
from bringup.outcomes import outcome_line

STATUS_STYLE = {
    Status.PASS: "green",
    Status.REF_FAIL: "dim",
    Status.UNSUPPORTED: "yellow",
    Status.FALLBACK: "yellow",
    Status.BUDGET: "magenta",
    Status.SILENT_EAGER: "magenta",
}


def make_console(stderr: bool = False) -> Console:
    """Rich wraps piped output at 80 columns, which folds the wide suite tables (train) and the
    per-case progress lines; a log or a CI console gets 160 unless COLUMNS says otherwise, and lines
    are never hard-wrapped."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 160
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


def print_wide(console: Console, renderable: Any, min_width: int) -> None:
    """Print a wide table at least `min_width` columns wide when the console is no terminal (a log, CI:
    no terminal width to respect; don't fold the numbers); a terminal keeps its own width."""
    width = console.width
    if not console.is_terminal:
        console.width = max(width, min_width)
    try:
        console.print(renderable)
    finally:
        console.width = width


def styled(status: Status) -> str:
    return f"[{STATUS_STYLE.get(status, 'red')}]{status.value}[/]"


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0 or 1e-3 <= abs(v) < 1e6:
        return f"{v:.4g}"
    return f"{v:.3g}"


def case_table(title: str, results: Iterable[CaseResult], metric_cols: list[str]) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("case")
    t.add_column("status", no_wrap=True)
    for m in metric_cols:
        t.add_column(m, justify="right")
    t.add_column("wall s", justify="right")
    t.add_column("reason", overflow="fold", max_width=70)
    for r in results:
        vals = [fmt(r.metrics[m].value) if m in r.metrics else "-" for m in metric_cols]
        t.add_row(r.name, styled(r.status), *vals, f"{r.wall_s:.1f}", rich_esc(short_reason(r.reason)))
    return t


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def short_reason(reason: str, limit: int = 60) -> str:
    """The first line of a reason, clipped: a table row stays one line (the full text is in the store
    and the HTML report)."""
    return clip(reason.strip().splitlines()[0] if reason.strip() else "", limit)


def totals(results: Iterable[CaseResult]) -> dict[str, int]:
    c = Counter(r.status.value for r in results)
    return {s.value: c[s.value] for s in Status if c[s.value]}


def unjudged_suites(results: Iterable[CaseResult]) -> list[str]:
    """Suites that ran cases but judged none: every case is `ref_fail` (the cpu reference itself failed),
    so the suite says nothing about the device. Such a suite is not green: the run exits 1 for it."""
    by_suite: dict[str, list[Status]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r.status)
    return [s for s, st in by_suite.items() if st and all(x is Status.REF_FAIL for x in st)]


def unjudged_line(suites: list[str]) -> str:
    return (
        f"nothing judged in {', '.join(suites)}: every case is ref_fail (the cpu reference failed), "
        "so the device was not checked there"
    )


def totals_line(results: list[CaseResult]) -> str:
    """'48/53 pass; 5 gaps, 0 failures (48 pass, 5 unsupported)': the outcome words of the page's
    headline (bringup/outcomes.py), then the counts by status."""
    t = totals(results)
    if not t:
        return "no cases"
    line = f"{outcome_line(results)} ({', '.join(f'{n} {s}' for s, n in t.items())})"
    if none := unjudged_suites(results):
        line += f"; {unjudged_line(none)}"
    return line


def run_line(run_id: str, device: str, device_name: str, n_cases: int, db: object) -> str:
    """The line a run starts with: 'run <id> on cpu (<device name>): 53 case(s); results in <db>'."""
    return f"run {run_id} on {device} ({device_name}): {n_cases} case(s); results in {db}"


def progress_line(i: int, n: int, r: CaseResult) -> str:
    """'[14/53] probe/sdpa.CUDNN_ATTENTION: unsupported (<reason>)': one finished case (plain text)."""
    line = f"[{i}/{n}] {r.suite}/{r.name}: {r.status.value}" + (f" ({r.reason})" if r.reason else "")
    rerun = r.fields.get("rerun")
    return line + (f" [re-run clean: {rerun.get('why')}]" if isinstance(rerun, dict) else "")


def final_line(run_id: str, results: list[CaseResult]) -> str:
    """The run's last verdict line (rich markup): the totals, then the run id."""
    return f"[bold]{totals_line(results)}[/]  (run {run_id})"


def rich_esc(s: str) -> str:
    """`s` with rich markup escaped (for text printed through a rich console); HTML escaping is
    bringup.report.plots.esc."""
    from rich.markup import escape

    return escape(s)
