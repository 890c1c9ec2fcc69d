"""The scorecard: one self-contained HTML file (inline CSS, JS and SVG; no CDN; works offline).

It reads only the store (or a bundle) and never re-runs anything. Every string that came from a model,
a file, a device or an exception goes through `esc` (html.escape, quotes included) before it lands in
the page, in text and in attributes alike; the embedded JSON escapes `<`, `>` and `&`.

This module is the page shell and the toolkit sections are written with: header; verdict tiles; one
section per registered suite (`bringup.api.suites()`, in their order: each suite's `section` renderer
lives next to the suite, e.g. `bringup/zoo/section.py`; a suite without one gets a generic table
of its metrics); suites in the results that nobody registered; failures with their tracebacks. It holds
no suite-specific code.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from bringup.api import Page, Suite
from bringup.case import CaseResult, Status, is_failure
from bringup.metrics import SECONDS, metric_spec
from bringup.outcomes import BY_KEY, outcome, outcome_line
from bringup.report import plots
from bringup.report.palette import status_css
from bringup.report.plots import esc
from bringup.report.portable import Portable, portable, recorded_run_dir
from bringup.store import RunInfo, Store

GAP_STATUSES = frozenset(BY_KEY["gap"].statuses)  # amber tiles: the only non-passing cases are gaps
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
    from bringup.files import json_safe

    text = json.dumps(json_safe(data), default=str, allow_nan=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))  # fmt: skip


def _template(name: str) -> str:
    return resources.files("bringup.report").joinpath("templates", name).read_text(encoding="utf-8")


def stylesheet() -> str:
    """The page's CSS: the packaged template and the status badges' colours (bringup/report/palette.py)."""
    return _template("report.css") + status_css()


def script() -> str:
    """The page's JS: sortable tables and table filters."""
    return _template("report.js")


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
@dataclass
class Verdict:
    area: str
    key: str  # pass | gaps | fail | none
    big: str
    detail: str


def verdict(area: str, results: Sequence[CaseResult], allow_unsupported: bool, word: str = "pass") -> Verdict:
    if not results:
        return Verdict(area, "none", "not run", "no cases")
    counted = [r for r in results if r.status is not Status.REF_FAIL]
    fails = [r for r in results if is_failure(r.status, allow_unsupported)]
    passed = sum(r.status is Status.PASS for r in results)
    c = Counter(r.status.value for r in results)
    detail = ", ".join(f"{c[s]} {s}" for s in STATUS_ORDER if c[s])
    key = "pass" if not fails else "gaps" if all(r.status in GAP_STATUSES for r in fails) else "fail"
    if not counted:  # every case ref_fail: nothing about the device was judged, so not green
        why = f"{detail}: the cpu reference failed, the device was not checked"
        return Verdict(area, "fail", "nothing judged", why)
    return Verdict(area, key, f"{passed}/{len(counted)} {word}", detail)


def tiles(verdicts: Sequence[Verdict]) -> str:
    out = ['<div class="tiles">']
    for v in verdicts:
        out.append(
            f'<a class="tile v-{esc(v.key)}" href="#sec-{esc(v.area)}" data-area="{esc(v.area)}">'
            f'<div class="area">{esc(v.area)}</div><div class="big">{esc(v.big)}</div>'
            f'<div class="counts">{esc(v.detail)}</div></a>'
        )
    out.append("</div>")
    return "".join(out)


