"""One candidate's runs of the target in its environment, and the verdict they give.

A repro script's exit code is its verdict (the `git bisect run` convention): 0 pass; 125 "cannot test
this version" (a skip, never a verdict); past the run budget `budget`; killed by a signal `crash`; an
uncaught exception (a traceback, exit 1) `error` with its last line; any other exit the failing status the
bisection was told (`--fail-status`, default fail_numeric), the reason its last output line. Lines
`LABEL: NUMBER` it prints are its figures (the answer puts them side by side).

A stored case runs through the env's own bringup (child.py): its status and metrics are the verdict and
figures, as in any run.

Each candidate runs up to `repeat` times and stops at the first disagreement: more than one status is
flaky, the rule `--expect --repeat` applies (bringup.expect.classify).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bringup.bisect.envs import kill_tree
from bringup.bisect.plan import FLAKY, SKIP
from bringup.bisect.spec import Settings, Target
from bringup.case import Status
from bringup.checks.failure_text import output_signature
from bringup.expect.classify import Klass, classify_one

_FIGURE = re.compile(r"^\s*(?P<label>[^:]{1,120}?):\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)(:|$)")
_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:]+/)+([^\s/:]+)")
_COMPILER_ERROR = re.compile(r":\d+:\d+: error: (.+)")
TAIL_LINES = 20


@dataclass
class RunOutcome:
    status: str  # a Status value, or SKIP
    reason: str
    exit_code: int | None
    wall_s: float
    figures: dict[str, float] = field(default_factory=dict)
    tail: str = ""
    signature: str = ""  # what the repro said its failure is (bringup.checks.failure_text.output_signature)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "wall_s": round(self.wall_s, 3),
            "figures": self.figures,
            "tail": self.tail,
            "signature": self.signature,
        }


def run_env(env_dir: Path, workdir: Path, pip_env: dict[str, str]) -> dict[str, str]:
    """A run's environment: the candidate env's bin first on PATH, a fresh inductor cache per run."""
    out = dict(pip_env)
    out["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{out.get('PATH', '')}"
    out["VIRTUAL_ENV"] = str(env_dir)
    out["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor-cache")
    out["PYTHONUNBUFFERED"] = "1"
    out.pop("BRINGUP_DB", None)
    return out


def timed(cmd: Sequence[str], cwd: Path, env: dict[str, str], timeout: float, log: IO[str]) -> tuple[int, str, bool]:
    """(exit code, output, timed out): the command and what it starts killed past `timeout`; a death by
    signal is its negative number."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    p = subprocess.Popen(
        list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    late = False
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        late = True
        kill_tree(p.pid)
        out, _ = p.communicate()
    log.write(out + f"[exit {p.returncode}{' after the run budget' if late else ''}]\n")
    log.flush()
    return p.returncode, out, late


