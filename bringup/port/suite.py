"""The port scan's report section and tile: the findings of `bringup run --port PATH` (kept in the run's
info) or of port cases. Registered as a section-only suite (the `port` command itself is not a suite)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from bringup.api import Page, Suite, Tile, register_suite
from bringup.case import CaseResult
from bringup.report.kit import esc, kv_table
from bringup.store import RunInfo


def port_data(run: RunInfo, results: Sequence[CaseResult]) -> dict[str, Any] | None:
    """Port scan results: run.info["port"] (bringup run --port), else the port suite's case fields."""
    data = run.info.get("port")
    if isinstance(data, dict):
        return data
    findings: list[Any] = []
    summary: dict[str, Any] = {}
    found = False
    for r in results:
        if r.suite == "port":
            found = True
            f = r.fields.get("findings")
            if isinstance(f, list):
                findings += f
            if isinstance(r.fields.get("summary"), dict):
                summary.update(r.fields["summary"])
    return {"findings": findings, "summary": summary} if found else None


def tile(results: Sequence[CaseResult], page: Page) -> Tile:
    data = port_data(page.run, results)
    if data is None:
        return Tile("port", "none", "not run", "no --port PATH")
    findings = [f for f in data.get("findings", []) if isinstance(f, dict)]
    fixable = sum(bool(f.get("fixable")) for f in findings)
    if not findings:
        return Tile("port", "pass", "clean", "no CUDA-only code found")
    return Tile("port", "gaps", f"{len(findings)} findings", f"{fixable} auto-fixable")


def page_data(results: Sequence[CaseResult], page: Page) -> dict[str, Any] | None:
    return port_data(page.run, results)


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    data = port_data(page.run, results)
    if data is None:
        hint = '<p class="empty">No port scan in this run (use <code>bringup run --port PATH</code>).</p>'
        return hint
    findings = [f for f in data.get("findings", []) if isinstance(f, dict)]
    summary = data["summary"] if isinstance(data.get("summary"), dict) else {}
    body = []
    if not findings:
        body.append('<p class="summary-line">No CUDA-only code found.</p>')
    else:
        fixable = sum(bool(f.get("fixable")) for f in findings)
        by_code = Counter(str(f.get("code", "?")) for f in findings)
        rules = ", ".join(f"{k} {n}" for k, n in sorted(by_code.items()))
        body.append(
            f'<p class="summary-line">{len(findings)} findings, {fixable} fixable with '
            f"<code>bringup port --fix</code>; by rule: {esc(rules)}</p>"
        )
        rows = []
        for f in findings:
            loc = f"{f.get('file', '?')}:{f.get('line', '?')}:{f.get('col', '?')}"
            fx = "1" if f.get("fixable") else "0"
            word = "fixable" if fx == "1" else "manual"
            rows.append(
                f'<tr data-status="{word}" data-fixable="{fx}"><td data-v="{esc(loc)}">{esc(loc)}</td>'
                f'<td>{esc(f.get("code", ""))}</td><td class="reason">{esc(f.get("message", ""))}</td>'
                f"<td>{word}</td></tr>"
            )
        body.append(
            '<form class="filters" data-table="tbl-port" role="search">'
            '<input type="search" name="q" placeholder="filter findings" aria-label="filter findings">'
            '<label><input type="checkbox" name="fixable"> fixable only</label>'
            '<span class="shown"></span></form>'
        )
        body.append(
            '<table class="data sortable" id="tbl-port"><thead><tr><th>where</th><th>code</th>'
            f"<th>message</th><th>fix</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    extra = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
    if extra:
        body.append("<details><summary>scan summary</summary>" + kv_table(extra) + "</details>")
    return "".join(body)


register_suite(
    Suite(
        name="port",
        help="find CUDA-only code (bringup port; bringup run --port PATH)",
        order=80,
        title="Port findings",
        section=render,
        tile=tile,
        page_data=page_data,
        command=False,
    )
)
