"""The Ray executor's own parts: its settings, resource shares, address checks, and the backstop that
turns a task that never answers into `crash` instead of a hung sweep. (Fault statuses, lost-worker
retries and kill/resume under Ray are in test_fault_injection.py and test_kill_resume.py.)"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import psutil
import pytest

import bringup.runner.ray as ray_mod
from bringup.case import Case, CaseResult, Status
from bringup.errors import BadInput


def test_retries_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ray_mod.RETRIES_ENV, raising=False)
    assert ray_mod.retries_from_env() == ray_mod.DEFAULT_RETRIES
    monkeypatch.setenv(ray_mod.RETRIES_ENV, "0")
    assert ray_mod.retries_from_env() == 0
    for bad in ("-1", "two", "1.5", ""):
        monkeypatch.setenv(ray_mod.RETRIES_ENV, bad)
        with pytest.raises(BadInput, match=ray_mod.RETRIES_ENV):
            ray_mod.retries_from_env()


def test_resource_share_per_slot() -> None:
    assert ray_mod._amount(8, 4) == 1.0  # enough devices: one each
    assert ray_mod._amount(1, 2) == 0.5  # one GPU, two slots: they share it
    assert ray_mod._amount(2, 3) == 0.6666  # Ray takes at most 4 decimals; never more than the total
    assert 3 * ray_mod._amount(2, 3) <= 2


def test_address_checks_fail_fast() -> None:
    for bad in ("nonsense", "host:", ":6379", "host:port"):
        with pytest.raises(BadInput, match="HOST:PORT"):
            ray_mod.check_reachable(bad)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(BadInput, match="cannot reach"):
        ray_mod.check_reachable(f"127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(BadInput, match="cannot reach"):
        ray_mod.check_reachable(f"ray://127.0.0.1:{port}", timeout_s=2)
    ray_mod.check_reachable("auto")  # resolved by Ray itself


@pytest.mark.slow
def test_a_task_that_never_answers_becomes_crash_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the backstop's patience cut to about nothing, no task can answer in time: every case must
    come back as `crash` (the sweep ends), and the killed actors' worker processes must not linger."""
    from bringup.runner.process import WorkerSpec

    monkeypatch.setattr(ray_mod, "STARTUP_TIMEOUT_S", 0.0)
    monkeypatch.setattr(ray_mod, "_GRACE_S", 0.0)
    monkeypatch.setenv(ray_mod.RETRIES_ENV, "0")
    spec = WorkerSpec(device="cpu", log_dir=str(tmp_path / "logs"))
    ex = ray_mod.RayExecutor(spec, workers=2)
    params = lambda i: {"i": i, "op": "sleep", "arg": 30, "tag": "backstop", "phase_budget": 1.0}
    cases = [Case("selftest", f"{i}-sleep", params(i), "bringup.selftest.suite:run_item", 0.5) for i in range(3)]
    got: list[CaseResult] = []
    before = {p.pid for p in psutil.process_iter()}
    ex.run(cases, tmp_path, got.append)
    assert sorted(r.name for r in got) == sorted(c.name for c in cases)
    assert {r.status for r in got} == {Status.CRASH}
    assert all("no answer from the worker" in r.reason for r in got), [r.reason for r in got]
    new = [p for p in psutil.process_iter() if p.pid not in before]
    workers = [p for p in new if "bringup.runner.worker" in " ".join(_cmd(p))]
    gone, alive = psutil.wait_procs(workers, timeout=20)
    assert not alive


def _cmd(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


@pytest.mark.xdist_group("ray")  # one local Ray instance at a time (make test runs two pytest workers)
def test_custom_resource_for_a_privateuse1_device(tmp_path: Path) -> None:
    """On a non-cuda accelerator each slot asks Ray for a custom resource named after the device
    type; with 1 device and 2 slots they share it. Cases still run, crash and finish there."""
    from tests.conftest import run_cli

    p = run_cli(
        [
            "--import",
            "bringup.testdev",
            "--device",
            "testdev",
            "--executor",
            "ray",
            "--workers",
            "2",
            "selftest",
            "--plan",
            "ok*2,segv,unsupported",
            "--json",
            "out.json",
        ],
        cwd=tmp_path,
        timeout=900,
    )
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr[-2000:])
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("ray: "))
    assert "local instance, 2 slot(s)" in line and "testdev=" in line, line
    rows = {r["name"]: r for r in json.loads((tmp_path / "out.json").read_text())["cases"]}
    assert rows["000-ok"]["status"] == rows["001-ok"]["status"] == "pass"
    assert rows["002-segv"]["status"] == "crash" and "SIGSEGV" in rows["002-segv"]["reason"]
    assert rows["003-unsupported"]["status"] == "unsupported"
