"""The suite contract and its registry (TorchTitan's registered-spec pattern), and the metric catalogue.

A suite is one module (or package) that builds a `Suite` and registers it once:

    register_suite(Suite(name="kernels", help="...", add_arguments=add_arguments, build_cases=build_cases,
                         run_cases=run_cases, summarize=summarize, order=80, title="Kernels",
                         section=section, metrics=(MY_METRIC,)))

`cli` offers a sub-command per registered suite, `bringup run` plans every suite with `run_cases`
in `order`, the HTML report (a page shell) renders each suite's `section` in `order`, and CSV /
`compare` read metrics through the catalogue. The built-in suites are the modules in `BUILTIN`,
loaded on first use of `suites()`; a plugin module passed with `--import` registers its own.

Layering: this module sits low (it imports only case / store / metrics at run time), so the report
reads the registry without importing any suite: a suite's section renderer lives next to the suite
and reaches the report through the registry.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from bringup.case import Case, CaseResult, Status
from bringup.errors import BadInput
from bringup.metrics import MetricSpec, metric_spec, metric_specs, register_metric, specs
from bringup.options import CommandOptions, Options, measured, not_measured
from bringup.store import RunInfo, Store

if TYPE_CHECKING:
    from rich.console import Console

    from bringup.device import Device

# A plugin imports what it needs from here: the contract, and the case vocabulary and BadInput re-exported.
__all__ = [
    "BadInput", "Case", "CaseResult", "Status",
    "BUILTIN", "BUILTIN_ARGS", "BUILTIN_POST_RUN", "BUILTIN_RUN_OPTIONS", "CAPABILITIES", "AfterRun", "CaseMarks",
    "Command", "CommandOptions", "Finished", "MetricSpec", "Options", "Page", "PlannedCases", "PostRun", "RunOptions",
    "RunPart", "Step", "Suite", "Tile", "Tool",
    "commands", "get_suite", "measured", "metric_spec", "metric_specs", "not_measured", "post_runs", "register_metric",
    "register_post_run",
    "register_run_options", "register_suite", "register_tool", "run_options", "specs", "suites", "tools",
    "unregister_post_run", "unregister_suite",
]  # fmt: skip

# The built-in capabilities: one package each, one line each (their order here only orders the tools in
# `bringup --help`; `Suite.order` orders the suites). What a package offers is found by module name, so a
# new capability is its package and its line here:
#   suite.py        registers its Suite (imported on first use of suites())
#   args.py         its torch-free command-line face: NAME, HELP, ORDER, add_arguments (its sub-command; the
#                   suite registers the same, tests/spine/test_cli_imports.py checks it), and TOOLS (its
#                   commands that are not suites). `bringup --help` and an argument error read only these.
#   run_options.py  registers its flags on `bringup run` (RunOptions)
#   post_run.py     registers a step after a run's cases (PostRun)
# A module that is not in this checkout (a partial one) is skipped. A plugin registers the same things from
# one module imported with --import (docs/suites.md).
CAPABILITIES: tuple[str, ...] = (
    "bringup.smoke",
    "bringup.probe",
    "bringup.train",
    "bringup.flex",
    "bringup.port",
    "bringup.zoo",
    "bringup.ops",
    "bringup.profile",
    "bringup.selftest",
    "bringup.localize",
    "bringup.bisect",
    "bringup.triage",
)


def _parts(role: str) -> tuple[str, ...]:
    return tuple(f"{pkg}.{role}" for pkg in CAPABILITIES)


BUILTIN: tuple[str, ...] = _parts("suite")
BUILTIN_ARGS: tuple[str, ...] = _parts("args")
BUILTIN_RUN_OPTIONS: tuple[str, ...] = _parts("run_options")
# The face's own post-run step (the expectations gate, bringup/expect/gate.py), then the capabilities'.
BUILTIN_POST_RUN: tuple[str, ...] = ("bringup.expect.gate", *_parts("post_run"))


@dataclass(frozen=True)
class Page:
    """What a suite's HTML section may read: the run, its summary.json extras, where the page goes."""

    run: RunInfo
    summary: Mapping[str, Any]
    allow_unsupported: bool = False
    out_dir: Path | None = None  # the folder the HTML file is written to (for relative artifact links)
    run_dir: Path | None = None  # the run's folder now (artifacts recorded under it move with it)


