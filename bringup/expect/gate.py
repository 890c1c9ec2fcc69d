"""The CI gate, a post-run step (`bringup.api.PostRun`, registered below): `--expect FILE` and its options.

prepare (before any work: a bad file is exit 2) -> repeat_runs (`--repeat N`: the same cases N-1
more times, each a run of its own in the store, `info.repeat_of` = the first run) -> judge (classify,
print, store the block in the run's info) -> exit code (after `--update-expect`, against the new file).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.api import AfterRun, Finished, PostRun, Step, register_post_run
from bringup.case import Case, CaseResult
from bringup.errors import BadInput
from bringup.expect.classify import Judgement, Klass, classify
from bringup.expect.file import Expectation, ExpectFile
from bringup.options import CommandOptions, Options, not_measured, positive_int

if TYPE_CHECKING:
    from rich.console import Console

    from bringup.device import Device

if TYPE_CHECKING:
    from rich.console import Console

    from bringup.device import Device


@dataclass(frozen=True)
class GateOptions(CommandOptions):
    """The gate's options (add_options' dests), `Options.parts["expect"]`."""

    expect: str | None = not_measured(None, "the results classified against the file: every status is the same")
    strict: bool = not_measured(False, "the exit code only")
    update_expect: bool = not_measured(False, "the file rewritten from the run")
    repeat: int = not_measured(1, "more runs of the same cases, each stored as a run of its own")


def add_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    """--expect, --strict, --update-expect, --repeat: global and after every run/suite command."""
    d = argparse.SUPPRESS if suppress else None
    p.add_argument(
        "--expect",
        metavar="FILE",
        default=d,
        help="expectations file (YAML): classify cases as expected / new failure / new pass / flaky; "
        "exit 1 only on a new failure",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        default=d if suppress else False,
        help="with --expect: a new pass or a flaky case also makes the exit code 1",
    )
    p.add_argument(
        "--update-expect",
        action="store_true",
        default=d if suppress else False,
        help="with --expect: rewrite the file from this run (comments and links kept)",
    )
    p.add_argument(
        "--repeat",
        type=positive_int,
        default=d if suppress else 1,
        metavar="N",
        help="with --expect: run the cases N times; a case whose status differs is flaky",
    )


@dataclass
class Gate:
    file: ExpectFile
    section: tuple[str, str] | None
    expectations: dict[str, Expectation]
    device: str
    torch_version: str
    strict: bool
    update: bool
    repeat: int
    allow_unsupported: bool

    @classmethod
    def of(
        cls, f: ExpectFile, device: str, torch_version: str, strict: bool, update: bool, repeat: int, allow: bool
    ) -> Gate:
        """The gate of file `f` for this device and torch: its section and expectations selected."""
        sel = f.select(device, torch_version)
        return cls(f, sel, f.expectations(sel), device, torch_version, strict, update, repeat, allow)

    def write_file(
        self, results: Sequence[CaseResult], repeats: Sequence[Sequence[CaseResult]]
    ) -> tuple[dict[str, int], Gate]:
        """Write the file from this run (comments and links kept): what changed, and the gate of the file as
        written (to judge the run again against it)."""
        from bringup.expect.update import apply  # lazy: torch-free --help

        n = apply(self.file, results, repeats, self.device, self.torch_version, self.section)
        fresh = ExpectFile.load(self.file.save())
        return n, Gate.of(
            fresh, self.device, self.torch_version, self.strict, False, self.repeat, self.allow_unsupported
        )

    def repeat_runs(
        self,
        store: Any,
        run: Any,
        cases: Sequence[Case],
        new_executor: Callable[[], Any],
        run_dir: Path,
        console: Console,
    ) -> list[list[CaseResult]]:
        from bringup.runner import execute  # lazy: torch-free --help

        out: list[list[CaseResult]] = []
        for k in range(2, self.repeat + 1):
            info = {**run.info, "repeat_of": run.run_id, "repeat": k}
            rid = store.new_run(run.command, run.argv, run.device, run.device_name, info)
            console.print(f"repeat {k}/{self.repeat} of {run.run_id}: run {rid}", highlight=False)
            execute(store, rid, cases, new_executor(), run_dir.parent / rid)
            store.end_run(rid, "finished")
            out.append(store.results(rid))
        return out

    def judge(self, results: Sequence[CaseResult], repeats: Sequence[Sequence[CaseResult]]) -> Judgement:
        return classify(
            results,
            repeats,
            self.expectations,
            section=self.section,
            path=str(self.file.path),
            strict=self.strict,
            allow_unsupported=self.allow_unsupported,
        )

    def finish(
        self,
        store: Any,
        run: Any,
        results: Sequence[CaseResult],
        repeats: Sequence[Sequence[CaseResult]],
        console: Console,
    ) -> tuple[Judgement, int]:
        """Classify, print, remember in the store; with --update-expect write the file and judge again."""
        j = self.judge(results, repeats)
        print_judgement(j, console)
        store.update_run_info(run.run_id, expectations=j.block())
        code = j.exit_code()
        if self.update:
            n, fresh = self.write_file(results, repeats)
            code = fresh.judge(results, repeats).exit_code()
            path, sel = fresh.file.path, fresh.section
            console.print(
                f"--update-expect: {path} ({sel[0] if sel else '-'}/{sel[1] if sel else '-'}): "
                f"{n['added']} added, {n['changed']} changed, {n['removed']} removed; against it "
                f"this run exits {code}",
                highlight=False,
            )
        return j, code


def prepare(opts: GateOptions, device: str, allow_unsupported: bool = False) -> Gate | None:
    """None without --expect. Loads and validates the file before any work (BadInput: exit 2)."""
    path, strict, update, repeat = opts.expect, bool(opts.strict), bool(opts.update_expect), int(opts.repeat or 1)
    if path is None:
        for flag, on in (("--strict", strict), ("--update-expect", update), ("--repeat", repeat > 1)):
            if on:
                raise BadInput(f"{flag} needs --expect FILE")
        return None
    if update:
        from bringup.files import check_output_path  # lazy: torch-free --help

        check_output_path(path, "--expect")
    import torch  # lazy: torch-free --help

    f = ExpectFile.load(path, missing_ok=update)
    return Gate.of(f, device, torch.__version__, strict, update, repeat, bool(allow_unsupported))


class GateStep(Step):
    """The gate in a run: repeats first (the steps' `run`), judges last (its `finish` is the last: it
    replaces the run's exit code)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.repeats: list[list[CaseResult]] = []

    def run(self, ctx: AfterRun) -> list[CaseResult]:
        self.repeats = self.gate.repeat_runs(ctx.store, ctx.run, ctx.cases, ctx.new_executor, ctx.run_dir, ctx.console)
        return []

    def finish(self, ctx: AfterRun, added: Sequence[CaseResult]) -> Finished:
        j, code = self.gate.finish(ctx.store, ctx.run, ctx.results, self.repeats, ctx.console)
        return Finished({"expectations": j.block()}, code, j)


def prepare_step(options: Options, device: Device) -> GateStep | None:
    opts = options.part("expect", GateOptions) or GateOptions()
    gate = prepare(opts, device.name, options.common.allow_unsupported)
    return None if gate is None else GateStep(gate)


_LABEL = {
    Klass.NEW_FAILURE: "[red]NEW FAILURE[/]",
    Klass.NEW_PASS: "[yellow]NEW PASS[/]",
    Klass.FLAKY: "[magenta]FLAKY[/]",
    Klass.EXPECTED: "[dim]expected[/]",
}


def summary_line(j: Judgement) -> str:
    c = j.counts()
    xfail = sum(1 for o in j.by_class(Klass.EXPECTED) if o.status.value != "pass")
    sec = f"{j.section[0]}/torch {j.section[1]}" if j.section else "no section for this device/torch: all pass"
    return (
        f"expectations ({j.path}, {sec}): {c['expected']} expected ({xfail} expected failure(s)), "
        f"{c['new_failure']} new failure(s), {c['new_pass']} new pass(es), {c['flaky']} flaky"
        + (f" over {j.repeat} runs" if j.repeat > 1 else "")
    )


def print_judgement(j: Judgement, console: Console) -> None:
    from rich.markup import escape  # lazy: torch-free --help

    console.print(f"[bold]{escape(summary_line(j))}[/]")
    for k in (Klass.NEW_FAILURE, Klass.NEW_PASS, Klass.FLAKY):
        for o in j.by_class(k):
            link = f" ({o.expected.link})" if o.expected.link else ""
            console.print(f"  {_LABEL[k]} {escape(o.key)}: {escape(o.detail)}{escape(link)}")
    if j.unjudged:
        suites = escape(", ".join(j.unjudged))
        console.print(f"  [red]NOTHING JUDGED[/] in {suites} (every case ref_fail, not expected)")
    if j.not_run:
        console.print(f"  [dim]{len(j.not_run)} expectation(s) for cases this run did not include[/]")
    if j.upstream:  # rows imported from an upstream CSV: its verdict beside bringup's (expect/upstream.py)
        from bringup.expect.upstream import print_rows  # lazy: torch-free --help

        print_rows(j.upstream, console)


def section(block: Mapping[str, Any]) -> str:
    """The run page's expectations section (the block `finish` stored in the run's info)."""
    from bringup.expect.html import section_html  # classes per area (docs/expect.md)  # lazy: torch-free --help

    return section_html(dict(block))


register_post_run(
    PostRun(
        "expect", add_options, prepare_step, order=10, info_key="expectations", section=section, options=GateOptions
    )
)
