"""Workers forked by the CLI's launcher (bringup.runner.launcher) behave as workers started from scratch:
same results, budgets and signals seen by the driver, and whatever a fork cannot give is started instead."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, run_cli

# A pristine process (as the CLI is when it forks its launcher) drives WorkerProcess directly.
SCRIPT = r"""
import json, os, signal, sys, time
from pathlib import Path

from bringup.runner import launcher

assert launcher.pristine() is None, launcher.pristine()
launcher.prefork()
L = launcher.launcher()
assert L is not None

import psutil

from bringup.case import Case
from bringup.runner.process import WorkerProcess, WorkerSpec

tmp = Path(sys.argv[1])
spec = WorkerSpec(device="cpu", log_dir=str(tmp / "logs"))
out = {}


def case(op, arg=None, budget=60.0):
    params = {"i": 0, "op": op, "arg": arg, "tag": "t", "phase_budget": 1.0}
    return Case("selftest", op, params, "bringup.selftest.suite:run_item", budget)


def first_line(w):
    return w.log_path.read_text().splitlines()[0]


def go(name, c, extra_env=None):
    w = WorkerProcess(spec, 0, extra_env=extra_env)
    r, _ = w.run(c, str(tmp / "art"), str(tmp))
    pid = w.proc.pid
    w.close()
    time.sleep(0.3)
    alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    out[name] = {"status": r.status.value, "reason": r.reason, "kind": type(w.proc).__name__, "log": first_line(w),
                 "pid": pid, "rc": w.proc.returncode, "alive": alive}


go("ok", case("sleep", 0.1))
go("threads", case("sleep", 0.1), {"OMP_NUM_THREADS": "1", "TMPDIR": str(tmp)})
go("unsafe_env", case("sleep", 0.1), {"LD_BIND_NOW": "1"})
go("segv", case("segv"))
go("budget", case("hang", budget=2.0))
go("phase", case("phase", 30))

w = WorkerProcess(spec, 0)
w.wait_ready()
os.kill(L.pid, signal.SIGKILL)  # the launcher dies under a live worker: the worker goes too, the driver is told
time.sleep(1.5)
r, _ = w.run(case("sleep", 0.1), str(tmp / "art"), str(tmp))
w.close()
out["launcher_killed"] = {"status": r.status.value, "reason": r.reason}
go("after", case("sleep", 0.1))
print(json.dumps(out))
"""


def test_forked_workers_answer_as_started_ones(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    forked = "worker forked by the launcher"
    ok = out["ok"]
    assert ok["status"] == "pass" and ok["kind"] == "ForkedProcess" and forked in ok["log"], ok
    assert ok["rc"] == 0 and not ok["alive"], ok  # stdin closed: the worker ended, was reaped and said so
    # thread count and TMPDIR are applied in the child; any other variable read at start-up is started from scratch
    assert out["threads"]["kind"] == "ForkedProcess" and out["threads"]["status"] == "pass", out["threads"]
    un = out["unsafe_env"]
    assert un["kind"] == "Popen" and un["status"] == "pass", un
    assert un["log"] == "=== worker started from scratch (environment differs in LD_BIND_NOW)", un
    # the driver's verdicts on a forked worker: its signal, the case's and a phase's budget, and it is gone
    assert out["segv"]["status"] == "crash" and "SIGSEGV" in out["segv"]["reason"], out["segv"]
    assert out["budget"]["status"] == "budget" and "case exceeded 2 s" in out["budget"]["reason"], out["budget"]
    assert out["phase"]["status"] == "budget" and "compile exceeded its budget" in out["phase"]["reason"]
    for name in ("segv", "budget", "phase"):
        assert out[name]["kind"] == "ForkedProcess" and not out[name]["alive"], out[name]
    # a launcher that dies takes its live worker with it (a crash, not a hang); later workers start from scratch
    assert out["launcher_killed"]["status"] == "crash", out["launcher_killed"]
    after = out["after"]
    assert after["kind"] == "Popen" and after["status"] == "pass", after
    assert after["log"].startswith("=== worker started from scratch (the launcher"), after


def test_the_cli_forks_its_workers_and_a_library_call_does_not(tmp_path: Path) -> None:
    """`bringup` (the program) forks its pool's workers; BRINGUP_WORKER_FORK=0 starts them from scratch, and so
    does `bringup.cli.main(argv)` called inside someone else's process."""
    for flag, want in (("1", "=== worker forked by the launcher"), ("0", "=== worker started from scratch")):
        db = tmp_path / flag / "r.db"
        run_cli(
            ["--db", str(db), "--workers", "2", "selftest", "--plan", "ok*2"],
            cwd=tmp_path,
            env={"BRINGUP_WORKER_FORK": flag},
            check_rc=0,
        )
        logs = sorted(db.parent.glob("*/logs/worker-*.log"))
        assert logs and all(log.read_text().startswith(want) for log in logs), [log.read_text()[:200] for log in logs]
    db = tmp_path / "lib" / "r.db"
    code = (
        "import sys; from bringup.cli import main; from bringup.runner import launcher; "
        "rc = main(sys.argv[1:]); print(rc, launcher.launcher())"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, "--db", str(db), "selftest", "--plan", "ok"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.stdout.strip().splitlines()[-1] == "0 None", p.stdout[-2000:] + p.stderr[-2000:]
    (log,) = db.parent.glob("*/logs/worker-*.log")
    assert log.read_text().startswith("=== worker started from scratch (no launcher in this process)")


def test_workers_share_the_cores_and_a_users_setting_stands(monkeypatch) -> None:
    """N workers on one host: cores/N intra-op threads and inductor compile processes each (at least 1); one
    worker is left alone; a user's own OMP_NUM_THREADS / TORCHINDUCTOR_COMPILE_THREADS are not overridden."""
    import os

    from bringup.runner.process import thread_env

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    assert thread_env(1) == {}
    assert thread_env(2) == {"OMP_NUM_THREADS": "4", "TORCHINDUCTOR_COMPILE_THREADS": "4"}
    assert thread_env(16) == {"OMP_NUM_THREADS": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert thread_env(2) == {"TORCHINDUCTOR_COMPILE_THREADS": "4"}
