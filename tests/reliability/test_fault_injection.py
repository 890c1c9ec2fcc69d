"""Fault injection through the real CLI, for both executors: one sweep of deliberate faults each
(`bringup selftest`), then every verdict checked in the SQLite store itself.

A worker that SIGSEGVs is `crash` naming the signal; `os._exit(3)` is `crash` with the code; an endless
loop is `budget`; a memory blow-up past `--max-rss-gb` is `oom`; a raise is `error` with its traceback
stored; NotImplementedError is `unsupported`; a phase past its own budget is `budget` naming the phase;
noise on stdout does not corrupt the protocol; and the driver finishes the sweep (exit 1, every case
recorded once). Under Ray also: a lost worker (its actor killed) is retried and passes, and a worker
lost on every try is `crash` saying so.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import load_json, run_cli

BUDGET = 6  # s per case: the `hang` item costs this much; alloc reaches the cap long before it
PLAN = "ok,segv,exit:3,hang,alloc:6,raise,phase:30,unsupported,print,ok"

# item -> (status, text that must be in the reason)
EXPECT: dict[str, tuple[str, str]] = {
    "ok": ("pass", ""),
    "segv": ("crash", "SIGSEGV"),
    "exit": ("crash", "exited with code 3"),
    "hang": ("budget", f"case exceeded {BUDGET} s"),
    "alloc": ("oom", "--max-rss-gb 1"),
    "raise": ("error", "RuntimeError: selftest: raised on purpose"),
    "phase": ("budget", "compile exceeded its budget"),
    "unsupported": ("unsupported", "NotImplementedError"),
    "print": ("pass", ""),
    "loseonce": ("pass", ""),
    "lose": ("crash", "worker lost after 1 retry"),
}


def _rows(db: Path) -> list[dict]:
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        return [dict(r) for r in c.execute("SELECT * FROM cases")]


def _sweep(tmp_path: Path, executor: str, plan: str, env: dict[str, str] | None = None) -> list[dict]:
    db = tmp_path / "faults.db"
    p = run_cli(
        [
            "--db",
            str(db),
            "--executor",
            executor,
            "--workers",
            "2",
            "--max-rss-gb",
            "1",
            "selftest",
            "--plan",
            plan,
            "--case-budget",
            str(BUDGET),
            "--json",
            "out.json",
        ],
        cwd=tmp_path,
        env=env,
        timeout=900,
    )
    assert p.returncode == 1, (p.returncode, p.stdout[-3000:], p.stderr[-3000:])  # finished, with failures
    assert "Traceback" not in p.stderr
    rows = _rows(db)
    n = len(plan.split(","))
    assert len(rows) == n and len({r["case_id"] for r in rows}) == n  # every case once
    for r in rows:
        item = json.loads(r["params"])["op"]
        status, needle = EXPECT[item]
        assert r["status"] == status, (r["name"], r["status"], r["reason"], (r["error"] or "")[-2000:])
        assert needle in (r["reason"] or ""), (r["name"], r["reason"])
        if item == "raise":  # our own bug: the traceback is in the store
            assert "Traceback (most recent call last)" in r["error"] and "run_item" in r["error"]
        if item == "phase":
            assert json.loads(r["fields"])["budget_phase"] == "compile"
            assert r["wall_s"] < BUDGET  # the phase budget (1 s), not the case budget, fired
        if item == "hang":
            assert BUDGET <= r["wall_s"] < BUDGET + 30
    # the same verdicts reach the --json contract
    out = load_json(tmp_path / "out.json")
    assert sum(out["summary"].values()) == n and out["summary"]["pass"] == sum(
        EXPECT[x.split(":")[0]][0] == "pass" for x in plan.split(",")
    )
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status FROM runs").fetchall() == [("finished",)]
    return rows


def test_faults_local_executor(tmp_path: Path) -> None:
    _sweep(tmp_path, "local", PLAN)


@pytest.mark.xdist_group("ray")  # one local Ray instance at a time (make test runs two pytest workers)
def test_faults_ray_executor(tmp_path: Path) -> None:
    # loseonce: the actor dies once, Ray restarts it and retries: pass. lose: dies on every try: crash.
    _sweep(tmp_path, "ray", PLAN + ",loseonce,lose", env={"BRINGUP_RAY_RETRIES": "1"})
