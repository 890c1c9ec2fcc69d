"""`bringup run`: every registered suite with `run_cases`, on one device, in one run, then the scorecard.

Order: the registry's (`bringup.api.suites()`): smoke -> probe -> train -> flex -> zoo -> ops -> profile,
then suites of `--import` plugins by their `order`,
with what a capability's run options add (`bringup.api.RunOptions`: the port scan of `--port PATH`,
static analysis in this process, no device: its findings go into the run's info as `info["port"]` and
into summary.json as `port`; train's --save/--load-cache-artifact), then the HTML report
(`<db dir>/<run id>/report.html`, or `--out`). `--quick` (default) plans each suite's small cases
(about 10 minutes on 2 cpu cores); `--full` the full matrices, for a real accelerator.
`--skip a,b` / `--only a,b` pick suites.
The runner shows one progress bar (case n/N, the current suite/case) on a terminal.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import threading
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bringup.api import RunPart, missing_builtin, run_options, suites
from bringup.case import Case, CaseResult
from bringup.errors import BadInput
from bringup.files import check_output_path
from bringup.options import CommandOptions, Options, add_options, flag, measured, not_measured
from bringup.store import RunInfo, Store

if TYPE_CHECKING:  # types only: flow imports torch
    from rich.console import Console

    from bringup.device import Device
    from bringup.flow import Session


SUITES_ONLY = "which suites run: each suite's cases, and its history line, are the same"


@dataclass(frozen=True)
class RunCommandOptions(CommandOptions):
    """`bringup run`'s own options, each field its flag (the parser is built from them: add_arguments; the
    capabilities' run options are theirs: Options.parts)."""

    quick: bool = measured(
        False,
        flag=flag(
            "--quick",
            action="store_true",
            exclusive="size",
            help="small cases for cpu / CI (~10 min on 2 cores; default)",
        ),
    )
    full: bool = measured(
        False,
        flag=flag("--full", action="store_true", exclusive="size", help="the full matrices, for a real accelerator"),
    )
    skip: str = not_measured(
        "", SUITES_ONLY, flag=flag("--skip", help="comma list of suites to leave out (e.g. zoo,ops)")
    )
    only: str = not_measured("", SUITES_ONLY, flag=flag("--only", help="comma list of suites to run (default: all)"))
    out: str | None = not_measured(
        None, flag=flag("--out", metavar="FILE", help="HTML report path (default: in the run dir)")
    )


OPTIONS = RunCommandOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, RunCommandOptions)
    for o in run_options():  # a capability's own options on `run` (port's --port, train's cache artifact)
        o.add_arguments(p)


def _names(spec: str) -> set[str]:
    return {s.strip() for s in spec.split(",") if s.strip()}


def plan(options: Options, device: Device) -> list[Case]:
    """The run's cases, suite by suite in the registry's order. Pure: validates options (BadInput) and plans."""
    return plan_parts(options, device)[0]


def plan_parts(options: Options, device: Device) -> tuple[list[Case], list[RunPart]]:
    """The run's cases, suite by suite in the registry's order, rewritten by the capabilities' run options
    (bringup.api.RunOptions), and what those options add to the run. Validates options (BadInput)."""
    planned = [s for s in suites() if s.run_cases is not None]
    extra = run_options()
    names = [s.name for s in planned]
    known = [*names, *dict.fromkeys(o.name for o in extra if o.name not in names)]
    args = options.of(RunCommandOptions)
    skip, only = _names(args.skip), _names(args.only)
    for asked in sorted(skip | only):
        if asked not in known:
            raise BadInput(f"unknown suite {asked!r} in --skip/--only; suites: {', '.join(known)}")
    cases: list[Case] = []
    for s in planned:
        if s.name in skip or (only and s.name not in only) or s.run_cases is None:
            continue
        cases += s.run_cases(device, not args.full)
    parts: list[RunPart] = []
    for o in extra:
        part = o.apply(options, device, cases, o.name not in skip and (not only or o.name in only))
        if part is not None:
            cases = part.cases
            parts.append(part)
    return cases, parts


def describe(cases: list[Case], args: RunCommandOptions) -> str:
    c = Counter(k.suite for k in cases)
    parts = [f"{s} {n}" for s, n in c.items()]
    missing = [s for s in missing_builtin() if s not in _names(args.skip)]
    line = f"plan ({'full' if args.full else 'quick'}): " + ", ".join(parts)
    if missing:
        line += f"; not in this checkout: {', '.join(missing)}"
    return line


