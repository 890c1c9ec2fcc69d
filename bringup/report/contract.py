"""The one output contract of every suite command's --json (and of summary.json)."""

from __future__ import annotations

from typing import Any

from bringup.case import CaseResult
from bringup.console import totals, unjudged_suites
from bringup.store import RunInfo


def contract(run: RunInfo, results: list[CaseResult], extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"run_id", "device", "torch", "summary": {status: count}, "cases": [flat rows]} + suite extras."""
    out: dict[str, Any] = {
        "run_id": run.run_id,
        "command": run.command,
        "device": run.device,
        "device_name": run.device_name,
        "torch": run.torch_version,
        "bringup": run.bringup_version,
        "host": run.host,
        "summary": totals(results),
        "unjudged_suites": unjudged_suites(results),  # all cases ref_fail: nothing checked there (exit 1)
        "cases": [r.flat() for r in results],
    }
    for k, v in (extras or {}).items():
        out.setdefault(k, v)
    return out
