"""Runner: plan cases in the store, skip the finished ones, run the rest on an executor, commit each
result the moment it arrives."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bringup.case import Case, CaseResult
from bringup.console import make_console, progress_line
from bringup.errors import BadInput
from bringup.runner.local import LocalExecutor
from bringup.runner.process import WorkerSpec
from bringup.runner.ray import RayExecutor
from bringup.store import Store


class Executor(Protocol):
    name: str

    def run(
        self,
        cases: Sequence[Case],
        run_dir: Path,
        on_result: Callable[[CaseResult], None],
        on_start: Callable[[Case], None] | None = None,
    ) -> None: ...

    def shutdown(self) -> None: ...


def make_executor(name: str, spec: WorkerSpec, workers: int, ray_address: str | None = None) -> Executor:
    if name == "local":
        if ray_address:
            raise BadInput("--ray-address needs --executor ray")

        return LocalExecutor(spec, workers)
    if name == "ray":
        return RayExecutor(spec, workers, address=ray_address)
    raise BadInput(f"unknown executor {name!r}; use local or ray")


def execute(
    store: Store,
    run_id: str,
    cases: Sequence[Case],
    executor: Executor,
    run_dir: Path,
    console: Console | None = None,
    policy: Callable[[CaseResult], CaseResult] | None = None,
) -> list[CaseResult]:
    """Run the cases of `run_id` that are not finished yet. Returns the results of this call only;
    the full picture is always `store.results(run_id)`. `policy` (the run's `--fallback`) may change a
    result before it is stored."""
    store.plan(run_id, cases)
    done = store.finished_ids(run_id)
    todo = [c for c in cases if c.case_id not in done]
    seen: set[str] = set()
    todo = [c for c in todo if not (c.case_id in seen or seen.add(c.case_id))]  # type: ignore[func-returns-value]  # set.add returns None: the keep-first dedupe idiom
    out: list[CaseResult] = []
    if not todo:
        return out
    console = console or make_console(stderr=True)
    show = console.is_terminal and sys.stderr.isatty()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
        console=console,
        disable=not show,
        transient=True,
    ) as progress:
        task = progress.add_task("cases", total=len(todo), current="")

        def on_start(c: Case) -> None:
            progress.update(task, current=f"{c.suite}/{c.name}")

        def on_result(r: CaseResult) -> None:
            if policy is not None:
                r = policy(r)
            store.record(run_id, r)  # committed at once: a crash of anything later loses nothing
            out.append(r)
            progress.advance(task)
            if not show:
                console.print(progress_line(len(out), len(todo), r), highlight=False, markup=False)

        t0 = time.monotonic()
        executor.run(todo, run_dir, on_result, on_start)
        progress.update(task, current=f"done in {time.monotonic() - t0:.1f} s")
    return out
