"""The toolkit report sections are written with: escaping, number formats, tables, section frames, links
to artifacts, and the charts (`plots`). A suite's section (bringup/<capability>/section.py, a plugin's)
imports what it needs from this one module; the page shell that puts sections together is
bringup/report/html.py.

Every string that came from a model, a file, a device or an exception goes through `esc` (html.escape,
quotes included) before it lands in the page, in text and in attributes alike.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.case import CaseResult, Status
from bringup.files import json_safe
from bringup.metrics import SECONDS, metric_spec
from bringup.report import plots
from bringup.report.plots import esc

__all__ = [
    "STATUS_ORDER", "Col", "Where", "badge", "col_metric", "col_num", "col_reason", "col_status", "col_text",
    "counts_line", "data_table", "dict_table", "esc", "filter_bar", "fmt", "fmt_bytes", "fmt_dur", "fmt_time",
    "generic_section", "get", "json_for_script", "kv_table", "listish", "metric", "mfu_percent", "none_here",
    "num", "plots", "section", "seconds", "shown",
]  # fmt: skip

STATUS_ORDER: tuple[str, ...] = tuple(s.value for s in Status)


# ---- small helpers -------------------------------------------------------------------------------
def fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return plots.fmt_num(float(v)) if abs(v) >= 1e4 or (v and abs(v) < 0.01) else f"{v:.{digits}g}"
    return str(v)


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(v) >= k:
            return f"{v / k:.3g} {unit}"
    return f"{v:.0f} B"


def fmt_dur(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 90:
        return f"{s:.1f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def fmt_time(t: float | None) -> str:
    if not t:
        return "-"
    return _dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def num(v: Any) -> float | None:
    """A finite float, or None (missing, NaN, inf, text)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            v = float(v)
        except (TypeError, ValueError):
            return None
    f = float(v)
    return f if f == f and abs(f) != float("inf") else None


def get(r: CaseResult, *keys: str) -> Any:
    """The first of `keys` found in the case's params, then fields, then metrics."""
    for k in keys:
        if k in r.params:
            return r.params[k]
        if k in r.fields:
            return r.fields[k]
        if k in r.metrics:
            return r.metrics[k].value
    return None


def metric(r: CaseResult, name: str) -> float | None:
    """A recorded metric by its catalogue name (or an older alias of it); fields are not metrics."""
    return num(r.value(name))


def seconds(r: CaseResult, name: str) -> float | None:
    """A duration metric in seconds, converted from the unit it was recorded in."""
    m = r.metrics.get(name)
    v = num(m.value) if m is not None else None
    if m is None or v is None:
        return None
    return SECONDS.get(m.unit, 1.0) * v


def shown(r: CaseResult, name: str) -> float | None:
    """A metric in its catalogue display unit (a "fraction" as a percentage). The unit the case recorded
    says what the number is: the catalogue's unit, or "" from bundles written before the catalogue (the
    same quantity), or "%" (already a percentage)."""
    m = r.metrics.get(name)
    v = num(m.value) if m is not None else None
    spec = metric_spec(name)
    if m is None or v is None or spec is None:
        return v
    if m.unit in (spec.unit, ""):
        return spec.display(v)
    return v if m.unit == "%" and spec.display_unit == "%" else None


def mfu_percent(r: CaseResult) -> float | None:
    return shown(r, "mfu")


def listish(v: Any) -> list[str]:
    """A field holding a list / dict / scalar of things as display strings."""
    if v is None:
        return []
    if isinstance(v, dict):
        return [f"{k} ({c})" if c not in (None, "", 1) else str(k) for k, c in v.items()]
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            if isinstance(x, dict):
                out.append(str(x.get("reason") or x.get("op") or x.get("name") or json.dumps(x, default=str)))
            else:
                out.append(str(x))
        return out
    return [str(v)]


