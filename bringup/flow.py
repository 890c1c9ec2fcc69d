"""The one way any command runs cases: validate -> store a run -> execute -> summarise -> outputs.

cli -> suite (cases) -> flow.execute_cases -> runner -> store -> report (terminal, JSON, ...).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from bringup.api import AfterRun, get_suite, post_runs, suites
from bringup.case import Case, CaseResult, is_failure
from bringup.console import case_table, final_line, make_console, run_line, unjudged_suites
from bringup.device import Device, read_run_peaks
from bringup.files import check_outputs, write_json
from bringup.interrupt import INTERRUPTS, interrupted, sigterm_raises
from bringup.options import GlobalOptions, Options
from bringup.provenance import run_info
from bringup.report import ci
from bringup.report.contract import contract
from bringup.report.portable import travelling
from bringup.runner import execute, make_executor
from bringup.runner.fallback_policy import FallbackPolicy
from bringup.runner.process import WorkerSpec, thread_env
from bringup.session import CommandSession
from bringup.store import DEFAULT_DB, RunInfo, Store, new_run_id


@dataclass
class Session:
    """What every command gets: its options (typed and frozen, built once at the face), the device, plugins,
    where results go."""

    options: Options
    device: Device
    imports: list[str]
    db: Path
    argv: list[str]
    console: Console = field(default_factory=make_console)
    resume_run: RunInfo | None = None
    # set by execute_cases once the run row exists: what a suite's summarize_stored reads (api.Suite)
    store: Store | None = None
    run_id: str | None = None

    def open_store(self) -> Store:
        return Store(self.db)


@dataclass(frozen=True)
class _RunPlace:
    """Where a run's cases go: its id, its directory, and how its workers are made."""

    run_id: str
    run_dir: Path
    spec: WorkerSpec
    workers: int

    def executor(self, opts: GlobalOptions) -> Any:
        return make_executor(opts.executor, self.spec, self.workers, opts.ray_address)


@dataclass
class _Finished:
    """What the post-run steps and the summary made of a finished run."""

    results: list[CaseResult]
    extras: dict[str, Any]
    code: int | None = None
    judgement: Any = None


# What a command reads (bringup.session, the layer every capability may import): mypy checks here that the
# session the face builds is one.
_COMMAND_SESSION: type[CommandSession] = Session


def execute_cases(
    sess: Session,
    command: str,
    cases: Sequence[Case],
    summarize: Callable[[list[CaseResult], Console], dict[str, Any]],
    after: Callable[[Store, RunInfo, list[CaseResult]], None] | None = None,
    record: Callable[[Store, str], None] | None = None,
) -> int:
    """Run `cases` as one run (or the resumed run), then print, write outputs and return the exit code.
    `record(store, run_id)` stores what planning found beside the cases, once the run row exists."""
    opts = sess.options.common
    check_outputs(opts)
    policy = fallback_policy(opts, sess.resume_run)
    # the post-run steps asked for (bringup.api.PostRun): a bad option is exit 2 before any work
    steps = [(p, st) for p in post_runs() if (st := p.prepare(sess.options, sess.device)) is not None]
    store = sess.open_store()
    try:
        place = _place(sess)
        # The executor first: a bad executor setting (unreachable Ray cluster...) leaves no run row.
        executor = place.executor(opts)
        _open_run(sess, store, command, place.run_id, record)
        sess.console.print(
            run_line(place.run_id, sess.device.name, sess.device.device_name, len(cases), sess.db), highlight=False
        )
        with sigterm_raises():
            try:
                execute(
                    store, place.run_id, cases, executor, place.run_dir, policy=policy.apply if policy.active else None
                )
            except INTERRUPTS:
                executor.shutdown()
                store.end_run(place.run_id, "interrupted")
                return interrupted(sess.db, place.run_id, "cases")
        store.end_run(place.run_id, "finished")
        run = store.get_run(place.run_id)
        results = store.results(place.run_id)
        new_executor = lambda: place.executor(opts)
        ctx = AfterRun(sess.options, store, run, cases, results, place.run_dir, sess.console, new_executor)
        done = _finish(sess, store, ctx, results, steps, summarize)
        write_outputs(sess, store, run, done.results, done.extras, place.run_dir, done.judgement)
        if after is not None:
            after(store, run, done.results)
    finally:
        store.close()
    if done.code is not None:
        return done.code
    return exit_code(done.results, opts.allow_unsupported)


def _place(sess: Session) -> _RunPlace:
    """The run's id (the resumed one's, or a new one), its directory beside the store, its workers."""
    opts = sess.options.common
    run_id = sess.resume_run.run_id if sess.resume_run is not None else new_run_id()
    run_dir = sess.db.resolve().parent / run_id  # absolute: artifact paths stay valid from anywhere
    workers = opts.workers or 1
    spec = WorkerSpec(
        device=sess.device.name,
        imports=tuple(sess.imports),
        max_rss_gb=opts.max_rss_gb,
        log_dir=str(run_dir / "logs"),
        env=thread_env(workers),
    )
    return _RunPlace(run_id, run_dir, spec, workers)


