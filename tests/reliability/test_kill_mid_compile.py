"""No poison from a kill (docs/reliability.md, "Compile caches after a kill"): a run SIGKILLed while a worker's
compiler writes a kernel library in place leaves it empty in the compile cache; the resumed run and every later
run must give the verdicts a clean machine gives. Before bringup set such artifacts aside, the resume and every
later run reported the case failed ("...so: file too short").

Cheap form (make test): selftest's `build:S` item, inductor's own layout, lock and rule (build what is missing,
trust what exists) with an in-place write of S seconds, in a private TORCHINDUCTOR_CACHE_DIR. Slow form: the same
with a real torch.compile (selftest `inductor`), killed while the linker writes a library.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bringup.runner import compile_cache
from tests.conftest import run_cli

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="flock and ELF libraries: Linux")


def _rows(db: Path, run_id: str | None = None) -> list[tuple[str, str, str, dict]]:
    with sqlite3.connect(db, timeout=60) as c:
        run_id = run_id or c.execute("SELECT run_id FROM runs ORDER BY started_at DESC").fetchone()[0]
        rows = c.execute("SELECT name, status, reason, fields FROM cases WHERE run_id = ? ORDER BY name", (run_id,))
        return [(n, s, r or "", json.loads(f or "{}")) for n, s, r, f in rows]


def _run_id(db: Path) -> str:
    with sqlite3.connect(db, timeout=60) as c:
        return str(c.execute("SELECT run_id FROM runs ORDER BY started_at").fetchone()[0])


def _kill_run_when(args: list[str], cwd: Path, env: dict[str, str], ready, timeout: float = 300) -> None:
    """Start `bringup ARGS` and SIGKILL it with every process under it (launcher, workers, compilers) at once,
    the moment `ready()` holds: the SIGKILL of a whole run."""
    log = open(cwd / f"killed-{time.time_ns()}.log", "wb")
    p = subprocess.Popen(
        [sys.executable, "-m", "bringup.cli", *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env
    )
    t_end = time.monotonic() + timeout
    while not ready():
        assert p.poll() is None, (cwd / log.name).read_text()[-3000:]
        assert time.monotonic() < t_end, "the run never reached the moment to kill it"
        time.sleep(0.005)
    procs = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
    for q in procs:
        try:
            q.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    p.wait()
    psutil.wait_procs(procs, timeout=10)


def _library(env: dict[str, str], tag: str) -> Path:
    code = f"from bringup.selftest.kernels import library_path; print(library_path({tag!r})[0])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def test_sigkill_mid_build_then_resume_then_again_gives_a_clean_machines_verdicts(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")}
    db = tmp_path / "r.db"
    plan = ["selftest", "--plan", "ok,build:4,ok", "--tag", "killmid"]
    lib = _library(env, "killmid")

    _kill_run_when(["--db", str(db), *plan], tmp_path, env, lambda: lib.exists())
    assert lib.exists() and lib.stat().st_size == 0  # what a killed linker leaves, under the final name
    run_id = _run_id(db)

    out = run_cli(["--db", str(db), "--resume", run_id], cwd=tmp_path, env=env, check_rc=0)
    resumed = _rows(db, run_id)
    assert [(n, s) for n, s, _, _ in resumed] == [("000-ok", "pass"), ("001-build-4", "pass"), ("002-ok", "pass")]
    # set aside by the resumed worker's check before its first case (no re-run was needed), then rebuilt
    assert lib.with_name(lib.name + compile_cache.QUARANTINE_SUFFIX).stat().st_size == 0
    assert lib.stat().st_size > 0 and compile_cache.damage(lib) is None
    assert "re-run clean" not in out.stderr and not resumed[1][3].get("rerun")

    run_cli(["--db", str(db), *plan], cwd=tmp_path, env=env, check_rc=0)  # the next day's run
    assert {s for _, s, _, _ in _rows(db)} == {"pass"}


def test_a_case_that_meets_a_damaged_library_is_rerun_clean_and_says_so(tmp_path: Path) -> None:
    """The backstop: damage the sweep cannot prove orphaned (no lock file, seconds old: a writer outside
    inductor's locks may still be at it) is met by the case; it is re-run once in a fresh worker with private,
    empty caches, only that result is stored, and it says it was re-run and why. The artifact it named is then
    set aside (the case took its lock: nobody writes it), so the next case, in a new warm worker, rebuilds it."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")}
    lib = _library(env, "planted")
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    db = tmp_path / "r.db"
    out = run_cli(
        ["--db", str(db), "selftest", "--plan", "build:0,build:0", "--tag", "planted"], tmp_path, env, check_rc=0
    )
    (n1, s1, _, f1), (n2, s2, _, f2) = _rows(db)
    assert (s1, s2) == ("pass", "pass")
    rerun = f1["rerun"]
    assert rerun["why"] == "damaged compile artifact (file too short)"
    assert rerun["first"].startswith("error: OSError: ") and str(lib) in rerun["first"]
    assert rerun["set_aside"] == [f"{lib} (empty (0 bytes))"]
    assert not Path(f1["library"]).is_relative_to(tmp_path / "ind")  # built in the private cache
    assert "re-run clean: damaged compile artifact (file too short)" in out.stderr
    assert not f2.get("rerun") and f2["built"] is True and Path(f2["library"]) == lib  # the shared cache, rebuilt
    assert not list(tmp_path.glob("*/clean-cache"))  # the private cache is gone with the re-run