@dataclass(frozen=True)
class Tile:
    """A verdict tile of the page's top row: key is pass | gaps | fail | none."""

    area: str
    key: str
    big: str
    detail: str


Summarize = Callable[[list[CaseResult], "Console"], dict[str, Any]]
# A suite whose planning finds more than its cases keeps it in the store (zoo's Hub sweeps: the ids behind each
# signature case): build_cases returns PlannedCases whose record(store, run_id) runs once the run row exists;
# summarize_stored(store, run_id, results, console) is then called instead of summarize, and may read it back.
RecordPlan = Callable[[Store, str], None]
SummarizeStored = Callable[[Store, str, list[CaseResult], "Console"], dict[str, Any]]
Section = Callable[[Sequence[CaseResult], Page], "str | None"]
# (row label, what this run shows: a short text) for `bringup compare`'s backend scorecard
Scorecard = Callable[[Sequence[CaseResult]], "list[tuple[str, str]]"]


class PlannedCases(list[Case]):
    """What build_cases returns when planning found more than the cases (see RecordPlan): the cases, and
    record(store, run_id), called once the run row exists. Planning changes no option to carry it."""

    def __init__(self, cases: Sequence[Case], record: RecordPlan | None = None) -> None:
        super().__init__(cases)
        self.record = record


def _no_options(p: argparse.ArgumentParser) -> None:
    return None


def _no_cases(options: Any, device: Device) -> list[Case]:
    return []


def _no_summary(results: list[CaseResult], console: Console) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Suite:
    """One capability's contract.

    name / help: the sub-command and its one line in `bringup --help` (`command=False`: no sub-command,
    e.g. the port scan, which only contributes a report section).
    add_arguments(parser): its options. options: their frozen dataclass (a bringup.options.CommandOptions, one
    field per dest; None: one is made from the parser's dests, untyped). build_cases(options, device) -> [Case]:
    validate (BadInput) and plan from the command's options (an instance of `options`); pure, no device work.
    run_cases(device, quick) -> [Case]: what `bringup run [--quick|--full]`
    includes (None: not part of `bringup run`). summarize(results, console) -> dict: print its terminal
    table, return its top-level JSON. order: run order and page order. title: its report heading.
    section(results, page) -> HTML body, None when there is nothing to show (no section renderer: a
    generic table of its metrics); escape everything. page_data(results, page): what it adds to the
    page's embedded JSON under its name (None: nothing).
    tile(results, page) -> Tile: its verdict tile (None: "n/m pass" from the statuses; `verdict_word`
    replaces "pass"). metrics: the catalogue entries it records (registered with the suite).
    scorecard(results) -> [(row, text)]: what this capability says about the backend, for `bringup
    compare`'s side-by-side scorecard of two runs (None: one row, "n/m pass").
    summarize_stored: reads planning data kept in the store beside the cases (see RecordPlan, PlannedCases).
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None] = _no_options
    # build_cases takes the suite's own `options` class (Any here: each suite's is its own CommandOptions subclass)
    build_cases: Callable[[Any, Device], list[Case]] = _no_cases
    run_cases: Callable[[Device, bool], list[Case]] | None = None
    summarize: Summarize = _no_summary
    order: float = 100.0
    title: str = ""
    section: Section | None = None
    tile: Callable[[Sequence[CaseResult], Page], Tile] | None = None
    page_data: Callable[[Sequence[CaseResult], Page], Any] | None = None
    verdict_word: str = "pass"
    metrics: tuple[MetricSpec, ...] = ()
    scorecard: Scorecard | None = None
    command: bool = True
    options: type[CommandOptions] | None = None
    summarize_stored: SummarizeStored | None = None
    module: str = field(default="", compare=False)

    def summarizer(self, store: Store | None = None, run_id: str | None = None) -> Summarize:
        """summarize(results, console) for this suite: summarize_stored bound to the run when it has one."""
        if self.summarize_stored is None or store is None or run_id is None:
            return self.summarize
        fn = self.summarize_stored
        return lambda results, console: fn(store, run_id, results, console)

    @property
    def heading(self) -> str:
        return self.title or self.name

    @classmethod
    def from_face(cls, face: ModuleType, **rest: Any) -> Suite:
        """The suite whose torch-free face is `face` (a capability's args.py: NAME, HELP, add_arguments,
        ORDER), with the rest of the contract in `rest`. The parser reads the face without importing the
        suite, the registry holds the suite: built from one module, they cannot say different things."""
        return cls(
            name=face.NAME,
            help=face.HELP,
            add_arguments=face.add_arguments,
            order=face.ORDER,
            options=getattr(face, "OPTIONS", None),
            **rest,
        )


# The registry (module state by design: registration is what importing a suite module does).
_SUITES: dict[str, Suite] = {}
_LOADED: list[bool] = []


def register_suite(suite: Suite) -> Suite:
    """Register `suite` (and its metrics). Registering a name twice from two modules is a ValueError;
    the same module registering again (a reload) replaces its entry."""
    if not suite.name or not suite.name.replace("-", "_").isidentifier():
        raise ValueError(f"suite name {suite.name!r} must be a word (letters, digits, - or _)")
    module = suite.module or sys._getframe(1).f_globals.get("__name__", "")
    old = _SUITES.get(suite.name)
    if old is not None and old.module != module:
        raise ValueError(f"suite {suite.name!r} is already registered by {old.module}")
    for m in suite.metrics:
        register_metric(m)
    if suite.module != module:
        suite = dataclasses.replace(suite, module=module)
    _SUITES[suite.name] = suite
    return suite


def register_capability(
    face: ModuleType,
    build_cases: Callable[[Any, Device], list[Case]] = _no_cases,
    run_cases: Callable[[Device, bool], list[Case]] | None = None,
    summarize: Summarize = _no_summary,
    **rest: Any,
) -> Suite:
    """A capability's suite.py registers itself in one call: `Suite.from_face(face, ...)` with its hooks
    (run_cases None: not part of `bringup run`) and the rest of the contract (title, section, metrics, ...),
    recorded as the calling module's suite."""
    module = sys._getframe(1).f_globals.get("__name__", "")
    hooks = {"build_cases": build_cases, "run_cases": run_cases, "summarize": summarize}
    return register_suite(Suite.from_face(face, module=module, **hooks, **rest))


