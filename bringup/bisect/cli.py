"""`bringup bisect TARGET (--between OLD NEW | --wheels DIR | --set REQS ... | --sets FILE) [options]`.

One run in the store (command `bisect`): its info holds the spec (candidates, target, settings) and, once
done, the answer; each candidate's runs are one case, committed the moment it finishes. Rounds: the search
(plan.py) names the candidates to run, they run as cases through the runner (the local pool, or Ray with
`--executor ray`: `--workers N` candidates at once when the env budget allows), and the next round reads
what the store holds. A killed bisection loses no finished candidate: `bringup --resume RUN_ID` (alone, or
`bringup --resume RUN_ID bisect`) continues it from its stored spec.

Exit codes: 0 the answer is one candidate (with --all: every candidate ran) and no candidate was flaky;
1 the bisection finished without that (the endpoints agree or one is unusable, the change is among
skipped candidates, a candidate was flaky, --max-envs ran out); 2 bad input, nothing stored.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.bisect.args import BisectOptions, add_arguments
from bringup.errors import BadInput
from bringup.files import write_json
from bringup.interrupt import INTERRUPTS, interrupted, sigterm_raises
from bringup.options import GlobalOptions
from bringup.session import CommandSession
from bringup.store import new_run_id

if TYPE_CHECKING:
    from rich.console import Console


__all__ = ["OPTIONS", "add_arguments", "drive", "main", "resume"]
OPTIONS = BisectOptions


def main(sess: CommandSession) -> int:
    from bringup.bisect.prepare import build_spec  # lazy: fast --help

    if sess.resume_run is not None:
        return resume(sess)
    opts = sess.options.of(BisectOptions)
    return drive(sess, opts, sess.options.common, build_spec(opts, sess.db))


def resume(sess: CommandSession) -> int:
    """`bringup --resume RUN_ID` of a bisection: its stored spec and options, the finished candidates kept."""
    from bringup.bisect.spec import BisectSpec, file_sha256  # lazy: fast --help

    run = sess.resume_run
    assert run is not None  # main() resumes only a resumed run
    data = run.info.get("bisect")
    if run.command != "bisect" or not isinstance(data, dict) or "spec" not in data:
        raise BadInput(f"--resume {run.run_id}: not a bisection")
    spec = BisectSpec.from_json(data["spec"])
    opts, common = BisectOptions.from_json(data["options"])
    t = spec.target
    if t.kind == "repro" and (not Path(t.path).is_file() or file_sha256(t.path) != t.sha256):
        raise BadInput(f"--resume {run.run_id}: the repro {t.path} is gone or changed since the bisection started")
    return drive(sess, opts, common, spec, resumed=True)


@contextmanager
def ray_session(executor: str, workers: int, address: str | None) -> Iterator[None]:
    """With --executor ray: one Ray connection for the whole bisection (each round's executor finds it and
    leaves it up; a local instance is started once, not per round), shut down at the end if started here."""
    if executor != "ray":
        yield
        return

    import ray  # lazy: slow ray import, only with --runner ray

    from bringup.runner.ray import check_reachable  # lazy: torch-free --help

    if ray.is_initialized():
        yield
        return
    quiet: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    if address:
        check_reachable(address)
        try:
            ray.init(address=address, **quiet)
        except Exception as e:
            raise BadInput(f"--ray-address {address}: {type(e).__name__}: {e}".splitlines()[0]) from None
    else:
        ray.init(address="local", num_cpus=max(len(os.sched_getaffinity(0)), workers), **quiet)
    try:
        yield
    finally:
        ray.shutdown()


def drive(sess: CommandSession, opts: BisectOptions, common: GlobalOptions, spec: Any, resumed: bool = False) -> int:
    """Run the bisection `spec` (from `opts`) round by round, driven with `common`'s --workers, --executor and
    --ray-address."""
    with ray_session(common.executor, _workers(common), common.ray_address):
        return _drive(sess, opts, common, spec, resumed)


def _workers(common: GlobalOptions) -> int:
    return int(common.workers or 1)


def _drive(sess: CommandSession, opts: BisectOptions, common: GlobalOptions, spec: Any, resumed: bool) -> int:
    from bringup.bisect import answer  # lazy: fast --help
    from bringup.bisect.envs import EnvCache  # lazy: fast --help
    from bringup.provenance import run_info  # lazy: fast --help
    from bringup.runner import make_executor  # lazy: torch-free --help
    from bringup.runner.process import WorkerSpec, thread_env  # lazy: torch-free --help

    console = sess.console
    store = sess.open_store()
    try:
        run_id = sess.resume_run.run_id if resumed and sess.resume_run is not None else new_run_id()
        run_dir = sess.db.resolve().parent / run_id
        workers = _workers(common)
        wspec = WorkerSpec(device="cpu", log_dir=str(run_dir / "logs"), env=thread_env(workers))
        # one executor per round (an executor shuts down after its run); the first one made before the run
        # row exists, so a bad executor setting (an unreachable Ray cluster) leaves nothing stored
        new_executor = lambda: make_executor(common.executor or "local", wspec, workers, common.ray_address)
        first = [new_executor()]
        if resumed:
            store.reopen_run(run_id)
        else:
            info = {"imports": [], "bisect": {"spec": spec.to_json(), "options": opts.to_json(common)}, **run_info()}
            info["measured"] = sess.options.measured()  # what `report --history` keys the run's lines by
            where = f"bisect of {spec.target.title} on {spec.target.device}"
            store.new_run("bisect", sess.argv, "cpu", where, info, run_id=run_id)  # the driver runs no device
        run = store.get_run(run_id)
        console.print(
            f"bisect {spec.target.title}: {spec.source}; run {run_id} in {sess.db}" + (" (resumed)" if resumed else ""),
            highlight=False,
            markup=False,
        )
        with sigterm_raises():
            try:
                executors = lambda: first.pop() if first else new_executor()
                con = search(store, run_id, spec, executors, run_dir, workers, console)
                followup(store, run_id, spec, con, executors, run_dir, console)
            except INTERRUPTS:
                store.end_run(run_id, "interrupted")
                return interrupted(sess.db, run_id, "candidates")
        results = store.results(run_id, "bisect")
        cache = EnvCache(spec.settings.env_cache, spec.settings.env_cache_max_gb)
        wall = time.time() - run.started_at
        ans = answer.build(run_id, spec, con, results, wall, cache.total_bytes())
        store.update_run_info(run_id, bisect_answer=ans)
        store.end_run(run_id, "finished")
        answer.print_answer(ans, console)
        write_outputs(store, run_id, run_dir, ans, opts.json, console)
    finally:
        store.close()
    return int(ans["exit_code"])


def seen_from(results: list[Any]) -> dict[int, Any]:
    """The search's view of the stored candidates: index -> Seen. A candidate case the runner itself ended
    (its worker killed past the case budget, crashed) is a skip: it said nothing about the target."""
    from bringup.bisect.plan import SKIP, Seen  # lazy: fast --help

    out = {}
    for r in results:
        if r.params.get("kind") != "candidate":
            continue
        i = int(r.params["index"])
        out[i] = Seen(i, str(r.fields.get("verdict") or SKIP))
    return out


def search(store: Any, run_id: str, spec: Any, executors: Any, run_dir: Path, width: int, console: Console) -> Any:
    from bringup.bisect import plan  # lazy: fast --help
    from bringup.bisect.run import candidate_case  # lazy: fast --help
    from bringup.runner import execute  # lazy: torch-free --help

    k = len(spec.candidates)
    before = -1
    while True:
        seen = seen_from(store.results(run_id, "bisect"))
        st = plan.step(k, seen, width, spec.every, spec.max_envs, spec.new_verdict)
        if st.done is not None:
            return st.done
        if len(seen) == before:
            raise RuntimeError(f"bisect: no result came back for {', '.join(spec.candidates[i].label for i in st.run)}")
        before = len(seen)
        labels = ", ".join(spec.candidates[i].label for i in st.run)
        console.print(f"bisect: running {labels} ({len(seen)} of {k} candidates done)", highlight=False, markup=False)
        execute(store, run_id, [candidate_case(spec, i) for i in st.run], executors(), run_dir)


def followup_plan(spec: Any, con: Any) -> list[tuple[int, str]]:
    """On the failing side of the (first) change: PyTorch's compiler bisector for a compiled target, bringup
    localize for a stored zoo case (each when asked, or by default when it applies)."""
    from bringup.bisect.plan import AMBIGUOUS, EVERY, FOUND  # lazy: fast --help

    if con.kind == EVERY and con.first_new is None and con.newest is not None and con.new != "pass":
        index = con.newest  # every candidate fails the same way: on the newest (is it fixed? not yet: why)
    elif con.kind not in (FOUND, EVERY, AMBIGUOUS) or con.first_new is None or con.last_old is None:
        return []  # (ambiguous: the first candidate seen with the new verdict, which has it for sure)
    else:
        index = con.first_new if con.new != "pass" else con.last_old
    out = []
    if spec.compiler_bisect == "on" or (spec.compiler_bisect == "auto" and spec.target.compiles):
        out.append((index, "compiler_bisect"))
    if spec.localize == "on" or (spec.localize == "auto" and spec.target.zoo_model is not None):
        out.append((index, "localize"))
    return out


def followup(store: Any, run_id: str, spec: Any, con: Any, executors: Any, run_dir: Path, console: Console) -> None:
    from bringup.bisect.run import followup_case  # lazy: fast --help
    from bringup.runner import execute  # lazy: torch-free --help

    cases = [followup_case(spec, i, kind, spec.followup_budget_s) for i, kind in followup_plan(spec, con)]
    if cases:
        console.print(f"bisect: {', '.join(c.name for c in cases)}", highlight=False, markup=False)
        execute(store, run_id, cases, executors(), run_dir)


def write_outputs(
    store: Any, run_id: str, run_dir: Path, ans: dict[str, Any], json_path: str | None, console: Console
) -> None:
    from bringup.report import html  # lazy: fast --help
    from bringup.report.contract import contract  # lazy: fast --help

    run = store.get_run(run_id)
    results = store.results(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    from bringup.report.portable import travelling  # lazy: fast --help

    data = travelling(contract(run, results, {"bisect": ans}), run.info, run_dir)  # summary.json travels
    summary = write_json(run_dir / "summary.json", data)
    store.update_run_info(run_id, summary=str(summary))
    page = html.write_report(store, run_id, run_dir / "report.html")
    if json_path:
        write_json(json_path, ans)
    console.print(f"summary: {summary}\nreport: {page}", highlight=False, markup=False)
