"""SIGKILL of the driver mid-sweep, then `--resume`: every finished result kept as it was, no duplicate
rows, the rest completed; and the dead driver's workers do not live on (nor write anything).

Both resume forms: `bringup --resume RUN_ID` alone (the run's planned cases) and `bringup --resume
RUN_ID <same sub-command and options>`. Checked in the SQLite store directly.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import run_cli


def _q(db: Path, sql: str, *args: object) -> list[tuple]:
    with sqlite3.connect(db, timeout=60) as c:
        return c.execute(sql, args).fetchall()


def _finished(db: Path) -> dict[str, tuple]:
    """case_id -> the whole stored row (finished_at included: a re-run would change it)."""
    if not db.exists():
        return {}
    try:
        rows = _q(db, "SELECT case_id, name, status, reason, wall_s, finished_at FROM cases")
    except sqlite3.OperationalError:  # tables not created yet
        return {}
    return {r[0]: r for r in rows}


def _start(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = open(cwd / f"driver-{time.time_ns()}.log", "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "bringup.cli", *args],
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )


def _kill_when(p: subprocess.Popen[bytes], db: Path, n: int, timeout: float = 300) -> list[psutil.Process]:
    """Wait until `n` cases are stored, then SIGKILL the driver (and only it). Returns the bringup
    processes under it at that moment (workers, started or forked by the launcher, and the launcher), after
    checking that there was a worker among them (a worker leads its own session)."""
    t_end = time.monotonic() + timeout
    while len(_finished(db)) < n:
        assert p.poll() is None, "the driver ended before it could be killed"
        assert time.monotonic() < t_end, f"fewer than {n} results after {timeout} s"
        time.sleep(0.1)
    ours = _ours(p)
    p.send_signal(signal.SIGKILL)
    p.wait()
    return ours


def _ours(p: subprocess.Popen) -> list[psutil.Process]:
    """The bringup processes under the driver now, checked to hold a worker (a worker leads its own session)."""
    ours = [k for k in psutil.Process(p.pid).children(recursive=True) if "bringup" in " ".join(_cmdline(k))]
    assert any(_leads_session(k) for k in ours), "the driver had no worker process at the moment it was killed"
    return ours


def _leads_session(proc: psutil.Process) -> bool:
    try:
        return os.getsid(proc.pid) == proc.pid
    except OSError:
        return False


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _assert_orphans_die(workers: list[psutil.Process], within_s: float) -> None:
    gone, alive = psutil.wait_procs(workers, timeout=within_s)
    assert not alive, f"orphaned workers still running {within_s} s after the driver died: {alive}"


def _assert_kept(before: dict[str, tuple], after: dict[str, tuple]) -> None:
    for cid, row in before.items():
        assert after.get(cid) == row, f"finished result changed or lost on resume: {row} -> {after.get(cid)}"


def _assert_complete(db: Path, run_id: str, n: int) -> None:
    assert _q(db, "SELECT count(*) FROM runs") == [(1,)]  # resume continues the run, never a new one
    assert _q(db, "SELECT status FROM runs WHERE run_id = ?", run_id) == [("finished",)]
    rows = _q(db, "SELECT case_id, status FROM cases WHERE run_id = ?", run_id)
    assert len(rows) == n and len({r[0] for r in rows}) == n, rows  # all of them, each once
    assert {r[1] for r in rows} == {"pass"}
    planned = {r[0] for r in _q(db, "SELECT case_id FROM planned WHERE run_id = ?", run_id)}
    assert planned == {r[0] for r in rows}
    # no orphaned metric rows either: one pid metric per case
    assert _q(db, "SELECT count(*) FROM metrics WHERE run_id = ? AND name = 'pid'", run_id) == [(n,)]


def test_sigkill_then_resume_local_both_forms(tmp_path: Path) -> None:
    db = tmp_path / "res" / "kill.db"
    plan = ["selftest", "--plan", "ok*2,sleep:12,ok*2,sleep:12,ok*2", "--tag", "kill"]
    n = 8

    # 1st driver: killed while the first sleep runs (2 results stored)
    p = _start(["--db", str(db), *plan], tmp_path)
    workers = _kill_when(p, db, 2)
    _assert_orphans_die(workers, within_s=8)  # well before the 12 s sleep would have ended
    before = _finished(db)
    run_id = _q(db, "SELECT run_id FROM runs")[0][0]
    assert _q(db, "SELECT status FROM runs") == [("running",)]
    time.sleep(1)
    assert _finished(db) == before  # nothing wrote after the driver's death

    # 2nd driver: `--resume RUN_ID` alone; killed in the second sleep (5 results)
    p = _start(["--db", str(db), "--resume", run_id], tmp_path)
    workers = _kill_when(p, db, 5)
    _assert_orphans_die(workers, within_s=8)
    mid = _finished(db)
    _assert_kept(before, mid)
    assert len(mid) == 5

    # 3rd: `--resume RUN_ID` with the same sub-command and options: finishes the run
    run_cli(["--db", str(db), "--resume", run_id, *plan], cwd=tmp_path, check_rc=0, timeout=600)
    _assert_kept(mid, _finished(db))
    _assert_complete(db, run_id, n)


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_sigkill_then_resume_ray(tmp_path: Path) -> None:
    """The same under Ray: the killed driver takes its local Ray instance, the actors and their
    worker processes down; the resumed run (on a new local instance) completes."""
    db = tmp_path / "ray.db"
    plan = ["selftest", "--plan", "ok*2,sleep:12*2,ok*2", "--tag", "rkill"]
    p = _start(["--db", str(db), "--executor", "ray", "--workers", "2", *plan], tmp_path)
    workers = _kill_when(p, db, 2)
    _assert_orphans_die(workers, within_s=20)
    before = _finished(db)
    run_id = _q(db, "SELECT run_id FROM runs")[0][0]
    run_cli(
        ["--db", str(db), "--executor", "ray", "--workers", "2", "--resume", run_id, *plan],
        cwd=tmp_path,
        check_rc=0,
        timeout=900,
    )
    _assert_kept(before, _finished(db))
    _assert_complete(db, run_id, 6)


def test_sigterm_stops_at_once_marks_the_run_and_says_how_to_resume(tmp_path: Path) -> None:
    """SIGTERM (a scheduler's preemption, `kill`): the running case is abandoned at once (not waited
    for), its worker killed, the run marked `interrupted`, exit 130 with the resume command."""
    db = tmp_path / "term.db"
    p = subprocess.Popen(
        [sys.executable, "-m", "bringup.cli", "--db", str(db), "selftest", "--plan", "ok*2,sleep:60", "--tag", "term"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t_end = time.monotonic() + 300
    while len(_finished(db)) < 2:
        assert p.poll() is None and time.monotonic() < t_end
        time.sleep(0.1)
    workers = _ours(p)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (out[-2000:], err[-2000:])
    assert time.monotonic() - t0 < 30  # not the 60 s sleep
    run_id = _q(db, "SELECT run_id FROM runs")[0][0]
    assert f"--resume {run_id}" in err and "Traceback" not in err
    assert _q(db, "SELECT status FROM runs") == [("interrupted",)]
    assert len(_finished(db)) == 2
    _assert_orphans_die(workers, within_s=10)