def unregister_suite(name: str) -> None:
    """Take suite `name` out of the registry (a plugin unloading; tests). Its metrics stay catalogued."""
    _SUITES.pop(name, None)


def load_builtin() -> None:
    """Import the built-in suite modules (each registers itself); those absent from this checkout are
    skipped. Idempotent."""
    if _LOADED:
        return
    _LOADED.append(True)
    for mod in BUILTIN:
        if _found(mod):
            importlib.import_module(mod)


def missing_builtin() -> list[str]:
    """Built-in suites whose module is not in this checkout (by the capability's name)."""
    return [m.split(".")[1] for m in BUILTIN if not _found(m)]


def _faces() -> list[Any]:
    """The built-in capabilities' torch-free faces (args.py) present in this checkout, imported."""
    return [importlib.import_module(m) for m in BUILTIN_ARGS if _found(m)]


def _found(module: str) -> bool:
    """Whether `module` is in this checkout (its package may be missing too: a partial checkout)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def suites() -> list[Suite]:
    """Every registered suite (the built-in ones and those of imported plugins), in `order`."""
    load_builtin()
    return sorted(_SUITES.values(), key=lambda s: (s.order, s.name))


@dataclass(frozen=True)
class Command:
    """A suite's sub-command as the parser needs it: no planning, no running (see `commands()`)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    order: float
    options: type[CommandOptions] | None = None


def commands() -> list[Command]:
    """The suites' sub-commands, in `order`, without importing a built-in suite: the built-in ones from
    their torch-free faces (BUILTIN_ARGS), plus every suite registered so far (a plugin's, imported with
    --import) that offers a command."""
    out: dict[str, Command] = {}
    for m in _faces():
        if hasattr(m, "NAME") and _found(m.__name__.rsplit(".", 1)[0] + ".suite"):  # a face without its suite
            out[m.NAME] = Command(
                m.NAME,
                m.HELP,
                m.add_arguments,
                m.ORDER,  # (a partial checkout) offers nothing
                getattr(m, "OPTIONS", None),
            )
    for s in _SUITES.values():
        if s.command:
            out.setdefault(s.name, Command(s.name, s.help, s.add_arguments, s.order, s.options))
    return sorted(out.values(), key=lambda c: (c.order, c.name))