def finish(store: Store, run: RunInfo, results: list[CaseResult], out: str | None = None) -> None:
    """After every run (and every resumed run): the HTML scorecard."""
    if importlib.util.find_spec("bringup.report.html") is None:
        return

    from bringup.report import html  # lazy: fast --help

    try:
        path = html.write_report(store, run.run_id, out)
    except Exception as e:  # a report bug must not cost the run its verdict (exit code): say so, keep the trace
        log = store.path.parent / run.run_id / "report-error.txt"
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(traceback.format_exc())
        except OSError:
            pass
        print(
            f"bringup: the HTML report failed ({type(e).__name__}: {e}); details in {log}; the results are "
            f"saved: retry with `bringup --db {store.path} report {run.run_id}`",
            file=sys.stderr,
        )
        return
    print(f"report: {path}")


def side_by_side(options: Options) -> Options:
    """`run --quick` without --workers runs its cases side by side, one worker per core (at most 4: the runner
    starts the longest ready case first, bringup/runner/schedule.py); `--full`, whose timings are the point, and
    every other command keep one worker unless told."""
    from bringup.runner.process import auto_workers  # lazy: torch-free --help

    common = options.common
    if common.workers is not None or options.of(RunCommandOptions).full:
        return options
    return dataclasses.replace(options, common=dataclasses.replace(common, workers=auto_workers()))


class LeftOut:
    """What `--full` plans that a quick run does not, per suite: planned in a thread while the quick run's
    workers run (planning every zoo type and op takes seconds; the main process only waits on the workers)."""

    def __init__(self, options: Options, device: Device) -> None:
        self.counts: dict[str, int] = {}
        self.error: str | None = None
        args = options.of(RunCommandOptions)
        full = dataclasses.replace(args, quick=False, full=True)
        self._options = dataclasses.replace(options, command=full)
        self._device = device
        self._thread = threading.Thread(target=self._plan, daemon=True)
        self._thread.start()

    def _plan(self) -> None:
        try:
            self.counts = dict(Counter(c.suite for c in plan_parts(self._options, self._device)[0]))
        except Exception as e:  # a suite's full plan failing must not cost the quick run its verdict: say it
            self.error = f"{type(e).__name__}: {e}"

    def summary(self, cases: list[Case]) -> dict[str, Any]:
        """{suite: {"quick": n, "full": m}} for every suite whose full plan has cases this run did not."""
        self._thread.join(timeout=120)
        if self.error is not None or self._thread.is_alive():
            return {"error": self.error or "the full plan took over 120 s"}
        quick = Counter(c.suite for c in cases)
        return {s: {"quick": quick.get(s, 0), "full": n} for s, n in self.counts.items() if n > quick.get(s, 0)}

    @staticmethod
    def line(summary: dict[str, Any]) -> str:
        if "error" in summary:
            return f"quick path: what --full would add is unknown ({summary['error']})"
        parts = [f"{s} {v['full']} cases (here {v['quick']})" for s, v in summary.items()]
        return "quick path: --full runs " + ", ".join(parts) if parts else "quick path: --full plans nothing more"


def main(sess: Session) -> int:
    from bringup.flow import execute_cases, summarize_by_suite  # lazy: torch-free --help

    sess.options = side_by_side(sess.options)
    args = sess.options.of(RunCommandOptions)
    check_output_path(args.out, "--out")
    cases, parts = plan_parts(sess.options, sess.device)
    left_out = None if args.full else LeftOut(sess.options, sess.device)
    info: dict[str, Any] = {}
    for part in parts:
        info.update(part.info)
    if not cases and not info:
        raise BadInput("run: every suite was skipped; nothing to do")
    sess.console.print(describe(cases, args), highlight=False)

    def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
        extras = summarize_by_suite(results, console)
        for part in parts:
            if part.summarize is not None:
                part.summarize(console)
        extras.update(info)
        if left_out is not None:
            # in the run's info too (stored by `after`): an exported run's scorecard says it
            extras["quick_left_out"] = info["quick_left_out"] = left_out.summary(cases)
            console.print(LeftOut.line(extras["quick_left_out"]), highlight=False)
        return extras

    def after(store: Store, run: RunInfo, results: list[CaseResult]) -> None:
        if info:
            store.update_run_info(run.run_id, **info)
        finish(store, run, results, args.out)

    return execute_cases(sess, "run", cases, summarize, after)
