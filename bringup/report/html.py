"""The scorecard: one self-contained HTML file (inline CSS, JS and SVG; no CDN; works offline).

It reads only the store (or a bundle) and never re-runs anything. Every string that came from a model,
a file, a device or an exception goes through `esc` (html.escape, quotes included) before it lands in
the page, in text and in attributes alike; the embedded JSON escapes `<`, `>` and `&`.

This module is the page shell: header; verdict tiles; one section per registered suite
(`bringup.api.suites()`, in their order: each suite's `section` renderer lives next to the suite, e.g.
`bringup/zoo/section.py`; a suite without one gets a generic table of its metrics); suites in the results
that nobody registered; failures with their tracebacks. It holds no suite-specific code. Sections are
written with the toolkit in bringup/report/kit.py (re-exported here for older imports).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from bringup.api import Page, Suite, post_runs
from bringup.api import suites as registered
from bringup.case import CaseResult, Status, is_failure
from bringup.console import unjudged_suites
from bringup.files import atomic_write_text
from bringup.outcomes import BY_KEY, outcome, outcome_line
from bringup.report.contract import contract
from bringup.report.kit import *  # noqa: F403  (the toolkit, re-exported: `from bringup.report.html import esc` keeps working)
from bringup.report.kit import (
    STATUS_ORDER,
    badge,
    esc,
    fmt_dur,
    fmt_time,
    generic_section,
    json_for_script,
    none_here,
    section,
)
from bringup.report.palette import status_css
from bringup.report.portable import Portable, portable, recorded_run_dir
from bringup.store import RunInfo, Store

GAP_STATUSES = frozenset(BY_KEY["gap"].statuses)  # amber tiles: the only non-passing cases are gaps


def _template(name: str) -> str:
    return resources.files("bringup.report").joinpath("templates").joinpath(name).read_text(encoding="utf-8")


def stylesheet() -> str:
    """The page's CSS: the packaged template and the status badges' colours (bringup/report/palette.py)."""
    return _template("report.css") + status_css()


def script() -> str:
    """The page's JS: sortable tables and table filters."""
    return _template("report.js")


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
        ("torch", run.torch_version),
        ("bringup", run.bringup_version),
        ("host", run.host),
        ("started", fmt_time(run.started_at)),
        ("duration", fmt_dur(dur)),
        ("run", f"{run.run_id} ({run.command}, {run.status})"),
        ("command line", " ".join(["bringup", *map(str, run.argv)])),
    ]
    imports = run.info.get("imports")
    if imports:
        rows.append(("plugins", ", ".join(map(str, imports))))
    versions = run.info.get("versions")
    if isinstance(versions, dict) and versions:
        rows.append(("libraries", ", ".join(f"{k} {v}" for k, v in versions.items())))
    kv = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    none = unjudged_suites(results)
    head = (
        outcome_line(results)
        + (" (unsupported allowed by --allow-unsupported)" if allow_unsupported else "")
        + (f"; nothing judged in {', '.join(none)} (all ref_fail)" if none else "")
    )
    if run.status != "finished":
        head += f" — run {run.status}: results are partial"
    return (
        f'<header class="top" id="sec-header"><h1>bringup scorecard: {esc(run.device)}'
        f"{' — ' + esc(run.device_name) if run.device_name else ''}</h1>"
        f'<p class="headline">{esc(head)}</p><table class="kv">{kv}</table></header>'
    )


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
            note = (
                ' <span class="muted">(allowed: not counted by the exit code)</span>'
                if allow_unsupported and r.status is Status.UNSUPPORTED
                else ""
            )
            items.append(f"<li>{esc(r.suite)}/{esc(r.name)} {badge(r.status)} {esc(r.reason)}{note}{tb}</li>")
        title = f"{o.many[0].upper()}{o.many[1:]} ({len(rs)})"
        body.append(
            f'<h3 id="not-passing-{esc(o.key)}">{esc(title)}</h3><p class="muted">{esc(o.meaning)}.</p>'
            f'<ul class="failures" data-outcome="{esc(o.key)}">{"".join(items)}</ul>'
        )
    counts = ", ".join(f"{len(rs)} {o.one if len(rs) == 1 else o.many}" for o, rs in groups if rs)
    return section("failures", f"Not passing ({total}): {counts}", "".join(body))