def _open_run(
    sess: Session, store: Store, command: str, run_id: str, record: Callable[[Store, str], None] | None
) -> None:
    """The run row (reopened when resumed), then what planning found beside the cases."""
    if sess.resume_run is not None:
        store.reopen_run(run_id)
    else:
        info = {"imports": sess.imports, "options": _options(sess.options), "measured": measured(sess.options)}
        info.update(run_info())
        store.new_run(command, sess.argv, sess.device.name, sess.device.device_name, info, run_id=run_id)
    sess.store, sess.run_id = store, run_id
    if record is not None:
        record(store, run_id)


def _finish(
    sess: Session,
    store: Store,
    ctx: AfterRun,
    results: list[CaseResult],
    steps: list[tuple[Any, Any]],
    summarize: Callable[[list[CaseResult], Console], dict[str, Any]],
) -> _Finished:
    """The post-run steps (in order: more work into the run), the suite's summary, the run's peaks, then
    the steps' last word (in reverse: the first has the last word)."""
    added = [st.run(ctx) for _, st in steps]
    done = _Finished(results, summarize(results, sess.console))
    peaks = read_run_peaks(ctx.run_dir)
    if peaks:  # the one peak per (device, dtype) every MFU of this run used (bringup/device/peaks.py)
        store.update_run_info(ctx.run.run_id, peak_flops=peaks)
        done.extras["run_peak_flops"] = peaks
    for (_, st), more in reversed(list(zip(steps, added, strict=True))):
        step_done = st.finish(ctx, more)
        done.extras.update(step_done.extras)
        if step_done.exit_code is not None:
            done.code = step_done.exit_code
        if step_done.judgement is not None:
            done.judgement = step_done.judgement
    done.results = [*results, *(r for more in added for r in more)]
    return done


def fallback_policy(opts: GlobalOptions, resumed: RunInfo | None = None) -> Any:
    """The run's `--fallback` (bringup/runner/fallback_policy.py; a resumed run keeps the one it was started
    with unless given again); a bad value or suite: BadInput (exit 2)."""
    values = opts.fallback
    if values is None and resumed is not None:
        values = (resumed.info.get("options") or {}).get("fallback")
    return FallbackPolicy.parse(values, [s.name for s in suites()])


def exit_code(results: Sequence[CaseResult], allow_unsupported: bool = False) -> int:
    """1 when a case failed, or when a suite judged nothing (all its cases ref_fail: a run that checked
    nothing there is not a green run); else 0."""
    if any(is_failure(r.status, allow_unsupported) for r in results) or unjudged_suites(results):
        return 1
    return 0


def write_outputs(
    sess: Session,
    store: Store,
    run: RunInfo,
    results: list[CaseResult],
    extras: dict[str, Any],
    run_dir: Path,
    expect: Any = None,
) -> None:
    data = contract(run, results, extras)
    run_dir.mkdir(parents=True, exist_ok=True)
    # summary.json travels (paths relative to the run's folder, roots named); --json, written where the
    # user asked on this machine, and the store keep the absolute paths
    summary = write_json(run_dir / "summary.json", travelling(data, run.info, run_dir))
    store.update_run_info(run.run_id, summary=str(summary))
    opts = sess.options.common
    if opts.json:
        write_json(opts.json, data)
    if opts.junit or opts.csv:
        if opts.junit:
            ci.write_junit(opts.junit, run, results, expect)
        if opts.csv:
            ci.write_csv(opts.csv, run, results, expect)
    sess.console.print(final_line(run.run_id, results))
    sess.console.print(f"summary: {summary}", highlight=False)


def summarize_by_suite(
    results: list[CaseResult], console: Console, store: Store | None = None, run_id: str | None = None
) -> dict[str, Any]:
    """Each suite prints its own table and contributes its own top-level JSON under its name."""
    extras: dict[str, Any] = {}
    by_suite: dict[str, list[CaseResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    for name, rs in by_suite.items():
        suite = get_suite(name)
        if suite is not None and suite.command:
            extras[name] = suite.summarizer(store, run_id)(rs, console)
        else:
            console.print(case_table(name, rs, []))
    return extras


def _options(options: Options) -> dict[str, Any]:
    """What the run stores as its options (`info["options"]`: --resume): every dest's value."""
    return _json(options.as_dict())


def measured(options: Options) -> dict[str, Any]:
    """What the run stores as `info["measured"]`: the options that change what it measures, with the values in
    effect (bringup.options.Options.measured); `report --history` keys its lines by them."""
    return _json(options.measured())


def _json(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if isinstance(v, (str, int, float, bool, list, type(None)))}


def default_db() -> str:
    return os.environ.get("BRINGUP_DB", DEFAULT_DB)
