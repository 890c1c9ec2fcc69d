"""A resume runs with the run's own options (issue 46 item 8): a `--workers 2` run resumed with
`bringup --resume RUN_ID` alone runs its unfinished cases on 2 workers (it ran one before), with the run's
`--max-rss-gb` too; only what the resume command names itself overrides them (`--workers 3`).

The options are the run's stored `info["options"]`; the executor the resume builds is recorded by wrapping
`bringup.runner.make_executor` (the resumed case really runs).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bringup.cli import build_parser, given_options, resumed_options


def _interrupted_run(bringup_inproc: Any, db: Path) -> str:
    """A finished 2-case selftest run made into an interrupted one: its second case's result deleted."""
    options = ["--device", "cpu", "--workers", "2", "--max-rss-gb", "7"]
    p = bringup_inproc("--db", str(db), *options, "selftest", "--plan", "ok*2", "--tag", "resume-opts")
    assert p.returncode == 0, p.stderr[-2000:]
    with sqlite3.connect(db) as c:
        ((run_id, info),) = c.execute("SELECT run_id, info FROM runs").fetchall()
        assert json.loads(info)["options"]["workers"] == 2  # stored with the run
        (case_id,) = c.execute("SELECT case_id FROM cases ORDER BY case_id DESC LIMIT 1").fetchone()
        for table in ("cases", "metrics", "series", "artifacts"):
            c.execute(f"DELETE FROM {table} WHERE case_id = ?", (case_id,))
        c.execute("UPDATE runs SET status = 'interrupted'")
    return run_id


def _record_executors(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, float | None]]:
    import bringup.flow as flow
    import bringup.runner as runner

    seen: list[tuple[int, float | None]] = []
    real = runner.make_executor

    def recording(name: str, spec: Any, workers: int, ray_address: str | None = None) -> Any:
        seen.append((workers, spec.max_rss_gb))
        return real(name, spec, workers, ray_address)

    monkeypatch.setattr(runner, "make_executor", recording)
    monkeypatch.setattr(flow, "make_executor", recording)  # flow imports it at its top
    return seen


def _statuses(db: Path) -> list[str]:
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("SELECT status FROM cases ORDER BY case_id")]


def test_resume_alone_uses_the_runs_workers(
    bringup_inproc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.db"
    run_id = _interrupted_run(bringup_inproc, db)
    seen = _record_executors(monkeypatch)
    p = bringup_inproc("--db", str(db), "--resume", run_id)
    assert p.returncode == 0, p.stderr[-2000:]
    assert seen and seen[0] == (2, 7.0)  # the run's --workers 2 and --max-rss-gb 7, not the defaults
    assert _statuses(db) == ["pass", "pass"]


def test_what_the_resume_names_overrides_the_run(
    bringup_inproc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.db"
    run_id = _interrupted_run(bringup_inproc, db)
    seen = _record_executors(monkeypatch)
    p = bringup_inproc(
        "--db", str(db), "--resume", run_id, "selftest", "--plan", "ok*2", "--tag", "resume-opts", "--workers", "3"
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert seen and seen[0] == (3, 7.0)  # --workers named by the resume; --max-rss-gb still the run's
    assert _statuses(db) == ["pass", "pass"]


def test_given_options_are_only_what_argv_names() -> None:
    p = build_parser()
    argv = ["--db", "x.db", "zoo", "--workers", "1", "--dtype", "bf16"]
    assert vars(given_options(p, argv)) == {"db": "x.db", "command": "zoo", "workers": 1, "dtype": "bf16"}
    # the parser's defaults are intact afterwards
    # (--workers not given is None: 1 worker, or one per core for `run --quick`, bringup/orchestrate.py)
    assert p.parse_args(["zoo"]).workers is None and p.parse_args(["zoo"]).dtype == "fp32"


def test_resumed_options_merge() -> None:
    p = build_parser()
    argv = ["--resume", "R", "zoo", "--limit", "3"]
    args = p.parse_args(argv)
    stored = {
        "workers": 2,
        "limit": 9,
        "dtype": "bf16",
        "db": "elsewhere.db",
        "resume": None,
        "command": "zoo",
        "timeout": 5.0,
    }
    got = resumed_options(p, argv, args, stored)
    assert (got.workers, got.limit, got.dtype, got.resume) == (2, 3, "bf16", "R")
    assert got.db is None and not hasattr(got, "timeout")  # how the resume found the run; a retired option
