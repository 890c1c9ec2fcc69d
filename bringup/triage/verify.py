"""A repro is attached only once it is checked: run in a fresh process on the device, it must fail with the group's
signature; run on cpu, it must pass. Each run is a subprocess with a time limit, in this process's environment (the
device's plugins and faults are set there, as they were for the run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.checks.failure_text import output_signature

TAIL = 12  # lines of each run's output kept
_NOISE = re.compile(r"^(?:USDT:|[WIE]\d{4} \d\d:\d\d:\d\d)")  # the profiler's and torch's own log lines

# verdicts
CHECKED = "checked"  # fails on the device with the group's signature, passes on cpu
PASSES_ON_DEVICE = "passes on the device"
OTHER_FAILURE = "fails on the device, with another signature"
FAILS_ON_CPU = "fails on cpu too"
TIMED_OUT = "timed out"


@dataclass
class Run:
    where: str
    command: list[str]
    exit_code: int | None
    seconds: float
    signature: str
    tail: str
    timed_out: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Check:
    verdict: str
    runs: list[Run] = field(default_factory=list)
    expected: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == CHECKED

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "ok": self.ok,
            "expected": self.expected,
            "runs": [r.to_json() for r in self.runs],
        }


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a script run elsewhere (another cwd): PYTHONPATH's entries made absolute,
    so the device's plugins import there as they did here."""
    env = dict(os.environ if base is None else base)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    env["PYTHONWARNINGS"] = "ignore"
    return env


def run_script(cmd: Sequence[str], where: str, cwd: Path, budget: float, env: dict[str, str] | None = None) -> Run:
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            list(cmd),
            cwd=cwd,
            env=child_env(env),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=budget,
        )
        out, rc, late = p.stdout + p.stderr, p.returncode, False
    except subprocess.TimeoutExpired as e:
        out, rc, late = str(e.stdout or "") + str(e.stderr or ""), None, True
    lines = [ln for ln in out.splitlines() if ln.strip() and not _NOISE.match(ln)]
    return Run(
        where, list(cmd), rc, round(time.monotonic() - t0, 2), output_signature(out), "\n".join(lines[-TAIL:]), late
    )


def judge(device_run: Run, cpu_run: Run | None, expected: str) -> str:
    """The check's verdict: the device run must fail with `expected` (the group's signature, as the repro prints
    it or its traceback reads), the cpu run must pass."""
    if device_run.timed_out or (cpu_run is not None and cpu_run.timed_out):
        return TIMED_OUT
    if device_run.exit_code == 0:
        return PASSES_ON_DEVICE
    if expected and device_run.signature != expected:
        return OTHER_FAILURE
    if cpu_run is not None and cpu_run.exit_code != 0:
        return FAILS_ON_CPU
    return CHECKED


def check(
    device_cmd: Sequence[str],
    cpu_cmd: Sequence[str],
    cwd: Path,
    device: str,
    expected: str,
    budget: float,
) -> Check:
    """Run the repro on `device`, then (if it failed there) on cpu."""
    dev = run_script(device_cmd, device, cwd, budget)
    cpu = run_script(cpu_cmd, "cpu", cwd, budget) if dev.exit_code not in (0, None) else None
    return Check(judge(dev, cpu, expected), [r for r in (dev, cpu) if r is not None], expected)


def python() -> str:
    return sys.executable
