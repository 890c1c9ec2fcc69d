"""The Hub sweep's part of the zoo section: ids and downloads by outcome (overall and per architecture, as
stacked bars and tables), the config failures by reason, the worst offenders and a link to the per-id CSV.
Reads only the run's summary (`hub`, written by hub/summary.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bringup.api import Page
from bringup.report import plots
from bringup.report.html import dict_table
from bringup.report.plots import esc

OUTCOME_COLOURS = {
    "pass": "#2e7d32",
    "graph_breaks": "#7cb342",
    "fallback": "#f9a825",
    "fail_numeric": "#c62828",
    "fail_compile": "#ad1457",
    "unsupported": "#6a1b9a",
    "other_fail": "#4e342e",
    "not_judged": "#9e9e9e",
    "config": "#546e7a",
    "pending": "#cfd8dc",
}
SHOW = 30


def hub_summary(page: Page) -> dict[str, Any] | None:
    s = page.summary
    hub = s.get("hub") if isinstance(s.get("hub"), dict) else (s.get("zoo") or {}).get("hub")
    return hub if isinstance(hub, dict) and hub.get("overall") else None


def _n(v: Any) -> str:
    return f"{int(v):,}" if isinstance(v, (int, float)) else "-"


def render(hub: dict[str, Any], page: Page) -> str:
    overall: dict[str, dict[str, Any]] = hub["overall"]
    outcomes = [o for o in OUTCOME_COLOURS if (overall.get(o) or {}).get("ids")]
    parts = [
        f"<h3>Hub sweep: {_n(hub.get('ids'))} ids, {_n(hub.get('downloads'))} downloads, "
        f"{_n(hub.get('signatures'))} distinct signatures ({esc(hub.get('ids_per_signature'))} ids each)</h3>",
        "<p>Each id's outcome is the verdict of its signature's tiny case (what its config computes, not its "
        "weights: docs/hub.md); config failures are ids whose config could not be fetched, read or "
        "built.</p>",
    ]
    parts += _overall(hub, overall, outcomes)
    parts += _architectures(hub, outcomes)
    parts += _failures(hub)
    base = hub.get("baseline")
    if base:
        parts.append(
            f"<p>baseline {esc(base.get('bundle'))}: {_n(base.get('compared'))} signatures compared, "
            f"{_n(base.get('differs'))} differ, {_n(base.get('not_in_bundle'))} not in the bundle.</p>"
        )
    csv = hub.get("csv")
    if csv:
        href = _href(csv, page)
        parts.append(f'<p>Every id with its outcome and reason: <a href="{esc(href)}">{esc(Path(csv).name)}</a></p>')
    return "".join(parts)


def _overall(hub: dict[str, Any], overall: dict[str, dict[str, Any]], outcomes: list[str]) -> list[str]:
    """ids and downloads by outcome: a stacked bar (downloads scaled to ids) and a table."""
    scale = max(1, hub.get("downloads") or 1)
    ids = max(1, hub.get("ids") or 1)
    bars = [
        ("ids", [(o, float(overall[o]["ids"])) for o in outcomes]),
        ("downloads", [(o, float(overall[o]["downloads"]) / scale * ids) for o in outcomes]),
    ]
    rows = [{"name": o, **overall[o]} for o in outcomes]
    cols: list[tuple[str, str, Callable[[Any], str]]] = [
        ("name", "outcome", str),
        ("ids", "ids", _n),
        ("ids_pct", "% ids", lambda v: f"{v:.1f}"),
        ("downloads", "downloads", _n),
        ("downloads_pct", "% downloads", lambda v: f"{v:.1f}"),
    ]
    return [
        plots.stacked_bars(bars, "ids and downloads (scaled to ids) by outcome", unit="", colours=OUTCOME_COLOURS),
        dict_table("tbl-hub-overall", rows, cols),
    ]


def _architectures(hub: dict[str, Any], outcomes: list[str]) -> list[str]:
    """ids by outcome for the most downloaded architectures, and a table of every architecture."""
    archs = hub.get("by_architecture") or []
    top = archs[:SHOW]
    cols: list[tuple[str, str, Callable[[Any], str]]] = [
        ("name", "architecture", str),
        ("ids", "ids", _n),
        ("downloads", "downloads", _n),
        ("signatures", "signatures", _n),
    ]
    cols += [(o, o, _n) for o in outcomes]
    return [
        plots.stacked_bars(
            [(a["architecture"], [(o, float(a.get(o) or 0)) for o in outcomes]) for a in top],
            f"ids by outcome, the {len(top)} most downloaded architectures",
            unit="",
            colours=OUTCOME_COLOURS,
        ),
        f"<details><summary>every architecture ({len(archs)})</summary>"
        + dict_table("tbl-hub-arch", [{"name": a["architecture"], **a} for a in archs], cols)
        + "</details>",
    ]


def _failures(hub: dict[str, Any]) -> list[str]:
    """Config failures by reason, the worst offenders, and the cases run at real size."""
    parts = []
    if fails := hub.get("config_failures") or {}:
        lis = "".join(
            f"<li>{esc(k)}: {_n(v['ids'])} ids, {_n(v['downloads'])} downloads (e.g. "
            f"{esc(', '.join(v.get('examples') or []))})</li>"
            for k, v in fails.items()
        )
        parts.append(f"<details open><summary>config failures by reason</summary><ul>{lis}</ul></details>")
    if worst := hub.get("worst") or []:
        cols: list[tuple[str, str, Callable[[Any], str]]] = [
            ("name", "case", str),
            ("architecture", "architecture", str),
            ("status", "status", str),
        ]
        cols += [("ids", "ids", _n), ("downloads", "downloads", _n), ("reason", "reason", str)]
        parts.append(
            "<details open><summary>worst offenders (failing signatures by downloads covered)</summary>"
            + dict_table("tbl-hub-worst", [{"name": w["case"], **w} for w in worst], cols)
            + "</details>"
        )
    if full := hub.get("full") or []:
        cols = [
            ("name", "case", str),
            ("status", "status", str),
            ("nproc", "ranks", _n),
            ("reason", "reason", str),
        ]
        parts.append(
            "<details open><summary>at real size (--full-top)</summary>"
            + dict_table("tbl-hub-full", [{"name": f["case"], **f} for f in full], cols)
            + "</details>"
        )
    return parts


def _href(path: str, page: Page) -> str:
    if page.out_dir is None:
        return path
    try:
        return os.path.relpath(path, page.out_dir)
    except ValueError:
        return path
