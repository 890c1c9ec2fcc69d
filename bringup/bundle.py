"""Portable run bundles: one JSON file with a run and every finished case (metrics, series, fields).

No pickle, no tensors: loss curves are series, outputs are statistics/digests in case fields. A bundle
made on one machine (say a CUDA box) is the baseline for another (`zoo --baseline`, `compare`).
`bringup export RUN --out bundle.json` writes one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bringup.case import CaseResult
from bringup.errors import BadInput
from bringup.store import RunInfo, Store

FORMAT = "bringup-bundle"
VERSION = 1


def make_bundle(store: Store, run_id: str) -> dict[str, Any]:
    run = store.get_run(run_id)
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": run.to_json(),
        "cases": [r.to_json() for r in store.results(run_id)],
    }


def load_bundle(path: str | Path) -> tuple[RunInfo, list[CaseResult]]:
    """Read and validate a bundle; anything malformed, truncated or from a newer format is BadInput."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"bundle {p} does not exist")
    try:
        data = json.loads(p.read_text())
    except UnicodeDecodeError as e:
        raise BadInput(f"bundle {p} is not text JSON") from e
    except json.JSONDecodeError as e:
        raise BadInput(f"bundle {p} is not valid JSON (truncated?): {e.msg} at line {e.lineno}") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadInput(f'{p} is not a bringup bundle (no "format": "{FORMAT}")')
    v = data.get("version")
    if not isinstance(v, int) or v < 1:
        raise BadInput(f"bundle {p} has a bad version {v!r}")
    if v > VERSION:
        raise BadInput(f"bundle {p} is format v{v}, newer than this bringup reads (v{VERSION}); upgrade bringup")
    try:
        r = data["run"]
        run = RunInfo(
            run_id=str(r["run_id"]),
            command=str(r["command"]),
            argv=list(r.get("argv", [])),
            bringup_version=str(r.get("bringup_version", "")),
            torch_version=str(r.get("torch_version", "")),
            device=str(r["device"]),
            device_name=str(r.get("device_name", "")),
            host=str(r.get("host", "")),
            started_at=float(r.get("started_at", 0.0)),
            ended_at=r.get("ended_at"),
            status=str(r.get("status", "")),
            info=dict(r.get("info", {})),
        )
        cases = [CaseResult.from_json(c) for c in data["cases"]]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"bundle {p} is malformed: {type(e).__name__}: {e}") from e
    return run, cases
