"""The worker process: imports plugins, resolves the device, runs cases sent by the driver.

Protocol (JSON lines): the driver writes one case message per line on the worker's stdin; the worker
writes messages to a dedicated pipe fd (stdout/stderr go to a log file, so a model that prints can't
corrupt the protocol):
    {"type": "ready"}                                   after start-up
    {"type": "phase", "name": "compile", "budget_s": 5} a phase with its own budget begins
    {"type": "phase", "name": null}                     the phase ended (back to the case budget)
    {"type": "result", "result": {...CaseResult...}}
    {"type": "fatal", "error": "..."}                   start-up failed (bad plugin, bad device)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import is_oom as oom
from bringup.checks.errors import is_unsupported
from bringup.runner.compile_cache import cache_roots, sweep_quietly
from bringup.runner.fallback_policy import counter_delta

if TYPE_CHECKING:
    from bringup.device import Device


def load_entry(entry: str) -> Callable[..., Any]:
    """'package.module:function' -> the function."""
    mod_name, _, fn_name = entry.partition(":")
    if not mod_name or not fn_name:
        raise ValueError(f"entry {entry!r} is not 'module:function'")
    obj: Any = importlib.import_module(mod_name)
    for part in fn_name.split("."):
        obj = getattr(obj, part)
    return cast("Callable[..., Any]", obj)


def import_plugins(modules: list[str]) -> None:
    for m in modules:
        importlib.import_module(m)


class WorkerContext:
    """What a case function gets besides its Case: the device, phases with budgets, an artifact dir."""

    def __init__(
        self, device: Device, channel: TextIO | None, artifact_dir: Path, run_dir: Path, imports: tuple[str, ...] = ()
    ) -> None:
        self.device = device
        self._channel = channel
        self.artifact_dir = artifact_dir
        self.run_dir = run_dir
        self.imports = imports  # the worker's --import modules: child processes (ranks) import them too

    def send(self, msg: dict[str, Any]) -> None:
        if self._channel is not None:
            self._channel.write(json.dumps(msg) + "\n")
            self._channel.flush()

    @contextmanager
    def phase(self, name: str, budget_s: float | None = None) -> Iterator[None]:
        """Mark a phase (e.g. 'compile'). With budget_s, the driver kills the case past that budget
        and reports `budget` naming the phase; afterwards the case's own budget applies again."""
        self.send({"type": "phase", "name": name, "budget_s": budget_s})
        try:
            yield
        finally:
            self.send({"type": "phase", "name": None, "budget_s": None})

    def artifact(self, name: str) -> Path:
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        return self.artifact_dir / name


def is_oom(exc: BaseException) -> bool:
    return oom(exc)


def is_not_implemented(exc: BaseException) -> bool:
    """The device/backend said "not implemented / not supported here" (NotImplementedError anywhere in
    the cause chain, or such a message): the one classifier, bringup.checks.errors.is_unsupported."""
    return is_unsupported(exc)


def _backend_fallbacks(ctx: Any) -> dict[str, int] | None:
    """The backend's own count of CPU-fallback calls so far (None: its adapter keeps none)."""
    fn = getattr(getattr(ctx, "device", None), "fallback_counts", None)
    try:
        return fn() if fn is not None else None
    except Exception:
        return None


def run_one(case: Case, ctx: WorkerContext) -> CaseResult:
    """Call the case's entry; our own exceptions become `error` with the traceback kept. Where the backend
    counts its CPU fallbacks, what it counted over the case is kept as `backend_fallback_ops` (what
    `--fallback error` judges, bringup/runner/fallback_policy.py)."""
    t0 = time.perf_counter()
    before = _backend_fallbacks(ctx)
    try:
        fn = load_entry(case.entry)
        result = fn(case, ctx)
        if not isinstance(result, CaseResult):
            raise TypeError(f"{case.entry} returned {type(result).__name__}, not CaseResult")
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        if is_oom(e):
            status = Status.OOM
        elif is_not_implemented(e):  # the device/backend said "not here": a gap, not our bug
            status = Status.UNSUPPORTED
        else:
            status = Status.ERROR
        line = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        result = CaseResult.for_case(case, status, line, error=traceback.format_exc())
    result.wall_s = time.perf_counter() - t0
    if fell := counter_delta(before, _backend_fallbacks(ctx) if before is not None else None):
        result.fields.setdefault("backend_fallback_ops", fell)
    return result


def check_compile_caches() -> None:
    """Before the first case: set aside what a killed worker (of this run, an earlier one, another program) left
    damaged in the compile caches this worker will use (bringup/runner/compile_cache.py); said in the log."""
    rep = sweep_quietly(cache_roots(os.environ))
    if rep is not None and (rep.quarantined or any(why != "being written" for _, why in rep.unsettled)):
        print(f"=== {rep.line()}", flush=True)


PARENT_POLL_S = 0.25


def watch_parent(parent_pid: int) -> None:
    """Die with the driver: when the process that started us is gone (SIGKILLed driver, lost Ray
    actor), kill our whole process group (us, compile workers, torchrun ranks) at once, so an orphan
    never keeps running or writes anything. A thread polling getppid() rather than PR_SET_PDEATHSIG:
    portable, fires on process (not thread) death, and can take the process group down with it."""

    def loop() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        try:
            if os.getpgrp() == os.getpid():  # we lead our own group (the driver starts us so)
                os.killpg(os.getpgrp(), signal.SIGKILL)
        finally:
            os._exit(70)

    if os.getppid() != parent_pid:  # the parent died before we got here
        os._exit(70)
    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bringup-worker")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--import", dest="imports", action="append", default=[])
    ap.add_argument("--parent-pid", type=int, default=None, help="exit (with our process group) when it dies")
    args = ap.parse_args(argv)
    if args.parent_pid is not None:
        watch_parent(args.parent_pid)
    channel = os.fdopen(args.fd, "w", buffering=1)

    def send(msg: dict[str, Any]) -> None:
        channel.write(json.dumps(msg) + "\n")
        channel.flush()

    try:
        import_plugins(args.imports)
        from bringup.device import resolve_device  # lazy: optional

        device = resolve_device(args.device)
        device.adapter.start()
    except BaseException as e:
        send({"type": "fatal", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return 3
    check_compile_caches()
    send({"type": "ready", "pid": os.getpid()})
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        case = Case.from_json(msg["case"])
        print(f"=== case {case.case_id} {case.suite}/{case.name}", flush=True)
        ctx = WorkerContext(device, channel, Path(msg["artifact_dir"]), Path(msg["run_dir"]), tuple(args.imports))
        result = run_one(case, ctx)
        sys.stdout.flush()
        sys.stderr.flush()
        send({"type": "result", "result": result.to_json()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
