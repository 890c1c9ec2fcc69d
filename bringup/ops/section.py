"""ops' HTML section: a dtype x status pivot and the filterable op table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from bringup.api import Page
from bringup.case import CaseResult
from bringup.report.kit import (
    STATUS_ORDER,
    badge,
    col_num,
    col_reason,
    col_status,
    col_text,
    counts_line,
    data_table,
    esc,
    filter_bar,
    get,
    listish,
    metric,
)


# -- ops
def render(results: Sequence[CaseResult], page: Page) -> str | None:
    if not results:
        return None
    rs = list(results)
    cols = [
        col_text("op", lambda r: get(r, "op") or r.name),
        col_text("dtype", lambda r: get(r, "dtype")),
        col_status(),
        col_num("samples", lambda r: metric(r, "samples"), lambda v: f"{v:.0f}"),
        col_text("CPU-fallback ops", lambda r: ", ".join(listish(r.fields.get("fallback_ops"))) or None),
        col_num("max abs err", lambda r: metric(r, "max_abs_err")),
        col_reason(),
    ]
    by_dtype: dict[str, Counter[str]] = {}
    for r in rs:
        by_dtype.setdefault(str(get(r, "dtype") or "-"), Counter())[r.status.value] += 1
    present = [s for s in STATUS_ORDER if any(r.status.value == s for r in rs)]
    pivot = ['<table class="data"><thead><tr><th>dtype</th>']
    pivot += [f'<th class="num">{badge(s)}</th>' for s in present] + ["</tr></thead><tbody>"]
    for d, c in by_dtype.items():
        pivot.append(f"<tr><td>{esc(d)}</td>" + "".join(f'<td class="num">{c[s]}</td>' for s in present) + "</tr>")
    pivot.append("</tbody></table>")
    body = [counts_line(rs), "".join(pivot), filter_bar("tbl-ops", rs), data_table("tbl-ops", cols, rs)]
    return "".join(body)