def test_a_budget_kill_mid_build_is_swept_before_the_next_case_loads_it(tmp_path: Path) -> None:
    """bringup's own budget kills a worker while its compiler writes: the driver sets the damage aside at once
    (said on the killed case), so the next case, which needs the same library, builds it instead of failing."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")}
    db = tmp_path / "r.db"
    args = ["--db", str(db), "selftest", "--plan", "build:120,build:0", "--tag", "budget", "--case-budget", "8"]
    run_cli(args, tmp_path, env)
    (_, s1, r1, f1), (_, s2, _, f2) = _rows(db)
    assert s1 == "budget", r1
    assert "set aside" in f1.get("compile_cache", "") and "empty (0 bytes)" in f1["compile_cache"]
    assert s2 == "pass" and f2["built"] is True and not f2.get("rerun")


@pytest.mark.slow  # ~1-3 min of cold inductor compiles; the cheap form is the build:S test above
def test_real_inductor_sigkill_while_linking_then_resume_then_again(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    env.pop("TORCHINDUCTOR_VEC_ISA_OK", None)  # its ISA probe libraries are written in place too
    db = tmp_path / "r.db"
    plan = ["selftest", "--plan", "inductor,ok", "--tag", "realkill", "--case-budget", "900"]

    def an_empty_library() -> bool:
        return any(p.stat().st_size == 0 for p in (tmp_path / "ind").glob("*/*.so") if p.exists())

    _kill_run_when(["--db", str(db), *plan], tmp_path, env, an_empty_library, timeout=600)
    run_id = _run_id(db)
    run_cli(["--db", str(db), "--resume", run_id], tmp_path, env, check_rc=0, timeout=900)
    assert {s for _, s, _, _ in _rows(db, run_id)} == {"pass"}
    run_cli(["--db", str(db), *plan], tmp_path, env, check_rc=0, timeout=900)
    assert {s for _, s, _, _ in _rows(db)} == {"pass"}
    assert list((tmp_path / "ind").glob("*/*.so" + compile_cache.QUARANTINE_SUFFIX))  # what the kill left, set aside


def test_the_ray_actors_body_reruns_on_its_own_nodes_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ray executor's actor body (CaseSlot, called here without Ray) settles a case where it ran, on that
    node's caches, and drops the warm worker that met the damage."""
    from bringup.case import Case
    from bringup.runner.process import WorkerSpec
    from bringup.runner.ray import CaseSlot

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "ind"))
    lib = _library(dict(os.environ), "ray")
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    slot = CaseSlot(WorkerSpec(device="cpu", log_dir=str(tmp_path / "logs")), 0)
    params = {"i": 0, "op": "build", "arg": 0.0, "tag": "ray", "phase_budget": 1.0}
    case = Case("selftest", "000-build", params, "bringup.selftest.suite:run_item", 120)
    try:
        got = slot.run(case.to_json(), str(tmp_path / "art"), str(tmp_path))
    finally:
        if slot.worker is not None:
            slot.worker.close()
    assert got["status"] == "pass" and got["fields"]["rerun"]["why"] == "damaged compile artifact (file too short)"
    assert slot.worker is None
