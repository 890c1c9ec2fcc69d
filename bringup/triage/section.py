"""The scorecard's "Bugs" section: the run's bug block (`runs.info.bugs`, bringup/triage/post_run.py) as one row
per group, largest reach first, above the suites' per-model tables (the report renders it through the registry,
bringup.api.PostRun.section, never importing triage)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bringup.report.kit import esc, section

SHOWN = 50  # groups listed; the rest are counted


def _reach(g: Mapping[str, Any]) -> str:
    r = g.get("reach") or {}
    parts = [f"{r.get('cases', 0)} case(s)", f"{r.get('models', 0)} model(s)"]
    if r.get("hub_ids"):
        parts.append(f"{r['hub_ids']} Hub id(s), {r.get('downloads', 0):,} downloads")
    return ", ".join(parts)


def _seen(g: Mapping[str, Any]) -> str:
    first, last, n = g.get("first_seen") or {}, g.get("last_seen") or {}, g.get("runs_seen") or 1
    if n <= 1:
        return "this run only"
    return f"{n} runs: first {first.get('run_id', '?')}, last {last.get('run_id', '?')}"


def _repro(g: Mapping[str, Any]) -> str:
    rep = g.get("repro") or {}
    if not rep:
        return "not made (bringup triage)"
    return str(rep.get("verdict") or rep.get("status") or "")


def section_html(block: Mapping[str, Any]) -> str:
    groups = [g for g in block.get("groups", []) if isinstance(g, dict)]
    signed = block.get("cases_signed", 0)
    res = block.get("numeric_resolution") or {}
    loc = (
        f" Wrong-number groups: {res.get('op', 0)} case(s) localized to an aten op, {res.get('module', 0)} to a module "
        f"kind (the module check), {res.get('model', 0)} not localized; <code>bringup triage RUN</code> localizes "
        "them, writes one checked repro and one issue per group."
        if any(res.values())
        else ""
    )
    head = (
        f"<p>{len(groups)} group(s) behind {esc(signed)} case(s) that did not pass: cases with one root-cause "
        f"signature are one bug, largest reach first (Hub downloads, then models, then cases).{loc}</p>"
    )
    if not groups:
        return section("bugs", "Bugs (0)", head)
    rows = []
    for i, g in enumerate(groups[:SHOWN], 1):
        models = ", ".join(g.get("models", [])[:8]) + (" ..." if len(g.get("models", [])) > 8 else "")
        rows.append(
            f'<tr id="bug-{esc(g.get("id"))}"><td>{i}</td><td>{esc(g.get("kind"))}</td>'
            f"<td><b>{esc(g.get('title'))}</b><br><code>{esc(g.get('key'))}</code></td>"
            f"<td>{esc(_reach(g))}<br>{esc(models)}</td><td>{esc(', '.join(g.get('dtypes', [])))}</td>"
            f"<td>{esc(', '.join(g.get('devices', [])))}</td><td>{esc(_seen(g))}</td><td>{esc(_repro(g))}</td></tr>"
        )
    left = len(groups) - SHOWN
    more = f"<p>{left} more group(s) in summary.json (<code>bugs</code>).</p>" if left > 0 else ""
    table = (
        '<table class="bugs"><thead><tr><th>#</th><th>kind</th><th>signature</th><th>reach</th><th>dtypes</th>'
        f"<th>devices</th><th>seen</th><th>repro</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return section("bugs", f"Bugs ({len(groups)})", head + table + more)