# ---- sections --------------------------------------------------------------------------------------
def header(run: RunInfo, results: Sequence[CaseResult], allow_unsupported: bool) -> str:
    dur = (run.ended_at - run.started_at) if run.ended_at else None
    rows = [
        ("device", f"{run.device} ({run.device_name})" if run.device_name else run.device),
        ("torch", run.torch_version), ("bringup", run.bringup_version), ("host", run.host),
        ("started", fmt_time(run.started_at)), ("duration", fmt_dur(dur)),
        ("run", f"{run.run_id} ({run.command}, {run.status})"),
        ("command line", " ".join(["bringup", *map(str, run.argv)])),
    ]  # fmt: skip
    imports = run.info.get("imports")
    if imports:
        rows.append(("plugins", ", ".join(map(str, imports))))
    versions = run.info.get("versions")
    if isinstance(versions, dict) and versions:
        rows.append(("libraries", ", ".join(f"{k} {v}" for k, v in versions.items())))
    kv = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    from bringup.console import unjudged_suites

    none = unjudged_suites(results)
    head = (outcome_line(results) + (" (unsupported allowed by --allow-unsupported)" if allow_unsupported else "")
            + (f"; nothing judged in {', '.join(none)} (all ref_fail)" if none else ""))  # fmt: skip
    if run.status != "finished":
        head += f" — run {run.status}: results are partial"
    return (
        f'<header class="top" id="sec-header"><h1>bringup scorecard: {esc(run.device)}'
        f"{' — ' + esc(run.device_name) if run.device_name else ''}</h1>"
        f'<p class="headline">{esc(head)}</p><table class="kv">{kv}</table></header>'
    )


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
    return (f'<table class="data sortable" id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")  # fmt: skip


NOT_PASSING = ("failure", "gap", "error")  # the outcomes listed in the "Not passing" section, in this order
TOC_LABELS = {"failures": "not passing"}


def failures_section(results: Sequence[CaseResult], allow_unsupported: bool) -> str:
    """Every judged case that did not pass, grouped by outcome (bringup/outcomes.py): failures, then gaps,
    then harness errors, each with its reason and traceback. Under --allow-unsupported the gaps are still
    listed (they are still gaps), marked as not counted by the exit code."""
    groups = [(BY_KEY[k], [r for r in results if outcome(r.status).key == k]) for k in NOT_PASSING]
    total = sum(len(rs) for _, rs in groups)
    if not total:
        empty = '<p class="empty">Every judged case passes: no failures, no gaps.</p>'
        return section("failures", "Not passing", empty)
    body = []
    for o, rs in groups:
        if not rs:
            continue
        items = []
        for r in rs:
            tb = f"<details><summary>traceback</summary><pre>{esc(r.error)}</pre></details>" if r.error else ""
            note = (' <span class="muted">(allowed: not counted by the exit code)</span>'
                    if allow_unsupported and r.status is Status.UNSUPPORTED else "")  # fmt: skip
            items.append(f"<li>{esc(r.suite)}/{esc(r.name)} {badge(r.status)} {esc(r.reason)}{note}{tb}</li>")
        title = f"{o.many[0].upper()}{o.many[1:]} ({len(rs)})"
        body.append(f'<h3 id="not-passing-{esc(o.key)}">{esc(title)}</h3><p class="muted">{esc(o.meaning)}.</p>'
                    f'<ul class="failures" data-outcome="{esc(o.key)}">{"".join(items)}</ul>')  # fmt: skip
    counts = ", ".join(f"{len(rs)} {o.one if len(rs) == 1 else o.many}" for o, rs in groups if rs)
    return section("failures", f"Not passing ({total}): {counts}", "".join(body))


NOT_PASSING = ("failure", "gap", "error")
TOC_LABELS = {"failures": "not passing"}  # the outcomes listed in the "Not passing" section, in this order


# ---- the page --------------------------------------------------------------------------------------
def _expectations(block: dict[str, Any]) -> str:
    from bringup.expect.html import section_html  # --expect FILE: classes per area (docs/expect.md)

    return section_html(block)


def render(run: RunInfo, results: Sequence[CaseResult], summary: dict[str, Any] | None = None,
           out_dir: Path | None = None, run_dir: Path | None = None,
           suites: Sequence[Suite] | None = None) -> str:  # fmt: skip
    """The whole page as a string. Reads nothing but its arguments, the suite registry (`suites`,
    default `bringup.api.suites()`) and the packaged templates (and checks whether artifact files exist
    under `run_dir`, to link them from `out_dir`)."""
    from bringup.api import suites as registered
    from bringup.report.contract import contract

    summary = summary or {}
    opts = run.info.get("options") if isinstance(run.info.get("options"), dict) else {}
    allow = bool(opts.get("allow_unsupported", False))
    page = Page(run, summary, allow, out_dir, run_dir)
    by_suite: dict[str, list[CaseResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    known = list(registered() if suites is None else suites)
    # Every suite of `bringup run` (and section-only ones) gets a tile and a section, empty ones say so;
    # others (selftest, a plugin's suite outside `run`) only when they have results.
    shown_suites = [s for s in known if s.run_cases is not None or not s.command or s.name in by_suite]
    others = [s for s in by_suite if s not in {k.name for k in known}]
    verdicts: list[Verdict] = []
    sections = []
    extras: dict[str, Any] = {}
    for s in shown_suites:
        rs = by_suite.get(s.name, [])
        if s.tile is not None:
            t = s.tile(rs, page)
            verdicts.append(Verdict(t.area, t.key, t.big, t.detail))
        else:
            verdicts.append(verdict(s.name, rs, allow, s.verdict_word))
        sections.append(suite_section(s, rs, page))
        if s.page_data is not None:
            d = s.page_data(rs, page)
            if d is not None:
                extras[s.name] = d
    verdicts += [verdict(s, by_suite[s], allow) for s in others]
    sections = [
        section("verdict", "Verdict by area", tiles(verdicts)),
        *([_expectations(run.info["expectations"])] if isinstance(run.info.get("expectations"), dict) else []),
        *sections,
        *[generic_section(s, by_suite[s]) for s in others],
        failures_section(results, allow),
    ]
    toc_ids = ["verdict", *[s.name for s in shown_suites], *others, "failures"]
    toc = "".join(f'<a href="#sec-{esc(a)}">{esc(TOC_LABELS.get(a, a))}</a>' for a in toc_ids)
    data = contract(run, list(results), extras or None)
    title = f"bringup scorecard: {run.device} {run.device_name} {fmt_time(run.started_at)}"
    body = "".join([
        header(run, results, allow), f'<nav class="toc">{toc}</nav><main>', *sections, "</main>",
        f'<footer>Generated by bringup {esc(run.bringup_version)} from run {esc(run.run_id)} on '
        f"{esc(fmt_time(time.time()))}. Self-contained: no network access needed.</footer>",
        f'<script type="application/json" id="bringup-data">{json_for_script(data)}</script>',
    ])  # fmt: skip
    return page_html(title, body, travel(run, out_dir, run_dir))


def travel(run: RunInfo, out_dir: Path | None, run_dir: Path | None) -> Portable:
    """The path rewriting of a page about `run` (bringup/report/portable.py): its folders relative to
    the page, the roots it recorded and this machine's named."""
    paths = run.info.get("paths")
    dirs = [d for d in (recorded_run_dir(run.info), run_dir) if d is not None]
    return portable(paths if isinstance(paths, dict) else None, out_dir, dirs)


def page_html(title: str, body: str, paths: Portable) -> str:
    """A whole self-contained page: the head (strict CSP: no network), `body`, the script. Every
    absolute path in the title and the body (the embedded JSON included) goes through `paths`."""
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\';'
        " script-src 'unsafe-inline'; img-src data:\">",
        f"<title>{paths.page(esc(title))}</title><style>{stylesheet()}</style></head><body>",
        paths.page(body),
        f"<script>{script()}</script></body></html>\n",
    ])  # fmt: skip


def suite_section(s: Suite, results: Sequence[CaseResult], page: Page) -> str:
    """A registered suite's section: its own renderer (None from it: nothing to show), else the generic
    table of its metrics."""
    if s.section is None:
        return generic_section(s.name, results, s.heading)
    body = s.section(results, page)
    return section(s.name, s.heading, none_here(s.name) if body is None else body)


def read_summary(run: RunInfo) -> dict[str, Any]:
    """The run's summary.json (suite extras such as flex's line), when it is still there and readable."""
    path = run.info.get("summary")
    if not isinstance(path, str):
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def default_path(store: Store, run_id: str) -> Path:
    return store.path.parent / run_id / "report.html"


def write_report(store: Store, run_id: str, out: str | os.PathLike[str] | None) -> Path:
    """Render run `run_id` from `store` into `out` (default `<db dir>/<run_id>/report.html`), atomically."""
    from bringup.files import atomic_write_text

    run = store.get_run(run_id)
    results = store.results(run_id)
    path = Path(out) if out else default_path(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    run_dir = (store.path.parent / run_id).absolute()
    text = render(run, results, read_summary(run), path.resolve().parent, run_dir)
    return atomic_write_text(path, text)
