"""The expectations block of a run (`runs.info.expectations`) as a scorecard section: classes per area
(suite), then every new failure, new pass and flaky case with its detail and link."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bringup.expect.upstream import html_table
from bringup.report.kit import esc, section

CLASSES = ("expected", "new_failure", "new_pass", "flaky")


def section_html(block: dict[str, Any]) -> str:
    cases = [c for c in block.get("cases", []) if isinstance(c, dict)]
    by_area: dict[str, Counter[str]] = {}
    for c in cases:
        by_area.setdefault(str(c.get("case", "")).split("/")[0], Counter())[str(c.get("class"))] += 1
    sec = block.get("section") or {}
    head = (
        f"<p>File <code>{esc(block.get('file', ''))}</code>, section "
        f"<code>{esc(sec.get('device', '-'))}/{esc(sec.get('torch', '-'))}</code>"
        f"{' (strict)' if block.get('strict') else ''}, {esc(block.get('repeat', 1))} run(s); "
        f"exit code {esc(block.get('exit_code'))}.</p>"
    )
    rows = "".join(
        f"<tr><td>{esc(a)}</td>" + "".join(f"<td>{n[k]}</td>" for k in CLASSES) + "</tr>" for a, n in by_area.items()
    )
    table = (
        "<table><thead><tr><th>area</th>"
        + "".join(f"<th>{esc(k.replace('_', ' '))}</th>" for k in CLASSES)
        + f"</tr></thead><tbody>{rows}</tbody></table>"
    )
    items = "".join(
        f"<li><b>{esc(str(c.get('class')).replace('_', ' '))}</b> {esc(c.get('case'))}: {esc(c.get('detail'))}"
        + (f' (<a href="{esc(c["link"])}">{esc(c["link"])}</a>)' if str(c.get("link", "")).startswith("http") else "")
        + "</li>"
        for c in cases
        if c.get("class") != "expected"
    )
    upstream = html_table([r for r in block.get("upstream") or [] if isinstance(r, dict)])
    return section("expectations", "Expectations", head + table + (f"<ul>{items}</ul>" if items else "") + upstream)