def figures(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _FIGURE.match(line)
        if m:
            out[" ".join(m.group("label").split())] = float(m.group("value"))
    return out


def uncaught(out: str) -> str:
    """The exception line of the last traceback Python printed (an uncaught exception), or ""."""
    at = out.rfind("Traceback (most recent call last)")
    if at < 0:
        return ""
    lines = [ln.rstrip() for ln in out[at:].splitlines()[1:]]
    found = [ln for ln in lines if _RAISED.match(ln)]
    return found[-1].strip() if found else ""


def repro_outcome(
    rc: int, out: str, late: bool, wall: float, budget: float, fail_status: str, asked: str = ""
) -> RunOutcome:
    """A repro run's outcome; with a signature `asked` for (--new-signature), a failing run that shows it is
    `fail_status` however it failed (a minified compile failure raises: without it, that reads as `error`)."""
    o = _repro_outcome(rc, out, late, wall, budget, fail_status)
    o.signature = output_signature(out) if rc not in (0, 125) else ""
    if asked and o.signature == asked and rc is not None and rc > 0 and rc != 125 and not late:
        o.status, o.reason = fail_status, f"the signature asked for: {o.reason}"[:300]
    return o


def _repro_outcome(rc: int, out: str, late: bool, wall: float, budget: float, fail_status: str) -> RunOutcome:
    lines = [ln.rstrip() for ln in out.splitlines() if ln.strip()]
    last = _PATH.sub(r"\1", lines[-1].strip()) if lines else ""  # a generated file's folders say nothing
    tail = "\n".join(lines[-TAIL_LINES:])
    figs = figures(out)
    if late:
        return RunOutcome("budget", f"over the run budget ({budget:g} s)", None, wall, figs, tail)
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return RunOutcome("crash", f"killed by {name}", rc, wall, figs, tail)
    if rc == 0:
        return RunOutcome("pass", last[:300], rc, wall, figs, tail)
    if rc == 125:
        return RunOutcome(SKIP, f"the repro cannot test this version (exit 125): {last[:200]}", rc, wall, figs, tail)
    raised = uncaught(out)
    if rc == 1 and raised:
        cc = _COMPILER_ERROR.search(out)  # a C++ compile error's own first line says more than the exception's
        why = f"{raised[:200]} (first compiler error: {cc.group(1).strip()[:120]})" if cc else raised[:300]
        return RunOutcome("error", f"the repro raised: {why}", rc, wall, figs, tail)
    return RunOutcome(fail_status, f"{last[:300]} (exit {rc})", rc, wall, figs, tail)


def run_repro(
    py: Path, target: Target, settings: Settings, workdir: Path, env: dict[str, str], log: IO[str]
) -> RunOutcome:
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rc, out, late = timed([str(py), target.path], workdir, env, settings.run_budget_s, log)
    wall = time.monotonic() - t0
    return repro_outcome(rc, out, late, wall, settings.run_budget_s, settings.fail_status, settings.new_signature)


def child_command(py: Path, target: Target, workdir: Path, budget: float) -> list[str]:
    """The command that re-runs the stored case in the env (child.py); exit 0 only on pass."""
    case_file = workdir / "case.json"
    case_file.write_text(json.dumps(target.case))
    cmd = [
        str(py),
        "-m",
        "bringup.bisect.child",
        "--case",
        str(case_file),
        "--out",
        str(workdir / "result.json"),
        "--device",
        target.device,
        "--budget",
        str(budget),
    ]
    for m in target.imports:
        cmd += ["--import", m]
    return cmd


def run_case(
    py: Path, target: Target, settings: Settings, workdir: Path, env: dict[str, str], log: IO[str]
) -> RunOutcome:
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    cmd = child_command(py, target, workdir, settings.run_budget_s)
    rc, out, late = timed(cmd, workdir, env, settings.run_budget_s + 120.0, log)
    wall = time.monotonic() - t0
    lines = [ln for ln in out.splitlines() if ln.strip()]
    tail = "\n".join(lines[-TAIL_LINES:])
    try:
        res = json.loads((workdir / "result.json").read_text())
    except (OSError, ValueError):
        res = None
    if res is None:
        why = "over the run budget" if late else (lines[-1][:300] if lines else f"exit {rc}")
        return RunOutcome(
            "budget" if late else "error", f"the case did not finish in the env: {why}", rc, wall, {}, tail
        )
    figs = {k: float(v[0]) for k, v in res.get("metrics", {}).items() if isinstance(v, list) and v}
    return RunOutcome(str(res["status"]), str(res.get("reason", ""))[:300], rc, wall, figs, tail)


def verdict_of(outcomes: Sequence[RunOutcome]) -> str:
    """The candidate's verdict from its runs: SKIP when the first says so, FLAKY when statuses differ
    (the rule of --expect --repeat), else the one status."""
    if not outcomes or outcomes[0].status == SKIP:
        return SKIP
    if any(o.status == SKIP for o in outcomes):  # cannot test it one time, could another: not stable
        return FLAKY
    seen = [Status(o.status) for o in outcomes]
    flaky = classify_one("", "", seen, None, None, False).klass is Klass.FLAKY
    return FLAKY if flaky else seen[0].value
