"""Shared test helpers: run the real CLI in a subprocess (real processes, no mocks of the runner), or the same
`bringup.cli.main` in this process (`run_main`, the `bringup_inproc` fixture) where no device work is done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import zygote

REPO = Path(__file__).resolve().parents[1]

# Inductor proves this machine's vector ISA in every process whose compile cache is empty: it builds and
# loads a test program per candidate, ~15 s of CPU (measured: a tiny compile 37 -> 19 s). The train suite
# gives every cold case empty caches by design, so the tests paid it some tens of times. Proved once here
# (in a child, against the shared default cache), and where trusting the cpu's flags picks the same ISA
# the switch is set for the session (`TORCHINDUCTOR_VEC_ISA_OK=1`: the same kernels and compile flags;
# the sub-feature probes run whatever it says). The artifact tests that count those proofs unset it.
# The check is the artifact's own adoption of a proved pick (bringup.train.artifact.adopt_vec_isa).
_ISA_CHECK = "from bringup.train import artifact; print(artifact.adopt_vec_isa(artifact.picked_vec_isa()))"


def _trust_the_proved_vec_isa() -> None:
    if "PYTEST_XDIST_WORKER" in os.environ or "TORCHINDUCTOR_VEC_ISA_OK" in os.environ:
        return  # a worker inherits the controller's decision; a user's own setting stands
    try:
        p = subprocess.run(
            [sys.executable, "-c", _ISA_CHECK],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    except (OSError, subprocess.SubprocessError):
        return
    if p.returncode == 0 and p.stdout.strip().endswith("True"):
        os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"


def _share_the_cores() -> None:
    """`make test` runs N tests at once (pytest-xdist; N = PYTEST_XDIST_WORKER_COUNT, set in each worker before
    this import, before torch loads). Each test's processes get cores/N threads, intra-op and inductor compile
    processes alike: the rule `bringup --workers N` applies to its own workers (runner.process.thread_env).
    Left alone, each test's worker took every core and an inductor compile pool of as many processes: 3 tests
    on 2 cores, ~6 threads spinning. `tests/train/test_train_cli.py` at -n 3, same minute (2026-12-03): 315 s
    of CPU and 173 s without the share, 232 s and 133 s with it. A user's own settings stand."""
    n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if n <= 1:
        return
    from bringup.runner.process import thread_env

    share = thread_env(n)
    os.environ.update(share)
    # The test process's own torch was imported before this file (a plugin's import), with every core: the
    # env above reaches the processes it starts, not its own intra-op pool. Left so, 3 workers on 2 cores ran
    # 6 spinning OpenMP threads, and tests/flex/test_flex_rule.py took 101 s at -n 3 against 25 s alone.
    if "OMP_NUM_THREADS" in share and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(share["OMP_NUM_THREADS"]))


_trust_the_proved_vec_isa()
_share_the_cores()
zygote.snapshot_env()


# xdist (`make test`: -n 3 --dist loadgroup) hands the tests out in collection order, one at a time as a worker
# frees up (an xdist_group as one unit). Collected alphabetically, the areas of long end-to-end runs (a zoo case of
# ~2 min) came last, and one worker ran the last of them alone for ~50 s. Those areas go first, each in its own
# order, the ones with the longest indivisible units (checks: the parity group, ~2 min on one worker; bisect's and
# hub's 30-60 s end-to-end runs) before the rest; the many short tests after, to fill the workers' ends.
_LONG_AREAS = ("checks", "zoo", "train", "bisect", "testdev", "hub", "flex", "reliability", "triage", "localize")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    zygote.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        tests = REPO / "tests"
        parts = item.path.relative_to(tests).parts if item.path.is_relative_to(tests) else ()
        return _LONG_AREAS.index(parts[0]) if len(parts) > 1 and parts[0] in _LONG_AREAS else len(_LONG_AREAS)

    items.sort(key=rank)  # stable: each area keeps its own order


def run_cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600, check_rc: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m bringup.cli ARGS` in `cwd`; the default db lands in cwd/bringup-results. A process of its own,
    forked from a torch-imported interpreter where that is the same thing (tests/zygote.py), else started."""
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    p = zygote.run(list(args), cwd, full_env, timeout)
    if p is None:
        p = subprocess.run(
            [sys.executable, "-m", "bringup.cli", *args],
            cwd=cwd,
            env=full_env,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError(
            f"rc {p.returncode} != {check_rc}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}"
        )
    return p


def fake_run(**fields: Any) -> Any:
    """A finished run's RunInfo for report and export tests: these defaults, `fields` replacing any of them."""
    from bringup.store import RunInfo

    base: dict[str, Any] = {
        "run_id": "r",
        "command": "run",
        "argv": [],
        "bringup_version": "0.1.0",
        "torch_version": "2.13.0",
        "device": "cpu",
        "device_name": "",
        "host": "h",
        "started_at": 0.0,
        "ended_at": 1.0,
        "status": "finished",
        "info": {},
    }
    return RunInfo(**{**base, **fields})


def assert_one_line_error(p: subprocess.CompletedProcess[str], needle: str = "") -> None:
    """Bad input: exit 2, exactly one line on stderr, no traceback."""
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout
    assert lines[0].startswith("bringup: error: "), lines[0]
    assert needle.lower() in lines[0].lower(), (needle, lines[0])


def load_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    """`bringup ARGS` in this process (for commands that touch no device: report, compare, export, bad-input
    paths): the same `bringup.cli.main` the console script runs, minus ~3 s of interpreter and torch start-up
    per call. An argparse error (SystemExit) is its exit code, as in the console script. Each area keeps a
    few real-subprocess calls through `run_cli` too. The one in-process runner of the test suite."""
    from bringup.cli import main

    capsys.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as e:  # argparse errors
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), rc, out, err)


@pytest.fixture
def bringup_inproc(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """run_main with the cwd at tmp_path (so default paths land there) and no BRINGUP_DB from outside."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BRINGUP_DB", raising=False)
    return lambda *args: run_main(list(args), capsys)


@pytest.fixture
def cli(tmp_path: Path):
    def _run(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return run_cli(list(args), cwd=tmp_path, **kw)

    return _run
