"""`bringup bisect` end to end on a tiny plugin built as wheels at several versions (tests/bisect/fakeplugin.py):
nothing is downloaded (PIP_NO_INDEX, the wheels' directory), no torch is installed, each env is a fresh venv
with one small wheel in it.

- the fault introduced at 0.4.0 is found, within ceil(log2 k) + 2 environments, and a second bisection reuses
  the cached environments;
- a candidate pip cannot install is a skip with pip's reason (the answer still correct); an endpoint a pip
  constraint refuses makes the bisection say it cannot bisect;
- a candidate whose verdict alternates is reported flaky, never picked;
- a SIGKILL mid-bisection, then `bringup --resume RUN_ID`: nothing finished is run again;
- releases from the configured index (`--between`, here a find-links directory);
- a case of a stored run, re-run in each env through that env's bringup.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bisect.fakeplugin import versions, write_repro, write_wheels
from tests.conftest import REPO, load_json, run_cli

PKG = "bringup-fakeplugin"


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {"PIP_NO_INDEX": "1", "BRINGUP_ENV_CACHE": str(tmp / "envs"), "BRINGUP_DB": str(tmp / "b.db"), **extra}


def _bisect(tmp: Path, *args: str, rc: int | None = 0, env: dict[str, str] | None = None):
    p = run_cli(["bisect", *args, "--json", str(tmp / "answer.json")], tmp, env=env or _env(tmp), timeout=300)
    assert rc is None or p.returncode == rc, (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return p, load_json(tmp / "answer.json")


def _candidate(ans: dict, version: str) -> dict:
    return next(c for c in ans["candidates"] if c["version"] == version)


def test_a_fault_at_one_build_is_found_within_the_env_bound_and_envs_are_reused(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(6), fault_from="0.4.0")
    repro = write_repro(tmp_path / "repro.py")
    p, ans = _bisect(tmp_path, str(repro), "--wheels", str(tmp_path / "wheels"))
    assert ans["result"] == "found" and ans["exit_code"] == 0
    assert ans["first_new"]["version"] == "0.4.0" and ans["last_old"]["version"] == "0.3.0"
    assert (ans["old"]["verdict"], ans["new"]["verdict"]) == ("pass", "fail_numeric")
    fg = ans["figures"]
    assert fg["environments"] <= math.ceil(math.log2(6)) + 2 == fg["bound"]
    assert fg["built"] == fg["environments"] and fg["runs"] == 2 * fg["environments"]  # --repeat 2 by default
    assert len([d for d in (tmp_path / "envs").iterdir() if d.is_dir()]) == fg["environments"]
    first = ans["first_new"]
    assert first["installed"] == {PKG: "0.4.0"} and first["seen"] == ["fail_numeric", "fail_numeric"]
    assert first["figures"]["scale error"] == pytest.approx(0.01)
    assert first["release_notes"] == "https://example.invalid/fakeplugin/0.4.0"  # the wheel's metadata names it
    assert "bringup-fakeplugin==0.4.0 is the first fail_numeric" in p.stdout
    # the report renders the bisection from the store; the run's summary.json carries the answer
    run_dir = tmp_path / ans["run_id"]
    page = (run_dir / "report.html").read_text()
    assert "Bisection" in page and "first fail_numeric" in page and "scale error" in page
    assert load_json(run_dir / "summary.json")["bisect"]["first_new"]["label"] == first["label"]
    # a second bisection, every candidate this time: the envs already made are reused, not rebuilt
    _, ans2 = _bisect(tmp_path, str(repro), "--wheels", str(tmp_path / "wheels"), "--all", "--repeat", "1")
    assert ans2["figures"]["reused"] == fg["environments"] and ans2["figures"]["built"] == 6 - fg["environments"]
    assert [c["from"] + ">" + c["to"] for c in ans2["changes"]] == [f"{PKG}==0.3.0>{PKG}==0.4.0"]


def test_an_uninstallable_candidate_is_a_skip_and_the_answer_holds(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(8), fault_from="0.4.0", broken=["0.2.0"])
    repro = write_repro(tmp_path / "repro.py")
    _, ans = _bisect(tmp_path, str(repro), "--wheels", str(tmp_path / "wheels"), "--repeat", "1")
    assert ans["result"] == "found" and ans["first_new"]["version"] == "0.4.0"
    assert [s["label"] for s in ans["skipped"]] == [f"{PKG}==0.2.0"]
    skipped = _candidate(ans, "0.2.0")
    assert skipped["verdict"] == "skip" and skipped["outcome"] == "skip"
    assert "bringup-no-such-dependency" in skipped["reason"]  # pip's own one-line reason
    assert not (tmp_path / "envs" / skipped["env"].get("key", "-")).exists()  # nothing half-made is kept


def test_an_endpoint_a_constraint_refuses_is_said_so(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(6), fault_from="0.4.0")
    repro = write_repro(tmp_path / "repro.py")
    (tmp_path / "cap.txt").write_text(f"{PKG}<=0.5.0\n")
    env = _env(tmp_path, PIP_CONSTRAINT=str(tmp_path / "cap.txt"))
    p, ans = _bisect(tmp_path, str(repro), "--wheels", str(tmp_path / "wheels"), "--repeat", "1", rc=1, env=env)
    assert ans["result"] == "endpoint_unusable" and "new endpoint skip" in ans["message"]
    assert "constraint" in _candidate(ans, "0.6.0")["reason"]
    assert ans["figures"]["environments"] == 2  # the endpoints, nothing else


def test_a_run_past_its_budget_is_budget_and_sets_are_candidates(tmp_path: Path) -> None:
    """Explicit requirement sets as candidates; a run past --run-budget is killed and is `budget`: here both
    endpoints, so there is nothing to bisect (exit 1, said)."""
    write_wheels(tmp_path / "wheels", versions(4), fault_from="0.4.0")
    repro = write_repro(tmp_path / "repro.py")
    env = _env(tmp_path, PIP_FIND_LINKS=str(tmp_path / "wheels"), FAKEPLUGIN_SLEEP="30")
    sets = ["--set", f"{PKG}==0.1.0", "--set", f"{PKG}==0.3.0"]
    p, ans = _bisect(tmp_path, str(repro), *sets, "--repeat", "1", "--run-budget", "2", rc=1, env=env)
    assert ans["result"] == "no_change" and ans["old"]["verdict"] == ans["new"]["verdict"] == "budget"
    assert "over the run budget (2 s)" in ans["candidates"][0]["reason"]
    assert [c["installed"] for c in ans["candidates"]] == [{PKG: "0.1.0"}, {PKG: "0.3.0"}]
    assert "no change between the endpoints: both endpoints are budget" in p.stdout


def test_a_flaky_candidate_is_reported_and_never_picked(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(6), fault_from="0.4.0", flaky=["0.3.0"])
    repro = write_repro(tmp_path / "repro.py")
    p, ans = _bisect(tmp_path, str(repro), "--wheels", str(tmp_path / "wheels"), rc=1)
    flaky = _candidate(ans, "0.3.0")
    assert flaky["verdict"] == "flaky" and sorted(flaky["seen"]) == ["fail_numeric", "pass"]
    assert ans["flaky"] == [f"{PKG}==0.3.0"] and ans["result"] == "ambiguous"
    assert ans["between"] == [f"{PKG}==0.3.0", f"{PKG}==0.4.0"] and ans["first_new"]["version"] == "0.4.0"
    assert "flaky" in p.stdout


def test_releases_come_from_the_configured_index(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(5), fault_from="0.4.0")
    repro = write_repro(tmp_path / "repro.py")
    env = _env(tmp_path, PIP_FIND_LINKS=str(tmp_path / "wheels"))
    old, new = f"{PKG}==0.2.0", PKG  # a bare name: the newest the index lists
    _, ans = _bisect(tmp_path, str(repro), "--between", old, new, "--repeat", "1", env=env)
    assert [c["label"] for c in ans["candidates"]] == [f"{PKG}=={v}" for v in ("0.2.0", "0.3.0", "0.4.0", "0.5.0")]
    assert ans["first_new"]["label"] == f"{PKG}==0.4.0"


def test_a_kill_mid_bisection_then_resume_runs_nothing_twice(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(8), fault_from="0.4.0")
    repro = write_repro(tmp_path / "repro.py")
    db = tmp_path / "b.db"
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **_env(tmp_path, FAKEPLUGIN_SLEEP="1")}
    cmd = [sys.executable, "-m", "bringup.cli", "bisect", str(repro), "--wheels", str(tmp_path / "wheels")]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            if _finished(db) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the bisection ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = {r[0]: r for r in _q(db, "SELECT case_id, name, status, finished_at FROM cases")}
    assert len(before) >= 2
    (run_id,) = [r[0] for r in _q(db, "SELECT run_id FROM runs")]
    p = run_cli(["--resume", run_id], tmp_path, env=_env(tmp_path), timeout=300)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    after = {r[0]: r for r in _q(db, "SELECT case_id, name, status, finished_at FROM cases")}
    assert all(after[k] == v for k, v in before.items())  # finished candidates kept as they were, not re-run
    assert len(after) == len(set(r[1] for r in after.values())) <= math.ceil(math.log2(8)) + 2
    info = json.loads(_q(db, "SELECT info FROM runs")[0][0])
    ans = info["bisect_answer"]
    assert ans["first_new"]["version"] == "0.4.0" and ans["result"] == "found"
    assert info["measured"]["command"] == "bisect" and "env_cache" not in info["measured"]  # report --history's key
    assert _q(db, "SELECT status FROM runs") == [("finished",)]


def test_a_stored_case_is_rerun_in_each_env(tmp_path: Path) -> None:
    """A case of a stored run (its entry in the plugin) re-run in each candidate env through that env's bringup
    (--inherit-site: the envs see this Python's torch and bringup; only the plugin moves)."""
    from bringup.case import Case
    from bringup.store import Store

    write_wheels(tmp_path / "wheels", versions(5), fault_from="0.4.0")
    with Store(tmp_path / "b.db") as st:
        rid = st.new_run("fakeplug", ["fakeplug"], "cpu", "cpu", {"imports": []})
        st.plan(rid, [Case("fakeplug", "scale", {"x": 1}, "bringup_fakeplugin:run_case", budget_s=120)])
        st.end_run(rid, "finished")
    args = ["fakeplug/scale", "--wheels", str(tmp_path / "wheels"), "--between", f"{PKG}==0.3.0", f"{PKG}==0.5.0"]
    _, ans = _bisect(tmp_path, *args, "--inherit-site", "--repeat", "1")
    assert ans["target"]["kind"] == "case" and ans["target"]["from_run"] == rid
    assert ans["first_new"]["version"] == "0.4.0" and ans["first_new"]["verdict"] == "fail_numeric"
    assert "plugin 0.4.0: scale error 0.01" in ans["first_new"]["reason"]
    assert ans["first_new"]["figures"]["max_rel_err"] == pytest.approx(0.01)


@pytest.mark.slow  # ~80 s (bringup's wheel built from this tree); cheap form: test_a_stored_case_is_rerun_in_each_env
def test_a_stored_case_without_bringups_dependencies_is_a_skip(tmp_path: Path) -> None:
    """Without --inherit-site each env gets bringup from a wheel built once from this tree, and bringup's own
    dependencies from the index: with no index reachable (PIP_NO_INDEX), pip cannot install them, so every
    candidate is a skip with pip's reason, and the bisection says it cannot bisect."""
    from bringup.case import Case
    from bringup.store import Store

    write_wheels(tmp_path / "wheels", versions(2), fault_from="0.2.0")
    with Store(tmp_path / "b.db") as st:
        rid = st.new_run("fakeplug", ["fakeplug"], "cpu", "cpu", {"imports": []})
        st.plan(rid, [Case("fakeplug", "scale", {"x": 1}, "bringup_fakeplugin:run_case", budget_s=120)])
    _, ans = _bisect(tmp_path, "fakeplug/scale", "--wheels", str(tmp_path / "wheels"), "--repeat", "1", rc=1)
    assert ans["result"] == "endpoint_unusable" and len(ans["skipped"]) == 2
    assert all("Could not find a version that satisfies" in s["reason"] for s in ans["skipped"])
    wheels = list((tmp_path / "envs" / "bringup-wheels").glob("*/bringup-*.whl"))
    assert len(wheels) == 1  # built once, for both candidates


def _finished(db: Path) -> int:
    """Candidates stored so far (0 while the database or its tables are still being made)."""
    try:
        return int(_q(db, "SELECT count(*) FROM cases")[0][0]) if db.exists() else 0
    except sqlite3.OperationalError:
        return 0


def _q(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db, timeout=60) as c:
        return c.execute(sql).fetchall()


def test_the_repro_fixture_runs_alone(tmp_path: Path) -> None:
    """The fixture itself: the plugin imports from a wheel on sys.path and the repro's exit code is its verdict."""
    (whl,) = write_wheels(tmp_path / "w", ["0.4.0"], fault_from="0.4.0")
    repro = write_repro(tmp_path / "repro.py")
    p = subprocess.run(
        [sys.executable, str(repro)],
        env={**os.environ, "PYTHONPATH": str(whl)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1 and "scale error: 0.01" in p.stdout


@pytest.mark.slow  # cheap form: the search's slots and env budget in test_plan.py (in-process, no Ray)
@pytest.mark.xdist_group("ray")  # one local Ray instance at a time
def test_ray_runs_candidates_in_parallel(tmp_path: Path) -> None:
    write_wheels(tmp_path / "wheels", versions(9), fault_from="0.6.0")
    repro = write_repro(tmp_path / "repro.py")
    p = run_cli(
        [
            "--executor",
            "ray",
            "--workers",
            "3",
            "bisect",
            str(repro),
            "--wheels",
            str(tmp_path / "wheels"),
            "--repeat",
            "1",
            "--json",
            str(tmp_path / "answer.json"),
        ],
        tmp_path,
        env=_env(tmp_path),
        timeout=600,
    )
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    ans = load_json(tmp_path / "answer.json")
    assert ans["first_new"]["version"] == "0.6.0" and ans["last_old"]["version"] == "0.5.0"
    rounds = [ln for ln in p.stdout.splitlines() if ln.startswith("bisect: running ")]
    assert rounds[1].count(f"{PKG}==") == 3, rounds  # after the endpoints: three candidates at once
