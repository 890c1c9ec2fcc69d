"""tests/zygote.py: a CLI call forked from the torch-imported interpreter is the same process-level thing as
`python -m bringup.cli` (exit code, stdout, stderr, cwd, env, its own session), and a call it cannot serve
the same way is started as a real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import zygote

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote forks: Linux only")


def _both(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], ...]:
    forked = zygote.run(args, cwd, env, 300)
    assert forked is not None, "the zygote did not serve a call it should"
    real = subprocess.run(
        [sys.executable, "-m", "bringup.cli", *args], cwd=cwd, env=env, text=True, capture_output=True, timeout=300
    )
    return forked, real


def test_a_forked_call_is_the_real_process_call(tmp_path: Path) -> None:
    # the session's environment (an earlier in-process test may have left variables in this one's)
    env = {**zygote.session_env(), "PYTHONWARNINGS": "ignore", "BRINGUP_DB": str(tmp_path / "x.db")}
    # bad input: exit 2 and the same one line, no traceback
    forked, real = _both(["--device", "cpu", "ops", "--budget", "x"], tmp_path, env)
    assert forked.returncode == real.returncode == 2
    assert forked.stderr == real.stderr and "Traceback" not in forked.stderr
    # a real run: the cwd and the env (BRINGUP_DB) reach the child; its exit code and output come back
    forked, real = _both(["--device", "cpu", "selftest", "--plan", "ok*2"], tmp_path, env)
    assert forked.returncode == real.returncode == 0, forked.stderr[-2000:]
    for p in (forked, real):
        assert "2/2 pass; 0 gaps, 0 failures" in p.stdout and "[2/2] selftest/001-ok: pass" in p.stderr, p
    assert (tmp_path / "x.db").is_file() and not (tmp_path / "bringup-results").exists()


def test_what_a_fork_cannot_give_is_started(tmp_path: Path) -> None:
    z = zygote.Zygote()
    try:
        assert z.ok
        base = dict(z.env)
        assert z.serves({**base, "BRINGUP_TESTDEV_FAULTS": "scale:silu=1.01", "HF_HUB_OFFLINE": "1"})
        assert z.serves({**base, "PIP_NO_INDEX": "1"})  # read by the pip processes bisect starts, not at start-up
        assert z.serves({**base, "TRIAGE_LOWERING_GAP": "silu", "FAKEPLUGIN_SLEEP": "1"})  # the test plugins' knobs
        assert z.serves({**base, "PYTHONPATH": str(tmp_path)})
        # inductor writes its cache dir into os.environ at a test process's first compile: still served
        assert z.serves({**base, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind"), "RAY_CLIENT_MODE": "0"})
        (tmp_path / "sitecustomize.py").write_text("")
        assert not z.serves({**base, "PYTHONPATH": str(tmp_path)})  # runs at start-up: a fork would skip it
        other = {**base, "OMP_NUM_THREADS": str(int(base.get("OMP_NUM_THREADS", "1")) + 1)}  # not the zygote's
        assert not z.serves(other)  # read when torch loads
        assert not z.serves({k: v for k, v in base.items() if k != "PATH"})
        assert "OMP_NUM_THREADS" in (z.refusal(other) or "")
    finally:
        z.close()


def test_a_call_past_its_timeout_is_killed_and_raises(tmp_path: Path) -> None:
    z = zygote.Zygote()
    try:
        env = {**z.env, "BRINGUP_DB": str(tmp_path / "t.db")}
        with pytest.raises(subprocess.TimeoutExpired):
            z.run(["--device", "cpu", "selftest", "--plan", "sleep:60"], tmp_path, env, timeout=8)
        assert not z.ok  # out of step: later calls start real processes
    finally:
        z.close()
