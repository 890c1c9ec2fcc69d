"""The report's bisection section and tile, from the store alone: the answer the bisection stored in its
run's info (`bisect_answer`), or, for a bisection that has not finished, the candidates stored so far."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bringup.api import Page, Tile
from bringup.bisect.answer import figure_labels
from bringup.case import CaseResult
from bringup.report.kit import badge, esc, fmt_bytes, fmt_dur

_KIND_WORDS = {"compiler_bisect": "PyTorch's compiler bisector", "localize": "bringup localize"}


def _answer(page: Page) -> dict[str, Any] | None:
    ans = page.run.info.get("bisect_answer")
    return ans if isinstance(ans, dict) else None


def _found(ans: dict[str, Any]) -> dict[str, Any]:
    """The verdicts of the (first) change found; answers stored before `found` carried them as the endpoints'."""
    return ans.get("found") or {"old": ans["old"]["verdict"], "new": ans["new"]["verdict"]}


def tile(results: Sequence[CaseResult], page: Page) -> Tile:
    ans = _answer(page)
    if ans is None:
        n = sum(r.params.get("kind") == "candidate" for r in results)
        return Tile("bisect", "none", "unfinished", f"{n} candidate(s) stored; resume the run to finish it")
    first = ans.get("first_new") or {}
    found = _found(ans)
    if ans["result"] == "found":
        key = "pass" if found["new"] == "pass" else "fail"
        return Tile("bisect", key, str(first.get("label", "?")), f"first {found['new']}")
    if ans["result"] == "every":
        n = len(ans.get("changes") or [])
        return Tile("bisect", "gaps" if n else "none", f"{n} change(s)", f"{len(ans['candidates'])} candidates run")
    return Tile("bisect", "gaps", ans["result"].replace("_", " "), str(ans.get("message", ""))[:80])


def _rows_from_results(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    rows = []
    for r in sorted((r for r in results if r.params.get("kind") == "candidate"), key=lambda r: r.params["index"]):
        rows.append(
            {
                "label": r.name,
                "ran": True,
                "verdict": r.fields.get("verdict") or "skip",
                "reason": r.reason,
                "seen": [x.get("status") for x in r.fields.get("runs") or []],
                "figures": r.fields.get("figures") or {},
                "installed": r.fields.get("installed") or {},
                "env": r.fields.get("env") or {},
                "runs": r.fields.get("runs") or [],
                "release_notes": r.fields.get("release_notes"),
            }
        )
    return rows


def _table(rows: Sequence[dict[str, Any]], marks: dict[str, str]) -> str:
    figs = figure_labels(rows, limit=4)
    head = "".join(
        f"<th>{esc(h)}</th>"
        for h in (
            "candidate",
            "verdict",
            "runs",
            "installed",
            *figs,
            "environment",
            "run time",
            "release notes",
            "reason",
        )
    )
    body = []
    for r in rows:
        label = esc(r["label"]) + (
            f' <span class="mark">{esc(marks[r["label"]])}</span>' if r["label"] in marks else ""
        )
        if not r.get("ran"):
            body.append(
                f'<tr data-status="not-run"><td>{label}</td><td colspan="{7 + len(figs)}" class="empty">'
                "not needed by the search</td></tr>"
            )
            continue
        verdict = str(r.get("verdict"))
        v = badge(verdict) if verdict not in ("skip", "flaky") else f'<span class="st">{esc(verdict)}</span>'
        seen = " ".join(esc(str(s)) for s in r.get("seen") or [])
        inst = esc(", ".join(f"{k} {v}" for k, v in (r.get("installed") or {}).items()))
        have = r.get("figures") or {}
        vals = "".join("<td>" + (esc(format(have[f], ".4g")) if f in have else "") + "</td>" for f in figs)
        env = r.get("env") or {}
        envtxt = "reused" if env.get("reused") else f"built in {fmt_dur(float(env.get('build_s') or 0))}"
        if env.get("size_bytes"):
            envtxt += f", {fmt_bytes(float(env['size_bytes']))}"
        run_s = sum(float(x.get("wall_s") or 0) for x in r.get("runs") or [])
        notes = r.get("release_notes")
        link = f'<a href="{esc(notes)}">{esc(notes)}</a>' if notes else ""
        body.append(
            f'<tr data-status="{esc(verdict)}"><td>{label}</td><td>{v}</td><td>{seen}</td><td>{inst}</td>{vals}'
            f"<td>{esc(envtxt)}</td><td>{esc(fmt_dur(run_s))}</td><td>{link}</td>"
            f'<td class="reason">{esc(str(r.get("reason", "")))}</td></tr>'
        )
    return f'<table class="data" id="tbl-bisect"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    ans = _answer(page)
    if ans is None:
        rows = _rows_from_results(results)
        if not rows:
            return None
        return (
            '<p class="summary-line">This bisection has not finished; the candidates stored so far '
            f"(continue it with <code>bringup --resume {esc(page.run.run_id)}</code>):</p>{_table(rows, {})}"
        )
    rows = ans["candidates"]
    marks: dict[str, str] = {}
    found = _found(ans)
    for key, word in (("last_old", f"last {found['old']}"), ("first_new", f"first {found['new']}")):
        if ans.get(key):
            marks[ans[key]["label"]] = word
    for ch in ans.get("changes") or []:  # a range with more than two verdicts: every change marked
        marks.setdefault(ch["to"], f"first {ch['verdicts'][1]}")
    for label in ans.get("flaky") or []:
        marks[label] = "flaky: not a verdict"
    parts = [
        f'<p class="summary-line">{esc(ans["target"]["title"])} over {esc(ans["source"])}: '
        f"<strong>{esc(ans['message'])}</strong></p>",
        _table(rows, marks),
    ]
    for kind, f in (ans.get("followups") or {}).items():
        parts.append(
            f"<h3>{esc(_KIND_WORDS.get(kind, kind))} on {esc(f['label'])}</h3>"
            f"<p>{badge(f['status'])} {esc(f['reason'])}</p>"
        )
        a = f.get("answer") or {}
        if kind == "localize" and a.get("repro"):
            parts.append(f"<p>repro: <code>{esc(a['repro'])}</code></p>")
        if kind == "compiler_bisect" and a.get("runs"):
            steps = "; ".join(
                f"{x.get('backend')}{'/' + x['subsystem'] if x.get('subsystem') else ''}: "
                f"{'ok' if x.get('ok') else 'fails'}"
                for x in a["runs"]
            )
            parts.append(f'<p class="reason">{len(a["runs"])} runs: {esc(steps)}</p>')
    fg = ans.get("figures") or {}
    if fg:
        parts.append(
            f'<p class="summary-line">{fg.get("environments")} environment(s) for {fg.get("candidates")} '
            f"candidates (bound ceil(log2 k)+2 = {fg.get('bound')}): {fg.get('built')} built in "
            f"{esc(fmt_dur(fg.get('install_s')))}, {fg.get('reused')} reused; {fg.get('runs')} run(s) in "
            f"{esc(fmt_dur(fg.get('run_s')))}; {esc(fmt_dur(fg.get('wall_s')))} wall; "
            f"{esc(fmt_bytes(fg.get('disk_bytes')))} of environments</p>"
        )
    return "".join(parts)


def page_data(results: Sequence[CaseResult], page: Page) -> dict[str, Any] | None:
    return _answer(page)
