"""Local executor: N worker processes, reused across cases (warm imports and compile caches),
replaced after any failure; isolated cases get a fresh process of their own. A free worker takes the next
case from a shared queue (runner/schedule.py: the longest ready case first, `Case.after` waited for)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from bringup.case import Case, CaseResult, Status
from bringup.runner.process import WorkerProcess, WorkerSpec, run_isolated, settle
from bringup.runner.schedule import Queue


class LocalExecutor:
    name = "local"

    def __init__(self, spec: WorkerSpec, workers: int = 1) -> None:
        self.spec = spec
        self.workers = max(1, workers)
        self._stop = threading.Event()
        self._live: set[WorkerProcess] = set()
        self._lock = threading.Lock()

    def run(
        self,
        cases: Sequence[Case],
        run_dir: Path,
        on_result: Callable[[CaseResult], None],
        on_start: Callable[[Case], None] | None = None,
    ) -> None:
        """Run every case; `on_result` is called in THIS thread (the one that owns the store)."""
        todo = Queue(cases, by_cost=self.workers > 1)
        done: queue.Queue[tuple[str, Case | CaseResult]] = queue.Queue()
        n = min(self.workers, max(1, len(cases)))
        threads = [threading.Thread(target=self._slot, args=(i, todo, done, run_dir), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        remaining = len(cases)
        try:
            while remaining:
                kind, item = done.get()
                if kind == "start":
                    if on_start is not None:
                        assert isinstance(item, Case)
                        on_start(item)
                    continue
                assert isinstance(item, CaseResult)
                on_result(item)
                remaining -= 1
        finally:
            todo.close()
            self.shutdown()
            for t in threads:
                t.join(timeout=60)

    def shutdown(self) -> None:
        """Kill every live worker (used on Ctrl-C / SIGTERM of the driver, and at the end)."""
        self._stop.set()
        with self._lock:
            live = list(self._live)
        for w in live:
            w.kill_group()  # not kill(): closing pipes another thread is reading is not ours to do

    def _track(self, w: WorkerProcess | None, add: bool) -> None:
        if w is None:
            return
        with self._lock:
            (self._live.add if add else self._live.discard)(w)
            late = add and self._stop.is_set()
        if late:  # started after shutdown() swept the live set: it must not run on unowned
            w.kill_group()

    def _slot(self, slot: int, todo: Queue, done: queue.Queue[tuple[str, Case | CaseResult]], run_dir: Path) -> None:
        worker: WorkerProcess | None = None
        try:
            while not self._stop.is_set():
                case = todo.wait_take()
                if case is None:
                    break
                done.put(("start", case))
                art = str(run_dir / "artifacts" / case.case_id)
                try:
                    if case.isolated:
                        result = run_isolated(self.spec, case, art, str(run_dir), slot, track=self._track)
                    else:
                        if worker is None:
                            worker = WorkerProcess(self.spec, slot)
                            self._track(worker, True)
                        result, ok = worker.run(case, art, str(run_dir))
                        if not ok:
                            self._track(worker, False)
                            worker.close()
                            worker = None
                    result, reran = settle(self.spec, case, result, art, str(run_dir), slot, self._track)
                    if reran and worker is not None:  # its in-memory caches still point at the damaged artifact
                        self._track(worker, False)
                        worker.close()
                        worker = None
                except Exception as e:  # the driver never dies because a case did
                    import traceback  # lazy: optional

                    result = CaseResult.for_case(case, Status.ERROR, f"executor: {e}", error=traceback.format_exc())
                    if worker is not None:  # its protocol state is unknown now: never reuse it
                        self._track(worker, False)
                        worker.kill()
                        worker = None
                todo.finish(case.case_id)
                if self._stop.is_set():
                    break
                done.put(("result", result))
        finally:
            if worker is not None:
                self._track(worker, False)
                worker.close()