def get_suite(name: str) -> Suite | None:
    load_builtin()
    return _SUITES.get(name)


# ---- commands that are not suites -----------------------------------------------------------------
@dataclass(frozen=True)
class Tool:
    """A capability's command that is not a suite (it plans no cases through the registry): `module` has
    add_arguments(parser) (torch-free: the parser imports it), OPTIONS (their frozen CommandOptions dataclass;
    absent: one is made from the parser's dests) and main(session) -> exit code (its options:
    `session.options.of(OPTIONS)`).
    device=False: the command never touches a device (no --device, no plugin import for one)."""

    name: str
    module: str
    help: str
    device: bool = True


_TOOLS: dict[str, Tool] = {}


def register_tool(tool: Tool) -> Tool:
    """Offer `tool` as a sub-command (a plugin's, imported with --import before the parser is built)."""
    if not tool.name or not tool.name.replace("-", "_").isidentifier():
        raise ValueError(f"command name {tool.name!r} must be a word (letters, digits, - or _)")
    _TOOLS[tool.name] = tool
    return tool


def tools() -> list[Tool]:
    """The built-in tools present in this checkout (each capability's args.TOOLS), then plugins'."""
    out = {t.name: t for m in _faces() for t in getattr(m, "TOOLS", ()) if _found(t.module)}
    for t in _TOOLS.values():
        out.setdefault(t.name, t)
    return list(out.values())


# ---- a capability's extra options on `bringup run` ------------------------------------------------
@dataclass
class RunPart:
    """What a capability's run options make of a `bringup run`: the run's cases (rewritten or as they
    were), top-level keys it adds to the run's info and summary.json (`info`), a line or table printed
    after the suites' own (`summarize(console)`)."""

    cases: list[Case]
    info: dict[str, Any] = field(default_factory=dict)
    summarize: Callable[[Console], None] | None = None


@dataclass(frozen=True)
class RunOptions:
    """A capability's options on `bringup run` (train's --save-cache-artifact, port's --port).

    name: the capability (`--skip NAME` / `--only` leave its options out as they leave its cases out).
    add_arguments(parser): the options, torch-free (the parser is built without torch). options: their frozen
    dataclass (None: one made from the parser's dests); the run's Options hold it under `name` (`parts`).
    apply(options, device, cases, picked) -> RunPart | None: after planning, before any work: validate
    (BadInput), rewrite the cases, contribute; None: its options were not given (or, with `picked` False:
    --skip / --only left the capability out of this run). `options`: the run's bringup.options.Options."""

    name: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    apply: Callable[[Options, Device, list[Case], bool], RunPart | None]
    module: str = field(default="", compare=False)
    options: type[CommandOptions] | None = None


# Modules that register RunOptions: imported when `bringup run`'s parser is built, so torch-free.
_RUN_OPTIONS: dict[str, RunOptions] = {}


def register_run_options(opts: RunOptions) -> RunOptions:
    module = opts.module or sys._getframe(1).f_globals.get("__name__", "")
    if opts.module != module:
        opts = dataclasses.replace(opts, module=module)
    _RUN_OPTIONS[f"{module}:{opts.name}"] = opts
    return opts


def run_options() -> list[RunOptions]:
    """Every registered capability's run options (the built-in ones first)."""
    for mod in BUILTIN_RUN_OPTIONS:
        if _found(mod):
            importlib.import_module(mod)
    return list(_RUN_OPTIONS.values())


# ---- post-run steps ---------------------------------------------------------------------------------
class AddOptions(Protocol):
    """A post-run step's add_options(parser, suppress): `suppress` hides its defaults (the face passes it by name)."""

    def __call__(self, parser: argparse.ArgumentParser, /, suppress: bool) -> None: ...


