"""One worker process seen from the driver: start it, send a case, enforce budgets and memory caps,
turn any death into a status. Used by the local pool and, inside each task, by the Ray executor."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import artifact_paths, damaged_artifact
from bringup.runner import compile_cache
from bringup.runner.launcher import ForkedProcess
from bringup.runner.launcher import launcher as get_launcher

STARTUP_TIMEOUT_S = 300.0  # importing torch + a device plugin; a plugin that hangs longer is broken
_LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class WorkerSpec:
    """Everything needed to start an equivalent worker anywhere (picklable for Ray)."""

    device: str
    imports: tuple[str, ...] = ()
    max_rss_gb: float | None = None
    log_dir: str = "."
    env: dict[str, str] = field(default_factory=dict)


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


MAX_AUTO_WORKERS = 4  # `bringup run --quick` without --workers: one worker per core, at most this many


def auto_workers() -> int:
    """Workers for a run that was given none and runs its cases side by side (`run --quick`): one per core,
    at most MAX_AUTO_WORKERS (each holds a model and its compiled code in memory)."""
    return max(1, min(cores(), MAX_AUTO_WORKERS))


def thread_env(workers: int) -> dict[str, str]:
    """N workers on one host share its cores: each gets cores/N intra-op threads and as many inductor compile
    processes (torch would give every worker all cores, inductor a compile pool of min(32, cores) processes,
    and N workers would fight over them). A user's own OMP_NUM_THREADS / TORCHINDUCTOR_COMPILE_THREADS win."""
    if workers <= 1:
        return {}
    share = str(max(1, cores() // workers))
    return {var: share for var in ("OMP_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS") if var not in os.environ}


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class WorkerDied(Exception):
    pass


class WorkerProcess:
    """A `python -m bringup.runner.worker` in its own session (process group), so a budget kill also
    takes its children (inductor compile workers, torchrun ranks)."""

    def __init__(self, spec: WorkerSpec, slot: int, extra_env: dict[str, str] | None = None) -> None:
        self.spec = spec
        log_dir = Path(spec.log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"worker-{slot}-{os.getpid()}-{time.time_ns() % 10**9}.log"
        self._log: IO[bytes] = open(self.log_path, "ab")
        r, w = os.pipe()
        env = {**os.environ, **spec.env, **(extra_env or {})}
        env["PYTHONUNBUFFERED"] = "1"
        self.cache_roots = compile_cache.cache_roots(env)
        args = ["--device", spec.device]
        for m in spec.imports:
            args += ["--import", m]
        self.proc: subprocess.Popen[bytes] | ForkedProcess
        forked = self._fork(args, env, w)
        if forked is not None:
            self.proc = forked
        else:
            cmd = [
                sys.executable,
                "-m",
                "bringup.runner.worker",
                "--fd",
                str(w),
                "--parent-pid",
                str(os.getpid()),
                *args,
            ]
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                pass_fds=(w,),
                start_new_session=True,
                env=env,
            )
        os.close(w)
        self._r = r
        self._buf = b""
        self.started = False
        self._closed = False

    def _fork(self, args: list[str], env: dict[str, str], msg_w: int) -> ForkedProcess | None:
        """The worker forked by the CLI's launcher (bringup.runner.launcher), or None: started from scratch,
        the log's first line says why."""
        launcher = get_launcher()
        why = "no launcher in this process" if launcher is None else launcher.refusal(env)
        if launcher is not None and why is None:
            proc = launcher.start(args, env, self._log.fileno(), msg_w)
            if proc is not None:
                return proc
            why = "the launcher did not answer"
        self._log.write(f"=== worker started from scratch ({why})\n".encode())
        self._log.flush()
        return None

    # ---- low-level I/O -------------------------------------------------------------------------
    def _read_msg(self, deadline: float, poll: Callable[[], str | None] | None = None) -> dict[str, Any] | None:
        """Next message, or None when the deadline passes. `poll` runs every 0.25 s and may return a
        reason to give up (memory cap). Raises WorkerDied on EOF."""
        while b"\n" not in self._buf:
            now = time.monotonic()
            if now >= deadline:
                return None
            ready, _, _ = select.select([self._r], [], [], min(0.25, deadline - now))
            if ready:
                chunk = os.read(self._r, 1 << 16)
                if not chunk:
                    raise WorkerDied()
                self._buf += chunk
            elif poll is not None:
                why = poll()
                if why:
                    raise MemoryCapExceeded(why)
        line, _, self._buf = self._buf.partition(b"\n")
        msg: dict[str, Any] = json.loads(line)  # one JSON object per line (the worker's messages)
        return msg

    def rss_bytes(self) -> int:
        try:
            import psutil  # lazy: optional

            p = psutil.Process(self.proc.pid)
            procs = [p, *p.children(recursive=True)]
            total = 0
            for q in procs:
                try:
                    total += q.memory_info().rss
                except psutil.Error:
                    pass
            return total
        except Exception:
            return 0

    def kill_group(self) -> None:
        """SIGKILL the worker's process group and nothing else: safe from any thread (the thread
        that owns this worker then sees EOF, reports the case and closes the pipes itself)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        self.kill_group()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.close()

    def close(self) -> None:
        if self._closed:  # fds must never be closed twice: another thread may own that number now
            return
        self._closed = True
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.wait()
        try:
            os.close(self._r)
        except OSError:
            pass
        self._log.close()

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
            return "\n".join(lines[-_LOG_TAIL_LINES:])
        except OSError:
            return ""

    def death_reason(self) -> str:
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            return "worker stopped answering"
        if rc < 0:
            return f"worker killed by {signal_name(-rc)}"
        return f"worker exited with code {rc}"

    def swept(self, r: CaseResult) -> CaseResult:
        """After this worker died or was killed (its whole group, compiler processes included): set aside the
        compiler outputs it left damaged in its caches, before another case can load them; said on the case."""
        rep = compile_cache.sweep_quietly(self.cache_roots)
        if rep is not None and rep.quarantined:
            r.fields["compile_cache"] = rep.line()
        return r

    # ---- the case ------------------------------------------------------------------------------
    def wait_ready(self) -> None:
        msg = self._read_msg(time.monotonic() + STARTUP_TIMEOUT_S)
        if msg is None:
            raise StartupFailed(f"worker did not start within {STARTUP_TIMEOUT_S:.0f} s")
        if msg.get("type") == "fatal":
            raise StartupFailed(f"worker start-up failed: {msg.get('error')}")
        self.started = True

    def run(self, case: Case, artifact_dir: str, run_dir: str) -> tuple[CaseResult, bool]:
        """Run one case. Returns (result, worker_still_usable)."""
        t0 = time.monotonic()
        if not self.started:
            try:
                self.wait_ready()
            except WorkerDied:
                r = CaseResult.for_case(case, Status.CRASH, f"start-up: {self.death_reason()}")
                r.error = self.log_tail()
                return r, False
            except StartupFailed as e:
                self.kill()
                return CaseResult.for_case(case, Status.ERROR, str(e), error=self.log_tail()), False
            t0 = time.monotonic()
        msg = {"case": case.to_json(), "artifact_dir": artifact_dir, "run_dir": run_dir}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            r = CaseResult.for_case(case, Status.CRASH, self.death_reason(), error=self.log_tail())
            return r, False
        return self._await_result(case, t0)

    def _rss_over_cap(self) -> str | None:
        """Why the worker is over --max-rss-gb (None: under it, or no cap)."""
        cap = self.spec.max_rss_gb
        if cap is None:
            return None
        rss = self.rss_bytes()
        if rss > cap * 1e9:
            return f"worker RSS {rss / 1e9:.2f} GB exceeded --max-rss-gb {cap:g}"
        return None

    def _await_result(self, case: Case, t0: float) -> tuple[CaseResult, bool]:
        """Read the worker's messages until its result, under the case's budget and the budget of the
        phase it says it is in (compile, ...); a death, the memory cap or a budget ends the case."""
        case_deadline = t0 + case.budget_s
        phase: str | None = None
        phase_deadline = case_deadline
        while True:
            try:
                m = self._read_msg(min(case_deadline, phase_deadline), self._rss_over_cap)
            except WorkerDied:
                r = CaseResult.for_case(case, Status.CRASH, self.death_reason(), error=self.log_tail())
                r.wall_s = time.monotonic() - t0
                return self.swept(r), False
            except MemoryCapExceeded as e:
                self.kill()
                r = CaseResult.for_case(case, Status.OOM, str(e), error=self.log_tail())
                r.wall_s = time.monotonic() - t0
                return self.swept(r), False
            if m is None:  # a budget ran out
                return self._over_budget(case, t0, phase, phase is not None and phase_deadline <= case_deadline)
            kind = m.get("type")
            if kind == "phase":
                phase = m.get("name")
                b = m.get("budget_s")
                phase_deadline = time.monotonic() + float(b) if (phase and b) else case_deadline
            elif kind == "result":
                return CaseResult.from_json(m["result"]), True

    def _over_budget(self, case: Case, t0: float, phase: str | None, phase_ran_out: bool) -> tuple[CaseResult, bool]:
        self.kill()
        elapsed = time.monotonic() - t0
        if phase_ran_out:
            why = f"budget: {phase} exceeded its budget ({elapsed:.1f} s into the case)"
        else:
            why = f"budget: case exceeded {case.budget_s:g} s"
        r = CaseResult.for_case(case, Status.BUDGET, why, error=self.log_tail())
        r.wall_s = elapsed
        r.fields["budget_phase"] = phase or "case"
        return self.swept(r), False


class StartupFailed(Exception):
    pass


class MemoryCapExceeded(Exception):
    pass


Track = Callable[[WorkerProcess, bool], None]  # (worker, started): an executor's register of live workers
# Verdicts a damaged artifact does not explain: time and memory (their "error" is the worker's log tail).
_NOT_FROM_AN_ARTIFACT = frozenset({Status.PASS, Status.BUDGET, Status.OOM})


def run_isolated(
    spec: WorkerSpec,
    case: Case,
    artifact_dir: str,
    run_dir: str,
    slot: int = 0,
    env: dict[str, str] | None = None,
    track: Track | None = None,
) -> CaseResult:
    """Run one case in a fresh worker that is discarded afterwards (Ray tasks, isolated cases, a clean re-run);
    `env` on top of the case's own."""
    w = WorkerProcess(spec, slot, extra_env={**case.env, **(env or {})})
    if track is not None:
        track(w, True)
    try:
        result, ok = w.run(case, artifact_dir, run_dir)
    finally:
        if track is not None:
            track(w, False)
        w.close()
    return result


def settle(
    spec: WorkerSpec,
    case: Case,
    result: CaseResult,
    artifact_dir: str,
    run_dir: str,
    slot: int = 0,
    track: Track | None = None,
) -> tuple[CaseResult, bool]:
    """The backstop: a case that failed on a damaged compile artifact (a kill mid-compile left it, and it was
    loaded before a sweep could set it aside) is never judged on it. The artifacts its error names are set aside
    (when proven damaged and orphaned), the worker's caches swept, and the case is run once more in a fresh
    worker with private, empty compile caches; only that result is recorded, saying it was re-run and why.
    Returns (the result to record, whether it was re-run: the caller drops the worker that met the damage,
    whose in-memory caches still point at it)."""
    text = f"{result.reason}\n{result.error or ''}"
    sign = None if result.status in _NOT_FROM_AN_ARTIFACT else damaged_artifact(text)
    why = f"damaged compile artifact ({sign})"
    if sign is None and result.status is Status.CRASH and result.fields.get("compile_cache"):
        sign = why = "a crash with damaged compile artifacts in its caches"  # a cut-off library loads, then SIGBUS
    if sign is None:
        return result, False
    roots = compile_cache.cache_roots({**os.environ, **spec.env, **case.env})
    aside = [f"{p} ({got})" for p in artifact_paths(text) if (got := compile_cache.quarantine(Path(p), met=True))]
    aside += [result.fields["compile_cache"]] if result.fields.get("compile_cache") else []
    if "precompiled header" in sign.lower() or "pch" in sign.lower():  # the message names no file
        aside += compile_cache.drop_headers(roots)
    swept = compile_cache.sweep_quietly(roots)
    aside += [f"{p} ({what})" for p, what in (swept.quarantined if swept else [])]
    scratch = Path(run_dir) / "clean-cache" / f"{case.case_id}-{os.getpid()}-{slot}"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        again = run_isolated(spec, case, artifact_dir, run_dir, slot, compile_cache.clean_env(scratch), track)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            scratch.parent.rmdir()  # the last re-run of the run leaves no empty directory
    again.fields["rerun"] = {
        "why": why,
        "first": f"{result.status.value}: {result.reason}"[:300],
        "set_aside": aside,
        "how": "once, in a fresh worker with private, empty compile caches",
    }
    return again, True
