"""The zoo's terminal summary: one row per model, then the totals (config failures counted apart) and, with
--baseline, what was compared with the bundle."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.table import Table

from bringup.case import CaseResult, Status
from bringup.console import rich_esc, styled
from bringup.errors import BadInput
from bringup.zoo.baseline import bundle_names

if TYPE_CHECKING:
    from rich.console import Console


def failure_reason(r: CaseResult) -> str:
    """The reason class of a non-pass: what failed (config, reference, eager, compiled, baseline) or,
    for runner statuses, the status itself (budget, crash, oom)."""
    if r.status is Status.PASS:
        return ""
    head = r.reason.split(":", 1)[0].strip() if ":" in r.reason else ""
    if head in ("config", "reference", "eager", "compiled", "baseline"):
        return head
    return r.status.value


def _fmt_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)) or n <= 0:
        return "-"
    return f"{n / 2**20:.0f}M"


def _fmt_count(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e4:
        return f"{n / 1e3:.0f}k"
    return str(int(n))


def _fmt_small(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return "0" if v == 0 else ("inf" if not math.isfinite(v) else f"{v:.0e}")


def _len_or_none(v: Any) -> int | None:
    return None if v is None else len(v)


def _fmt_secs(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, (int, float)) else "-"


# the table's columns: (header, justification, the cell of a result)
_COLUMNS: list[tuple[str, str, Callable[[CaseResult], str]]] = [
    ("model", "left", lambda r: r.name),
    ("status", "left", lambda r: styled(r.status)),
    ("params", "right", lambda r: _fmt_count(r.fields.get("params"))),
    ("breaks", "right", lambda r: _fmt_count(r.fields.get("graph_breaks"))),
    ("fallbk", "right", lambda r: _fmt_count(_len_or_none(r.fields.get("fallback_ops")))),
    ("rel err", "right", lambda r: _fmt_small(r.fields.get("max_rel_err"))),
    ("loss dev", "right", lambda r: _fmt_small(r.fields.get("loss_divergence"))),
    ("comp s", "right", lambda r: _fmt_secs(r.fields.get("compile_s"))),
    ("wall s", "right", lambda r: f"{r.wall_s:.0f}"),
    ("peak", "right", lambda r: _fmt_bytes(r.fields.get("peak_mem_bytes"))),
    ("reason", "left", lambda r: rich_esc(r.reason[:160])),
]


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    """The table, then the totals line (and the baseline's); returns the totals for the run's JSON."""
    console.print(_table(results, console))
    extras = _totals(results)
    totals, by_status, by_reason = extras["totals"], extras["by_status"], extras["by_reason"]
    console.print(
        f"zoo: {len(results)} model(s), {totals['built']} built ({totals['config_fail']} config failures, counted "
        f"apart); {by_status.get('pass', 0)}/{totals['judged']} judged pass; by status: "
        + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
        + ("; by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(by_reason.items())) if by_reason else ""),
        highlight=False,
        markup=False,
    )
    base = extras.get("baseline")
    if base:
        console.print(
            f"baseline {base['bundle']}: {base['compared']} compared, {base['differs']} differ; missing "
            f"in the bundle: {', '.join(base['missing_in_bundle']) or 'none'}; missing in this run: "
            f"{', '.join(base['missing_in_run']) or 'none'}",
            highlight=False,
            markup=False,
        )
    return extras


def _table(results: list[CaseResult], console: Console) -> Table:
    """One row per model; the fallback column only where something could fall back (not cpu: the JSON still has
    fallback_ops, null), peak memory and compile seconds left to the JSON on a narrow terminal."""
    cols = _COLUMNS
    if not any(r.fields.get("fallback_ops") is not None for r in results):
        cols = [c for c in cols if c[0] != "fallbk"]
    if (getattr(console, "width", 200) or 200) < 130:
        cols = [c for c in cols if c[0] not in ("peak", "comp s")]
    t = Table(title="zoo", title_justify="left", pad_edge=False, collapse_padding=True)
    for col, just, _ in cols:
        t.add_column(
            col,
            justify=just,  # type: ignore[arg-type]  # a rich JustifyMethod literal from the column table
            overflow="fold",
            no_wrap=col not in ("reason", "model"),
            max_width=24 if col == "model" else None,
            min_width=16 if col == "reason" else None,
        )
    for r in results:
        t.add_row(*(fn(r) for _, _, fn in cols))
    return t


def _totals(results: list[CaseResult]) -> dict[str, Any]:
    """Models, built, config failures (counted apart), judged, passes; by status, by reason, graph breaks; the
    baseline's summary when there is one."""
    by_status = Counter(r.status.value for r in results)
    by_reason = Counter(failure_reason(r) for r in results if r.status is not Status.PASS)
    config_fail = by_reason.get("config", 0)
    judged = [r for r in results if r.status is not Status.REF_FAIL]
    extras: dict[str, Any] = {
        "totals": {
            "models": len(results),
            "built": len(results) - config_fail,
            "config_fail": config_fail,
            "judged": len(judged),
            "pass": by_status.get("pass", 0),
            "pass_rate": round(by_status.get("pass", 0) / len(judged), 4) if judged else None,
        },
        "by_status": dict(sorted(by_status.items())),
        "by_reason": dict(sorted(by_reason.items())),
        "graph_breaks_total": sum(int(r.fields.get("graph_breaks") or 0) for r in results),
    }
    base = _baseline_summary(results)
    if base:
        extras["baseline"] = base
    return extras


def _baseline_summary(results: list[CaseResult]) -> dict[str, Any] | None:
    paths = {str((r.params.get("baseline") or {}).get("path")) for r in results if r.params.get("baseline")}
    if not paths:
        return None
    path = sorted(paths)[0]
    ours = {r.name for r in results}
    try:
        theirs = bundle_names(path)
    except BadInput:
        theirs = set()
    st = [((r.fields.get("baseline_check") or {}).get("status") or "") for r in results]
    return {
        "bundle": path,
        "compared": sum(s in ("ok", "differs") for s in st),
        "differs": sum(s == "differs" for s in st),
        "missing_in_bundle": sorted(r.name for r in results if (r.params.get("baseline") or {}).get("found") is False),
        "missing_in_run": sorted(theirs - ours),
    }
