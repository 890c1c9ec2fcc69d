"""Ray executor: the same cases, budgets, isolation and statuses as the local pool, spread over a Ray
cluster (or a local Ray instance started for the run).

Shape: `--workers N` Ray actors, each one slot that runs one case at a time. An actor keeps a warm
worker process (`WorkerProcess`, exactly the local executor's) across cases, so torch, the device
plugin and the in-memory compile caches are imported and warmed once per slot instead of once per case,
and replaces it after any failure; `isolated` cases get a fresh process of their own (`run_isolated`).
Every case is one actor task; the actor holds the slot's resource request: `num_gpus` for cuda, a
custom resource named after the device type for other accelerators (`neuron`, `xpu`, ...), CPUs on cpu.

Failures keep their meaning: a case that crashes, hangs or blows its memory cap kills only the worker
process, and comes back from the actor as `crash` / `budget` / `oom` like locally. A LOST worker (the
actor process or its node died, Ray's memory monitor killed it) is Ray's business: the actor restarts
and the task is retried up to `BRINGUP_RAY_RETRIES` times (default 2); after that the case is `crash`
with a reason that says so, the slot gets a new actor and the sweep goes on. A task that gives no
answer at all (unschedulable, node wedged) is given up on after a generous deadline: never a hung sweep.

Only the driver writes the store: actors return JSON results, and `on_result` runs in the calling
thread. Orphans cannot outlive a dead driver: `ray.kill` takes an actor down, and its worker process
notices its parent is gone and kills its own process group (see `worker.watch_parent`).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from bringup.case import Case, CaseResult, Status
from bringup.errors import BadInput
from bringup.runner.process import STARTUP_TIMEOUT_S, WorkerProcess, WorkerSpec, run_isolated, settle
from bringup.runner.schedule import Queue

RETRIES_ENV = "BRINGUP_RAY_RETRIES"
DEFAULT_RETRIES = 2
_WAIT_S = 0.5  # how often the driver loop wakes up (Ctrl-C, SIGTERM and deadlines stay responsive)
_GRACE_S = 60.0
_OBJECT_STORE_BYTES = 256 << 20  # results are small JSON; keep a local instance light


class CaseSlot:
    """The body of one Ray actor: one slot, one warm worker process, one case at a time."""

    def __init__(self, spec: WorkerSpec, slot: int) -> None:
        if spec.device.split(":")[0] == "cuda" and os.environ.get("CUDA_VISIBLE_DEVICES"):  # cuda-ok
            # Ray picked this actor's GPU and made it the only visible one; the driver's index means
            # nothing here.
            spec = replace(spec, device="cuda")  # cuda-ok
        self.spec = spec
        self.slot = slot
        self.worker: WorkerProcess | None = None

    def run(self, case_json: dict[str, Any], artifact_dir: str, run_dir: str) -> dict[str, Any]:
        case = Case.from_json(case_json)
        if case.isolated:
            result = run_isolated(self.spec, case, artifact_dir, run_dir, self.slot)
        else:
            if self.worker is None:
                self.worker = WorkerProcess(self.spec, self.slot)
            try:
                result, ok = self.worker.run(case, artifact_dir, run_dir)
            except BaseException:
                self.worker.kill()
                self.worker = None
                raise
            if not ok:
                self.worker.close()
                self.worker = None
        result, reran = settle(self.spec, case, result, artifact_dir, run_dir, self.slot)  # on this node's caches
        if reran and self.worker is not None:  # its in-memory caches still point at the damaged artifact
            self.worker.close()
            self.worker = None
        return result.to_json()

    def pid(self) -> int:
        return os.getpid()


@dataclass
class _Task:
    case: Case
    slot: int
    started: float
    deadline: float


def retries_from_env() -> int:
    raw = os.environ.get(RETRIES_ENV, str(DEFAULT_RETRIES))
    try:
        n = int(raw)
    except ValueError:
        raise BadInput(f"{RETRIES_ENV}={raw!r}: expected an integer >= 0") from None
    if n < 0:
        raise BadInput(f"{RETRIES_ENV}={raw!r}: expected an integer >= 0")
    return n


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on an address nothing listens on (Ray itself retries for minutes)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BadInput(f"--ray-address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise BadInput(f"--ray-address {address}: cannot reach a Ray cluster there ({e.strerror or e})") from None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _device_count(dev_type: str) -> int:
    try:
        return int(torch.get_device_module(dev_type).device_count())
    except Exception:
        return 0


def _amount(total: float, workers: int) -> float:
    """Per-slot share of a resource: a whole unit when there are enough, else an equal fraction
    (Ray accepts fractions <= 1 with 4 decimals), so N slots always fit at once."""
    if total >= workers:
        return 1.0
    return math.floor(total / workers * 10_000) / 10_000


class RayExecutor:
    name = "ray"

    def __init__(self, spec: WorkerSpec, workers: int = 1, address: str | None = None) -> None:
        # Absolute paths: an actor's working directory is not the driver's (on a cluster, paths are the
        # driver's and need a shared file system for logs and artifacts).
        self.spec = replace(spec, log_dir=str(Path(spec.log_dir).resolve()))
        self.workers = max(1, workers)
        self.address = address
        self.retries = retries_from_env()
        self.dev_type = spec.device.split(":")[0]
        self._owns_ray = False
        self._actors: dict[int, Any] = {}
        self._options: dict[str, Any] = {}
        self._connect()  # now, so a bad address or a cluster without the device fails before any run row

    # ---- Ray life cycle ------------------------------------------------------------------------
    def _connect(self) -> None:
        import ray  # lazy: slow ray import, only with --runner ray

        if ray.is_initialized():  # embedded in a program that manages Ray itself: leave it be
            self._options = self._slot_options(ray)
            return
        quiet: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
        if self.address:
            check_reachable(self.address)
            try:
                ray.init(address=self.address, **quiet)
            except Exception as e:
                raise BadInput(f"--ray-address {self.address}: {type(e).__name__}: {e}".splitlines()[0]) from None
        else:
            # A private local instance for this run: address="local" never joins some other cluster
            # found through RAY_ADDRESS or /tmp/ray.
            resources: dict[str, Any] = {"num_cpus": max(_cpus(), self.workers)}
            if self.dev_type == "cuda":  # cuda-ok: num_gpus means CUDA GPUs to Ray
                resources["num_gpus"] = _device_count("cuda")
            elif self.dev_type != "cpu":
                resources["resources"] = {self.dev_type: _device_count(self.dev_type)}
            ray.init(address="local", object_store_memory=_OBJECT_STORE_BYTES, **resources, **quiet)
        self._owns_ray = True
        try:
            self._options = self._slot_options(ray)
        except BaseException:
            self.shutdown()
            raise
        print(f"ray: {self.describe()}", file=sys.stderr, flush=True)

    def describe(self) -> str:
        """One line: where, how many slots, what each slot asks Ray for."""
        o = self._options
        asks = [f"num_cpus={o['num_cpus']:g}"] + ([f"num_gpus={o['num_gpus']:g}"] if "num_gpus" in o else [])
        asks += [f"{k}={v:g}" for k, v in o.get("resources", {}).items()]
        where = f"cluster {self.address}" if self.address else "local instance"
        return f"{where}, {self.workers} slot(s), each {' '.join(asks)}; lost workers retried {self.retries}x"

    def _slot_options(self, ray: Any) -> dict[str, Any]:
        total = ray.cluster_resources()
        opts: dict[str, Any] = {"max_restarts": self.retries, "max_task_retries": self.retries}
        if self.dev_type == "cpu":
            # A local instance splits the machine's cores between the slots (Ray sets OMP_NUM_THREADS
            # to the share); on a cluster, one CPU per slot and Ray spreads them.
            opts["num_cpus"] = max(1, int(total.get("CPU", 1) // self.workers)) if not self.address else 1
            return opts
        key = "GPU" if self.dev_type == "cuda" else self.dev_type  # cuda-ok
        have = float(total.get(key, 0.0))
        if have <= 0:
            hint = "--num-gpus N" if key == "GPU" else f"--resources '{{\"{key}\": N}}'"
            raise BadInput(
                f"--executor ray: the Ray cluster has no {key!r} resource for device {self.spec.device}"
                f" (start its nodes with `ray start ... {hint}`)"
            )
        opts["num_cpus"] = 1
        if key == "GPU":
            opts["num_gpus"] = _amount(have, self.workers)
        else:
            opts["resources"] = {key: _amount(have, self.workers)}
        return opts

    def _new_actor(self, slot: int) -> Any:
        import ray  # lazy: slow ray import, only with --runner ray

        actor = ray.remote(CaseSlot).options(**self._options).remote(self.spec, slot)
        self._actors[slot] = actor
        return actor

    def _drop_actor(self, slot: int) -> None:
        import ray  # lazy: slow ray import, only with --runner ray

        actor = self._actors.pop(slot, None)
        if actor is not None:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass

    def shutdown(self) -> None:
        """Kill every actor (their worker processes follow them), and stop Ray if we started it."""
        import ray  # lazy: slow ray import, only with --runner ray

        for slot in list(self._actors):
            self._drop_actor(slot)
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    # ---- the sweep -----------------------------------------------------------------------------
    def run(
        self,
        cases: Sequence[Case],
        run_dir: Path,
        on_result: Callable[[CaseResult], None],
        on_start: Callable[[Case], None] | None = None,
    ) -> None:
        """Run every case; `on_result` is called in THIS thread (the one that owns the store)."""
        import ray  # lazy: slow ray import, only with --runner ray

        if not ray.is_initialized():
            self._connect()
        run_dir = run_dir.resolve()
        todo = Queue(cases, by_cost=self.workers > 1)  # runner/schedule.py: the longest ready case first
        free = deque(range(min(self.workers, max(1, len(cases)))))
        inflight: dict[Any, _Task] = {}
        try:
            while todo.left or inflight:
                while free and (case := todo.take() if inflight else todo.wait_take()) is not None:
                    slot = free.popleft()
                    actor = self._actors.get(slot) or self._new_actor(slot)
                    ref = actor.run.remote(case.to_json(), str(run_dir / "artifacts" / case.case_id), str(run_dir))
                    # Each try may need a worker start and the whole budget, twice (a clean re-run after a
                    # damaged compile artifact); then a margin. Only a backstop for a task that never
                    # answers: budgets are enforced in the actor.
                    patience = 2 * (self.retries + 1) * (case.budget_s + STARTUP_TIMEOUT_S) + _GRACE_S
                    t0 = time.monotonic()
                    inflight[ref] = _Task(case, slot, t0, t0 + patience)
                    if on_start is not None:
                        on_start(case)
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=_WAIT_S)
                now = time.monotonic()
                for ref in ready:
                    task = inflight.pop(ref)
                    result = self._collect(ref, task)
                    free.append(task.slot)
                    todo.finish(task.case.case_id)
                    on_result(result)
                for ref, task in list(inflight.items()):
                    if now > task.deadline:
                        del inflight[ref]
                        todo.finish(task.case.case_id)
                        self._drop_actor(task.slot)  # ray.kill fails its pending task; its worker follows
                        free.append(task.slot)
                        on_result(
                            CaseResult.for_case(
                                task.case,
                                Status.CRASH,
                                f"ray: no answer from the worker in {now - task.started:.0f} s"
                                " (lost, wedged or unschedulable)",
                            )
                        )
        finally:
            self.shutdown()

    def _collect(self, ref: Any, task: _Task) -> CaseResult:
        """The task's result, or the status of its failure. A lost worker also costs the slot its
        actor (a fresh one replaces it)."""
        import ray  # lazy: slow ray import, only with --runner ray
        from ray import exceptions as rx  # lazy: slow ray import, only with --runner ray

        try:
            return CaseResult.from_json(ray.get(ref))
        except rx.RayTaskError as e:  # our own code raised inside the actor: a bug, traceback kept
            self._drop_actor(task.slot)
            return CaseResult.for_case(task.case, Status.ERROR, f"ray executor: {_first_line(e)}", error=str(e))
        except rx.OutOfMemoryError as e:  # Ray's memory monitor killed the worker
            self._drop_actor(task.slot)
            return CaseResult.for_case(task.case, Status.OOM, f"ray: {_first_line(e)}", error=str(e))
        except rx.RayError as e:  # actor / worker / node lost, after Ray's retries
            self._drop_actor(task.slot)
            tries = f"{self.retries} retr{'y' if self.retries == 1 else 'ies'}"
            reason = f"ray: worker lost after {tries}: {_first_line(e)}"
            return CaseResult.for_case(task.case, Status.CRASH, reason, error=traceback.format_exc())


def _first_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)[:300]
