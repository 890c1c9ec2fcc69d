"""The one output contract of every suite command's --json (and of summary.json)."""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from bringup.case import CaseResult
from bringup.report.terminal import totals, unjudged_suites
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


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write via a temp file in the same directory + rename: never a half-written file."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _file_mode(p))  # mkstemp makes 0600; a report or summary is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p


def _file_mode(p: Path) -> int:
    """The mode the file already has, else what open() would give a new file (0666 minus the umask)."""
    try:
        return stat.S_IMODE(p.stat().st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def json_safe(obj: Any) -> Any:
    """Strict JSON: NaN and +-inf (e.g. an error bound on a shape mismatch) become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def dumps(data: Any) -> str:
    return json.dumps(json_safe(data), indent=2, default=str, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    return atomic_write_text(path, dumps(data))
