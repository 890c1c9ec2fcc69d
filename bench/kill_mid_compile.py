"""Benchmark: verdicts after a SIGKILL mid-compile and a resume, against a clean machine's (docs/reliability.md,
"Compile caches after a kill").

    .venv/bin/python bench/kill_mid_compile.py [--kill-after 70] [--code CHECKOUT] [--skip-clean] [--keep DIR]
                                               [-- bringup args, default: zoo --source hf-causal --limit 4]

Each arm gets fresh compile caches (TORCHINDUCTOR_CACHE_DIR and TMPDIR in a directory of its own: a new user):
  clean   the run, undisturbed: the verdicts a clean machine gives;
  killed  the same run, SIGKILLed with every process under it (launcher, workers, compile workers, g++, ld) at the
          first moment after --kill-after seconds when the linker is writing a library (an empty `*.so` in the
          cache), then `bringup --resume RUN_ID`, then the same command again (the next day's run).
Prints each arm's verdicts and how many of the resumed run's and the next run's differ from the clean run's.
`--code CHECKOUT` runs another checkout's bringup (e.g. a worktree of the commit before a fix) with this venv.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil


def verdicts(db: Path, run_id: str) -> dict[str, str]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT name, status, fields FROM cases WHERE run_id = ?", (run_id,)).fetchall()
    return {n: s + (" (re-run clean)" if json.loads(f or "{}").get("rerun") else "") for n, s, f in rows}


def run_ids(db: Path) -> list[str]:
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("SELECT run_id FROM runs ORDER BY started_at")]


def bringup(args: list[str], env: dict[str, str], log: Path) -> float:
    t = time.monotonic()
    with open(log, "ab") as f:
        subprocess.run([sys.executable, "-m", "bringup.cli", *args], env=env, stdout=f, stderr=subprocess.STDOUT)
    return time.monotonic() - t


def kill_mid_link(args: list[str], env: dict[str, str], cache: Path, after: float, log: Path) -> float:
    """Start the run; SIGKILL it and everything under it once `after` s have passed and a library is being
    linked (an empty .so in the cache). Returns the second it was killed at."""
    with open(log, "ab") as f:
        p = subprocess.Popen([sys.executable, "-m", "bringup.cli", *args], env=env, stdout=f, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    while p.poll() is None:
        if time.monotonic() - t0 >= after and any(s.stat().st_size == 0 for s in cache.rglob("*.so") if s.exists()):
            break
        time.sleep(0.005)
    else:
        raise SystemExit(f"the run ended (rc {p.returncode}) before a library was being linked: see {log}")
    procs = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
    for q in procs:
        try:
            q.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    p.wait()
    return time.monotonic() - t0


def arm_env(root: Path, code: str | None) -> dict[str, str]:
    (root / "tmp").mkdir(parents=True)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(root / "ind"), "TMPDIR": str(root / "tmp")}
    if code:
        env["PYTHONPATH"] = code
    return env


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kill-after", type=float, default=70.0)
    ap.add_argument("--code", default=None, help="a bringup checkout to run instead of this one")
    ap.add_argument("--skip-clean", action="store_true")
    ap.add_argument("--keep", default=None, help="keep the arms' directories here")
    ap.add_argument("cmd", nargs="*", default=["zoo", "--source", "hf-causal", "--limit", "4"])
    a = ap.parse_args()
    work = Path(a.keep or tempfile.mkdtemp(prefix="kill-mid-compile-"))
    clean: dict[str, str] = {}
    if not a.skip_clean:
        env = arm_env(work / "clean", a.code)
        s = bringup(["--db", str(work / "clean" / "r.db"), *a.cmd], env, work / "clean" / "log")
        clean = verdicts(work / "clean" / "r.db", run_ids(work / "clean" / "r.db")[0])
        print(f"clean ({s:.0f} s): {clean}")
    root = work / "killed"
    env = arm_env(root, a.code)
    db = root / "r.db"
    at = kill_mid_link(["--db", str(db), *a.cmd], env, root / "ind", a.kill_after, root / "log")
    run_id = run_ids(db)[0]
    print(f"killed at {at:.0f} s, {len(verdicts(db, run_id))} case(s) finished")
    s = bringup(["--db", str(db), "--resume", run_id], env, root / "log")
    resumed = verdicts(db, run_id)
    s2 = bringup(["--db", str(db), *a.cmd], env, root / "log")
    again = verdicts(db, run_ids(db)[-1])
    for name, got, secs in (("resumed", resumed, s), ("next run", again, s2)):
        differ = sorted(k for k in got if clean and got[k].split(" ")[0] != clean.get(k))
        print(f"{name} ({secs:.0f} s): {got}")
        if clean:
            print(f"  {len(differ)} of {len(got)} verdicts differ from the clean run: {differ}")
    print(f"arms in {work}")


if __name__ == "__main__":
    main()