# ---- the page --------------------------------------------------------------------------------------
def _post_run_sections(info: dict[str, Any]) -> list[str]:
    """What post-run steps stored in the run's info, each rendered by its step (through the registry: the
    expectations gate's block, --expect FILE, docs/expect.md)."""
    return [
        p.section(info[p.info_key])
        for p in post_runs()
        if p.section is not None and p.info_key and isinstance(info.get(p.info_key), dict)
    ]


def render(
    run: RunInfo,
    results: Sequence[CaseResult],
    summary: dict[str, Any] | None = None,
    out_dir: Path | None = None,
    run_dir: Path | None = None,
    suites: Sequence[Suite] | None = None,
) -> str:
    """The whole page as a string. Reads nothing but its arguments, the suite registry (`suites`,
    default `bringup.api.suites()`) and the packaged templates (and checks whether artifact files exist
    under `run_dir`, to link them from `out_dir`)."""
    summary = summary or {}
    opts = run.info["options"] if isinstance(run.info.get("options"), dict) else {}
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
    verdicts, sections, extras = _suite_parts(shown_suites, by_suite, page)
    verdicts += [verdict(s, by_suite[s], allow) for s in others]
    sections = [
        section("verdict", "Verdict by area", tiles(verdicts)),
        *_post_run_sections(run.info),
        *sections,
        *[generic_section(s, by_suite[s]) for s in others],
        failures_section(results, allow),
    ]
    toc_ids = ["verdict", *[s.name for s in shown_suites], *others, "failures"]
    toc = "".join(f'<a href="#sec-{esc(a)}">{esc(TOC_LABELS.get(a, a))}</a>' for a in toc_ids)
    data = contract(run, list(results), extras or None)
    title = f"bringup scorecard: {run.device} {run.device_name} {fmt_time(run.started_at)}"
    body = "".join(
        [
            header(run, results, allow),
            f'<nav class="toc">{toc}</nav><main>',
            *sections,
            "</main>",
            f"<footer>Generated by bringup {esc(run.bringup_version)} from run {esc(run.run_id)} on "
            f"{esc(fmt_time(time.time()))}. Self-contained: no network access needed.</footer>",
            f'<script type="application/json" id="bringup-data">{json_for_script(data)}</script>',
        ]
    )
    return page_html(title, body, travel(run, out_dir, run_dir))


def _suite_parts(
    shown: Sequence[Suite], by_suite: dict[str, list[CaseResult]], page: Page
) -> tuple[list[Verdict], list[str], dict[str, Any]]:
    """Each shown suite's verdict tile, its section, and the data it adds to the page's JSON."""
    verdicts: list[Verdict] = []
    sections = []
    extras: dict[str, Any] = {}
    for s in shown:
        rs = by_suite.get(s.name, [])
        if s.tile is not None:
            t = s.tile(rs, page)
            verdicts.append(Verdict(t.area, t.key, t.big, t.detail))
        else:
            verdicts.append(verdict(s.name, rs, page.allow_unsupported, s.verdict_word))
        sections.append(suite_section(s, rs, page))
        if s.page_data is not None:
            d = s.page_data(rs, page)
            if d is not None:
                extras[s.name] = d
    return verdicts, sections, extras


def travel(run: RunInfo, out_dir: Path | None, run_dir: Path | None) -> Portable:
    """The path rewriting of a page about `run` (bringup/report/portable.py): its folders relative to
    the page, the roots it recorded and this machine's named."""
    paths = run.info.get("paths")
    dirs = [d for d in (recorded_run_dir(run.info), run_dir) if d is not None]
    return portable(paths if isinstance(paths, dict) else None, out_dir, dirs)


def page_html(title: str, body: str, paths: Portable) -> str:
    """A whole self-contained page: the head (strict CSP: no network), `body`, the script. Every
    absolute path in the title and the body (the embedded JSON included) goes through `paths`."""
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline';"
            " script-src 'unsafe-inline'; img-src data:\">",
            f"<title>{paths.page(esc(title))}</title><style>{stylesheet()}</style></head><body>",
            paths.page(body),
            f"<script>{script()}</script></body></html>\n",
        ]
    )


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
    run = store.get_run(run_id)
    results = store.results(run_id)
    path = Path(out) if out else default_path(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    run_dir = (store.path.parent / run_id).absolute()
    text = render(run, results, read_summary(run), path.resolve().parent, run_dir)
    return atomic_write_text(path, text)