def kv_table(d: dict[str, Any]) -> str:
    def show(v: Any) -> str:
        return json.dumps(v, default=str) if isinstance(v, (dict, list)) else fmt(v)

    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(show(v))}</td></tr>" for k, v in d.items())
    return f'<table class="kv">{rows}</table>'


def badge(status: Status | str) -> str:
    s = Status(status).value if isinstance(status, Status) else str(status)
    return f'<span class="st st-{esc(s)}">{esc(s)}</span>'


def json_for_script(data: Any) -> str:
    """JSON that is safe inside <script>: no '<', '>' or '&' can end the element or start a comment."""
    text = json.dumps(json_safe(data), default=str, allow_nan=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


@dataclass
class Col:
    """A table column: header, a cell function returning (html, sort key), numeric alignment."""

    title: str
    cell: Callable[[CaseResult], tuple[str, Any]]
    numeric: bool = False


def col_text(title: str, fn: Callable[[CaseResult], Any]) -> Col:
    def cell(r: CaseResult) -> tuple[str, Any]:
        v = fn(r)
        return ("-" if v in (None, "") else esc(v)), ("" if v is None else v)

    return Col(title, cell)


def col_num(title: str, fn: Callable[[CaseResult], float | None], show: Callable[[float], str] = fmt) -> Col:
    def cell(r: CaseResult) -> tuple[str, Any]:
        v = fn(r)
        return ("-", "") if v is None else (esc(show(v)), repr(float(v)))

    return Col(title, cell, numeric=True)


def col_status() -> Col:
    return Col("status", lambda r: (badge(r.status), STATUS_ORDER.index(r.status.value)))


def col_reason(title: str = "reason") -> Col:
    def cell(r: CaseResult) -> tuple[str, Any]:
        body = esc(r.reason) if r.reason else ""
        if r.error:
            body += f"<details><summary>traceback</summary><pre>{esc(r.error)}</pre></details>"
        return body or "-", r.reason

    return Col(title, cell)


def data_table(
    table_id: str,
    cols: Sequence[Col],
    rows: Iterable[CaseResult],
    row_attrs: Callable[[CaseResult], dict[str, str]] | None = None,
) -> str:
    """A sortable table; columns with no value in any row are left out (the first one always stays)."""
    rows = list(rows)
    cols = [c for i, c in enumerate(cols) if i == 0 or any(c.cell(r)[1] not in ("", None) for r in rows)]
    out = [f'<table class="data sortable" id="{esc(table_id)}"><thead><tr>']
    for c in cols:
        out.append(f'<th class="{"num" if c.numeric else ""}">{esc(c.title)}</th>')
    out.append("</tr></thead><tbody>")
    for r in rows:
        attrs = {"status": r.status.value, **(row_attrs(r) if row_attrs else {})}
        attr_s = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in attrs.items())
        out.append(f"<tr{attr_s}>")
        for c in cols:
            html_, key = c.cell(r)
            cls = ' class="num"' if c.numeric else (' class="reason"' if c.title in ("reason", "error") else "")
            out.append(f'<td{cls} data-v="{esc(key)}">{html_}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def filter_bar(table_id: str, results: Sequence[CaseResult], checks: Sequence[tuple[str, str]] = ()) -> str:
    """Status select, free-text search and checkboxes (name, label) matched against row data-NAME="1"."""
    present = [s for s in STATUS_ORDER if any(r.status.value == s for r in results)]
    opts = '<option value="">all statuses</option>' + "".join(
        f'<option value="{esc(s)}">{esc(s)}</option>' for s in present
    )
    boxes = "".join(f'<label><input type="checkbox" name="{esc(n)}"> {esc(lbl)}</label>' for n, lbl in checks)
    return (
        f'<form class="filters" data-table="{esc(table_id)}" role="search">'
        f'<label>status <select name="status">{opts}</select></label>'
        f'<input type="search" name="q" placeholder="filter by text (name, reason, error)" aria-label="text filter">'
        f'{boxes}<span class="shown"></span></form>'
    )


def counts_line(results: Sequence[CaseResult]) -> str:
    c = Counter(r.status.value for r in results)
    parts = [f"{badge(s)} {c[s]}" for s in STATUS_ORDER if c[s]]
    return f'<p class="counts-inline">{" ".join(f"<span>{p}</span>" for p in parts)}</p>' if parts else ""


def section(area: str, title: str, body: str) -> str:
    return f'<section id="sec-{esc(area)}" data-area="{esc(area)}"><h2>{esc(title)}</h2>{body}</section>'


def none_here(area: str) -> str:
    return f'<p class="empty">No {esc(area)} cases in this run (skipped, not planned, or not available).</p>'


# ---- verdicts --------------------------------------------------------------------------------------
def col_metric(name: str) -> Col:
    """A metric's column, formatted by its catalogue unit (bytes as KiB/MiB/GiB, a fraction as a
    percentage, the unit in the title); an uncatalogued metric as a plain number."""
    spec = metric_spec(name)
    if spec is None:
        return col_num(name, lambda r: metric(r, name))
    if spec.unit == "B":
        return col_num(spec.name, lambda r: metric(r, spec.name), fmt_bytes)
    title = f"{spec.name} ({spec.display_unit})" if spec.display_unit else spec.name
    return col_num(title, lambda r: shown(r, spec.name))


def generic_section(area: str, results: Sequence[CaseResult], title: str | None = None) -> str:
    if not results:
        return section(area, title or area, none_here(area))
    names: list[str] = []
    for r in results:
        for m in r.metrics:
            if m not in names:
                names.append(m)
    cols = [col_text("case", lambda r: r.name), col_status(), *(col_metric(m) for m in names[:10])]
    cols += [col_num("wall s", lambda r: r.wall_s), col_reason()]
    return section(area, title or area, counts_line(results) + data_table(f"tbl-{area}", cols, results))


@dataclass(frozen=True)
class Where:
    """Where the report goes (`out_dir`) and where the run's folder is now (`run_dir`), to link artifacts."""

    out_dir: Path | None = None
    run_dir: Path | None = None
    run_id: str = ""

    def locate(self, path: str) -> Path:
        """An artifact path as stored (absolute, or relative to the directory the run was started in)
        -> where it is now: re-rooted under the run's folder when it names that folder."""
        p = Path(path)
        if self.run_dir is not None and self.run_id and self.run_id in p.parts:
            moved = self.run_dir / Path(*p.parts[p.parts.index(self.run_id) + 1 :])
            if moved.exists() or not p.exists():
                return moved
        return p

    def link(self, path: str) -> str:
        """A relative link (from the page's folder; without one, from the run's folder), its text the same
        relative path: the stored absolute path stays in the store."""
        p = self.locate(path)
        base = self.out_dir if self.out_dir is not None else self.run_dir
        href = path if not p.is_absolute() else p.name
        if base is not None:
            try:
                href = os.path.relpath(p.absolute(), base)
            except ValueError:  # another drive (Windows)
                pass
        return f'<a href="{esc(href)}">{esc(href)}</a>'


def dict_table(table_id: str, rows: Sequence[Any], cols: Sequence[tuple[str, str, Callable[[Any], str]]]) -> str:
    """A sortable table of dict rows: cols = (key, title, format); non-dict rows are skipped."""
    head = "".join(f'<th class="{"" if k == "name" else "num"}">{esc(t)}</th>' for k, t, _ in cols)
    body = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        cells = []
        for k, _, f in cols:
            v = row.get(k)
            n = num(v)
            key = repr(n) if n is not None else ("" if v is None else str(v))
            cls = "" if k == "name" else ' class="num"'
            cells.append(f'<td{cls} data-v="{esc(key)}">{esc(f(v) if v is not None else "-")}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<table class="data sortable" id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
