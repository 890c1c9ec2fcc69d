"""zoo's HTML section: a sortable, filterable table of models (graph breaks, fallback ops, parity,
loss divergence, baseline comparison) and the failures grouped by reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from bringup.api import Page
from bringup.case import CaseResult, Status, is_failure
from bringup.hub import section as hub_section
from bringup.report import plots
from bringup.report.html import (
    Col,
    col_num,
    col_reason,
    col_status,
    col_text,
    counts_line,
    data_table,
    filter_bar,
    fmt,
    fmt_bytes,
    listish,
    metric,
    seconds,
)
from bringup.report.plots import esc


def _count(r: CaseResult, name: str) -> float | None:
    v = metric(r, name)
    if v is None and isinstance(r.fields.get(name), (list, dict)):
        return float(len(r.fields[name]))
    return v


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    if not results:
        return None
    rs = list(results)

    def listcell(title: str, key: str, count_key: str | None = None) -> Col:
        def cell(r: CaseResult) -> tuple[str, Any]:
            items = listish(r.fields.get(key))
            n = _count(r, count_key) if count_key else float(len(items))
            if not items:
                return ("-" if n is None else esc(fmt(n))), ("" if n is None else repr(n))
            shown = esc(fmt(n)) if count_key and n is not None else str(len(items))
            lis = "".join(f"<li>{esc(x)}</li>" for x in items[:50])
            more = f"<li>... {len(items) - 50} more</li>" if len(items) > 50 else ""
            return f"<details><summary>{shown}</summary><ul>{lis}{more}</ul></details>", repr(n or len(items))

        return Col(title, cell, numeric=True)

    cols = [
        col_text("model", lambda r: r.name),
        col_status(),
        col_num("params", lambda r: metric(r, "params"), plots.fmt_num),
        listcell("graph breaks", "break_reasons", "graph_breaks"),
        listcell("fallback ops", "fallback_ops"),
        col_num("max rel err", lambda r: metric(r, "max_rel_err")),
        col_num("loss divergence", lambda r: metric(r, "loss_divergence")),
        col_num("compile s", lambda r: seconds(r, "compile_s")),
        col_num("wall s", lambda r: r.wall_s),
        col_num("peak mem", lambda r: metric(r, "peak_mem_bytes"), fmt_bytes),
        col_text("baseline", _baseline),
        col_reason("error"),
    ]

    def attrs(r: CaseResult) -> dict[str, str]:
        gb = _count(r, "graph_breaks") or 0
        fb = len(listish(r.fields.get("fallback_ops"))) or (metric(r, "fallback_ops") or 0)
        return {"gb": "1" if gb > 0 else "0", "fb": "1" if fb > 0 else "0", "err": "1" if r.error or r.reason else "0"}

    body = [counts_line(rs)]
    hub = hub_section.hub_summary(page)
    if hub is not None:  # a Hub sweep: the answer per id first (hub/section.py)
        body.insert(0, hub_section.render(hub, page))
    reasons = Counter(_reason_key(r) for r in rs if is_failure(r.status) or r.status is Status.REF_FAIL)
    if reasons:
        lis = "".join(f"<li>{n} x {esc(k)}</li>" for k, n in reasons.most_common(15))
        body.append(f"<details><summary>failures by reason ({sum(reasons.values())})</summary><ul>{lis}</ul></details>")
    body.append(filter_bar("tbl-zoo", rs, [("gb", "graph breaks"), ("fb", "fallback ops"), ("err", "has error")]))
    body.append(data_table("tbl-zoo", cols, rs, attrs))
    return "".join(body)


def _baseline(r: CaseResult) -> str | None:
    """The zoo's comparison with a --baseline bundle, when the run had one."""
    bl = r.fields.get("baseline_check")
    if not isinstance(bl, dict):
        return None
    return str(bl.get("status") or "compared")


def _reason_key(r: CaseResult) -> str:
    line = (r.reason or r.error.strip().splitlines()[-1:] and r.error.strip().splitlines()[-1] or "").strip()
    return f"{r.status.value}: {line[:90]}" if line else r.status.value
