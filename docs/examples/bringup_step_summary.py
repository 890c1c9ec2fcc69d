"""A post-run step as a plugin: after every run of cases, append a Markdown summary of it to a file (the
job summary of a CI system: GitHub Actions reads `$GITHUB_STEP_SUMMARY`). Loaded with `--import`:

    PYTHONPATH=docs/examples bringup --import bringup_step_summary --device cpu smoke --step-summary summary.md
    PYTHONPATH=docs/examples bringup --import bringup_step_summary run --quick --step-summary "$GITHUB_STEP_SUMMARY"

One module, one `register_post_run` call (at the bottom). It imports from one module, bringup.api (the
contract; it re-exports the case vocabulary and BadInput), and no torch. A step is `prepare` (before any
work: a bad option is one line and exit 2, nothing stored), then `run` (more work once the run's cases are
done; none here) and `finish` (after the suites' tables: print, return extras for summary.json, optionally
an exit code).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.api import (
    AfterRun,
    BadInput,
    CaseResult,
    CommandOptions,
    Finished,
    Options,
    PostRun,
    Status,
    Step,
    register_post_run,
)


def add_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    """Global and after every command that runs cases (`suppress`: the copy after the sub-command)."""
    p.add_argument(
        "--step-summary",
        metavar="FILE",
        default=argparse.SUPPRESS if suppress else None,
        help="append a Markdown summary of the run to FILE (e.g. $GITHUB_STEP_SUMMARY)",
    )


@dataclass(frozen=True)
class StepSummaryOptions(CommandOptions):
    """The step's options, typed and frozen (add_options' dests): the run's Options hold them under its name."""

    step_summary: str | None = None


def markdown(run_id: str, device: str, results: Sequence[CaseResult]) -> str:
    """One table (suite, cases, pass, not passing) and every case that did not pass, with its reason."""
    by_suite: dict[str, Counter[str]] = {}
    for r in results:
        c = by_suite.setdefault(r.suite, Counter())
        c["cases"] += 1
        c["pass" if r.status is Status.PASS else "not passing"] += 1
    rows = [f"| {s} | {c['cases']} | {c['pass']} | {c['not passing']} |" for s, c in by_suite.items()]
    failing = [
        f"- `{r.suite}/{r.name}`: **{r.status.value}** {r.reason}".rstrip()
        for r in results
        if r.status is not Status.PASS
    ]
    return (
        "\n".join(
            [
                f"### bringup run `{run_id}` on `{device}`",
                "",
                "| suite | cases | pass | not passing |",
                "|---|---:|---:|---:|",
                *rows,
                "",
                *failing,
                "",
            ]
        )
        + "\n"
    )


class StepSummary(Step):
    def __init__(self, path: Path) -> None:
        self.path = path

    def finish(self, ctx: AfterRun, added: Sequence[CaseResult]) -> Finished:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(markdown(ctx.run.run_id, ctx.run.device, ctx.results))
        ctx.console.print(f"step summary: {self.path}", highlight=False, markup=False)
        return Finished({"step_summary": str(self.path)})


def prepare(options: Options, device: Any) -> StepSummary | None:
    """None without --step-summary; a FILE whose folder is missing is one line and exit 2, before any work."""
    opts = options.part("step-summary", StepSummaryOptions)
    path = opts.step_summary if opts is not None else None
    if path is None:
        return None
    p = Path(path).expanduser()
    if not p.parent.is_dir() or p.is_dir():
        raise BadInput(f"--step-summary {path}: not a file in an existing directory")
    return StepSummary(p)


register_post_run(PostRun("step-summary", add_options, prepare, order=50, options=StepSummaryOptions))