@dataclass(frozen=True)
class AfterRun:
    """What a post-run step sees once the run's own cases are done and stored."""

    options: Options
    store: Store  # the open store
    run: RunInfo
    cases: Sequence[Case]
    results: Sequence[CaseResult]  # the run's own results (not what steps added)
    run_dir: Path
    console: Console
    new_executor: Callable[[], Any]  # a fresh executor like the run's: run more cases with bringup.runner.execute


class CaseMarks(Protocol):
    """What a step's judgement (the expectations gate's) tells --junit and --csv about each case: the report
    writes them through this and never imports the step."""

    def label(self, case_id: str) -> str:
        """The CSV's `expectation` cell of the case: its class ("" when the judgement says nothing)."""
        ...

    def junit(self, case_id: str, kind: str) -> tuple[str, str | None]:
        """The case's JUnit kind ("" passed, skipped, failure or error) given `kind`, the one its status
        alone gives, and a note for the testcase (None: none)."""
        ...


@dataclass
class Finished:
    """What a step's finish returns: top-level keys for summary.json (`extras`); an exit code that
    replaces the run's (`exit_code`, the expectations gate); what --junit / --csv classify cases by
    (`judgement`, the gate's)."""

    extras: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None
    judgement: CaseMarks | None = None


class Step:
    """A post-run step prepared for one run. Steps nest: `run` in PostRun order (after the run's cases:
    more work, e.g. localize cases, added to the run), then the suites print their summaries, then
    `finish` in reverse order (print, return extras / an exit code), so the first step has the last word."""

    def run(self, ctx: AfterRun) -> list[CaseResult]:
        """More work once the run's cases are done; returns the results it added to the run."""
        return []

    def finish(self, ctx: AfterRun, added: Sequence[CaseResult]) -> Finished:
        """After the suites' summaries (`added`: what this step's `run` returned)."""
        return Finished()


@dataclass(frozen=True)
class PostRun:
    """A step after every run of cases (a suite command, `bringup run`, a resumed run): the expectations
    gate (--expect), localize (--localize), a plugin's.

    add_options(parser, suppress): its options, global and after every run command (torch-free;
    `suppress`: argparse.SUPPRESS defaults, for the copy after the sub-command).
    options: the frozen dataclass of its options (None: one made from the dests add_options adds); the run's
    Options hold it under `name` (`options.parts[name]`).
    prepare(options, device) -> Step | None: before any work (`options`: the run's bringup.options.Options; a
    bad option: BadInput, exit 2, nothing stored); None: not asked for in this run.
    order: steps run in order and finish in reverse.
    info_key / section: the block a step stores in the run's info under `info_key` (the gate's
    "expectations") and section(block) -> its HTML section on the run's page (after the verdict tiles;
    escape everything): the report renders it through the registry, never importing the step."""

    name: str
    add_options: AddOptions
    prepare: Callable[[Options, Device], Step | None]
    order: float = 100.0
    module: str = field(default="", compare=False)
    info_key: str = ""
    section: Callable[[Mapping[str, Any]], str] | None = None
    options: type[CommandOptions] | None = None


_POST_RUN: dict[str, PostRun] = {}


def register_post_run(step: PostRun) -> PostRun:
    """Register a post-run step; registering a name twice from two modules is a ValueError."""
    if not step.name or not step.name.replace("-", "_").isidentifier():
        raise ValueError(f"post-run step name {step.name!r} must be a word (letters, digits, - or _)")
    module = step.module or sys._getframe(1).f_globals.get("__name__", "")
    old = _POST_RUN.get(step.name)
    if old is not None and old.module != module:
        raise ValueError(f"post-run step {step.name!r} is already registered by {old.module}")
    if step.module != module:
        step = dataclasses.replace(step, module=module)
    _POST_RUN[step.name] = step
    return step


def unregister_post_run(name: str) -> None:
    _POST_RUN.pop(name, None)


def post_runs() -> list[PostRun]:
    """Every registered post-run step (the built-in ones and plugins'), in `order`."""
    for mod in BUILTIN_POST_RUN:
        if _found(mod):
            importlib.import_module(mod)
    return sorted(_POST_RUN.values(), key=lambda s: (s.order, s.name))
