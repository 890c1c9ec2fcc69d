"""`bringup` command line. Global options go before the sub-command: `bringup --device cpu zoo ...`;
--device, --workers, --allow-unsupported, the output options and the post-run steps' options
(`bringup.api.PostRun`: --expect ..., --localize) are taken after it too (`bringup smoke --device cpu`).

Every error a user can cause ends in one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

from bringup import __version__
from bringup.api import commands, get_suite, post_runs, run_options, tools
from bringup.compat import quiet_import_noise
from bringup.errors import BadInput
from bringup.options import (
    CommandOptions,
    GlobalOptions,
    NoOptions,
    Options,
    add_options,
    is_refused,
    measured,
)
from bringup.store import DEFAULT_DB, Store

if TYPE_CHECKING:  # types only: flow imports torch
    from bringup.flow import Session

# The face's commands that are not suites: name -> (module, help). Each module has add_arguments(p), OPTIONS (its
# frozen options dataclass) and main(sess) -> int. A capability's commands that are not suites come from the registry
# (`bringup.api.tools()`), its suites' from `bringup.api.commands()`. Modules not present in this
# checkout are simply not offered.
COMMANDS: dict[str, tuple[str, str]] = {
    "devices": ("bringup.devices_cli", "torch version, devices, peak FLOPs, compile backends, plugins"),
    "run": ("bringup.orchestrate", "the main job: every suite on the device, one scorecard"),
    "report": ("bringup.report.cli", "write the self-contained HTML scorecard of a run"),
    "export": ("bringup.report.export_cli", "export a run as a portable JSON bundle"),
    "compare": ("bringup.report.compare", "compare two runs or bundles; exit 1 on regressions"),
    "expect": ("bringup.expect.cli", "expectations files: write one from a run, check a stored run against one"),
}
# Commands that never touch a device: no plugin import needed for device resolution (and tools with device=False).
_NO_DEVICE = {"report", "export", "compare", "expect"}


def _commands() -> dict[str, tuple[str, str]]:
    """The face's commands, then the registry's tools: name -> (module, help)."""
    return {**COMMANDS, **{t.name: (t.module, t.help) for t in tools() if t.name not in COMMANDS}}


def _no_device() -> set[str]:
    return _NO_DEVICE | {t.name for t in tools() if not t.device}


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"bringup: error: {message}", file=sys.stderr)
        sys.exit(2)


def _global_options(p: argparse.ArgumentParser, after: bool) -> None:
    """The global options (GlobalOptions' fields), then the post-run steps' (--expect ..., --localize, a plugin's).
    `after`: a sub-command's parser, which takes --device, --workers, --allow-unsupported, --fallback and the
    outputs (and the steps' options) too, their defaults suppressed: one given before the command stands, and
    one given after it wins (`bringup smoke --device cpu`, the common first try)."""
    add_options(p, GlobalOptions, after=after)
    for step in post_runs():
        step.add_options(p, after)


def build_parser() -> Parser:
    """The parser: global options, the non-suite commands, and one sub-command per suite
    (`bringup.api.commands()`: the built-in ones and those of plugins imported before this is called).

    Builds without importing torch (the suites' torch-free faces, the commands' modules import it
    where work starts): `--help`, every `COMMAND --help` and an argument error answer at once
    (tests/spine/test_cli_imports.py)."""
    p = Parser(prog="bringup", description="Does a real training stack run on this PyTorch device, and how fast?")
    p.add_argument("--version", action="version", version=f"bringup {__version__}")
    _global_options(p, after=False)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    named, no_device = _commands(), _no_device()
    for name, (mod, help_) in named.items():
        if importlib.util.find_spec(mod) is None:
            continue
        sp = sub.add_parser(name, help=help_, description=help_)
        importlib.import_module(mod).add_arguments(sp)
        if name not in no_device:
            _global_options(sp, after=True)
    for c in commands():
        if c.name in named:
            continue
        sp = sub.add_parser(c.name, help=c.help, description=c.help)
        c.add_arguments(sp)
        _global_options(sp, after=True)
    return p


def _early_imports(argv: list[str]) -> list[str]:
    """The --import modules, read before the parser is built so that a plugin's suite is a sub-command."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--import", dest="imports", action="append", default=[])
    known, _ = pre.parse_known_args(argv)
    return list(known.imports)


def _import_plugins(mods: list[str]) -> None:
    for m in mods:
        try:
            importlib.import_module(m)
        except BaseException as e:
            raise BadInput(f"--import {m}: {type(e).__name__}: {e}".splitlines()[0]) from None


def main(argv: list[str] | None = None) -> int:
    quiet_import_noise()
    fork = argv is None  # the command-line program, not a library call inside someone's process
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv, fork)
    except BadInput as e:
        print(f"bringup: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bringup: interrupted", file=sys.stderr)
        return 130


def _prefork(fork: bool) -> None:
    """Fork the workers' launcher while this process is still pristine: torch imported, no plugin, no device
    (bringup.runner.launcher: each worker then skips the ~3 s torch import)."""
    if fork:
        from bringup.runner.launcher import prefork  # lazy: torch-free --help

        prefork()


def _main(argv: list[str], fork: bool = False) -> int:
    early = _early_imports(argv)
    if early:  # a plugin imports torch and may touch its device: the launcher must come first
        _prefork(fork)
    _import_plugins(early)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.ray_address and args.executor != "ray":
        raise BadInput("--ray-address needs --executor ray")
    db = Path(args.db or os.environ.get("BRINGUP_DB", DEFAULT_DB))  # flow.default_db(), without torch
    resume_run = None
    imports = list(args.imports)
    if args.resume:
        if not db.exists():
            raise BadInput(f"--resume {args.resume}: no result database at {db}")
        with Store(db, create=False) as st:
            resume_run = st.get_run(args.resume)
        imports = imports or list(resume_run.info.get("imports", []))
        if (
            args.command is not None
            and args.command != resume_run.command
            and args.command not in _commands().keys() - {"run"}
        ):
            raise BadInput(
                f"--resume {args.resume}: that run is a {resume_run.command!r} run, not "
                f"{args.command!r}; use `bringup --resume {args.resume}` alone"
            )
        args = resumed_options(parser, argv, args, resume_run.info.get("options") or {})
        if args.command is None:
            args.command = "_resume"
    if args.command is None:
        parser.print_help()
        return 2
    opts = build_options(args)  # the one place a Namespace becomes options: nothing below sees it
    if args.command not in _no_device():
        _prefork(fork)
    _import_plugins(imports)
    from bringup.flow import Session  # imports torch: only once the arguments parse and a command runs

    if args.command in _no_device():
        from bringup.device import Device  # lazy: torch-free --help

        device = Device("cpu")
    else:
        from bringup.device import resolve_device  # lazy: torch-free --help

        spec = args.device or (resume_run.device if resume_run is not None else "auto")
        device = resolve_device(spec)
        opts.command.check_device(device)  # what the options ask of this device: before the run starts
    sess = Session(options=opts, device=device, imports=imports, db=db, argv=argv, resume_run=resume_run)
    if args.command == "_resume":
        return _resume_planned(sess)
    named = _commands()
    if args.command in named:
        return int(importlib.import_module(named[args.command][0]).main(sess))
    return run_suite(sess, args.command)


def command_options(command: str | None) -> type[CommandOptions] | None:
    """The options dataclass of `command` (None: it declares none)."""
    if command is None or command == "_resume":
        return NoOptions
    named = _commands()
    if command in named:
        return getattr(importlib.import_module(named[command][0]), "OPTIONS", None)
    return next((c.options for c in commands() if c.name == command), None)


def build_options(args: argparse.Namespace) -> Options:
    """The command line, typed and frozen (bringup.options.Options): the command's own options first (a dest it
    shares with a global option, e.g. bisect's --repeat, is the command's: its sub-parser set it), then the global
    options, each post-run step's and (on `bringup run`) each run option's, each taking its dests from `args`. The
    command's options are checked here (CommandOptions.checked: BadInput, one line, exit 2): planning only plans. A
    dest no class takes is a programming error (a TypeError naming it); a plugin's command, step or run option
    that declares no class gets one made from its parser's dests (the command's: what is left)."""
    values = dict(vars(args))
    declared = command_options(args.command)
    command = declared.take(values) if declared is not None else None
    common = GlobalOptions.take(values)
    parts: dict[str, CommandOptions] = {}
    for step in post_runs():
        parts[step.name] = _declared(step.name, step.options, partial(step.add_options, suppress=False)).take(values)
    if common.command == "run":
        for o in run_options():
            parts[o.name] = _declared(o.name, o.options, o.add_arguments).take(values)
    if command is None:
        command = options_class(f"{common.command}_options", list(values)).take(values)
    if values:
        raise TypeError(
            f"{common.command}: option(s) {', '.join(sorted(values))} have no field in {type(command).__name__}"
        )
    return Options(common, command.checked(), MappingProxyType(parts))


def _declared(name: str, cls: type[CommandOptions] | None, add: Any) -> type[CommandOptions]:
    return cls or options_class(f"{name}_options", parser_dests(add))


def options_class(name: str, dests: Sequence[str]) -> type[CommandOptions]:
    """A frozen options dataclass with untyped `dests` (default None): the options of a plugin's command, step or
    run option that declares no class of its own."""
    why = "a plugin's option that declares no class: assumed to change what is measured"
    return dataclasses.make_dataclass(
        name, [(d, Any, measured(None, why)) for d in dests], bases=(CommandOptions,), frozen=True
    )


def parser_dests(add: Any) -> list[str]:
    """The dests `add(parser)` adds (refused old spellings and help left out), in order; sub-commands' too."""
    p = argparse.ArgumentParser(add_help=False)
    add(p)
    return _dests(p)


def _dests(p: argparse.ArgumentParser) -> list[str]:
    out: list[str] = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            out.append(a.dest)
            for sp in dict.fromkeys(a.choices.values()):
                out += _dests(sp)
        elif (
            a.dest != argparse.SUPPRESS
            and not is_refused(a)
            and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
        ):
            out.append(a.dest)
    return list(dict.fromkeys(out))


def parse_options(argv: list[str]) -> Options:
    """`argv` parsed and typed as `bringup` does (no --resume, no plugin import): for tests and tools."""
    return build_options(build_parser().parse_args(argv))


# Options a resume never takes from the run it continues: how this command found the run, and which command it is.
_NOT_RESUMED = frozenset({"command", "resume", "db", "imports"})


def given_options(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The options `argv` names itself: parsed again with every default suppressed (sub-commands' too), so
    that what is left is what the user typed (a flag given with its default value included)."""
    saved: list[tuple[argparse.Action, Any]] = []

    def suppress(p: argparse.ArgumentParser) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sp in dict.fromkeys(a.choices.values()):
                    suppress(sp)
            elif not a.required:
                saved.append((a, a.default))
                a.default = argparse.SUPPRESS
        saved.append((p, dict(p._defaults)))  # type: ignore[arg-type]  # a parser's defaults ride in the actions' list
        p._defaults.clear()

    suppress(parser)
    try:
        return parser.parse_args(argv)
    finally:
        for obj, default in saved:
            if isinstance(obj, argparse.Action):
                obj.default = default
            else:
                obj._defaults.update(default)


def resumed_options(
    parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace, stored: dict[str, Any]
) -> argparse.Namespace:
    """A resume runs with the run's own options (its --workers, --max-rss-gb, --executor, outputs, post-run
    steps, the command's own), stored with the run (`info["options"]`, bringup/flow.py); only what the
    resume command names itself overrides them. Options a newer bringup added keep their defaults; stored
    ones it no longer knows are left out."""
    given = vars(given_options(parser, argv))
    merged = dict(vars(args))
    for k, v in stored.items():
        if k in merged and k not in _NOT_RESUMED and k not in given:
            merged[k] = v
    return argparse.Namespace(**merged)


def run_suite(sess: Session, name: str) -> int:
    from bringup.flow import execute_cases  # lazy: torch-free --help

    suite = get_suite(name)
    if suite is None:
        raise BadInput(f"unknown suite {name!r}")
    cases = suite.build_cases(sess.options, sess.device)
    if not cases:
        raise BadInput(f"{name}: nothing to run with these options")
    record = getattr(cases, "record", None)  # bringup.api.PlannedCases: what planning found beside the cases
    summarize = lambda rs, console: suite.summarizer(sess.store, sess.run_id)(rs, console)
    return execute_cases(sess, name, cases, summarize, record=record)


def _resume_planned(sess: Session) -> int:
    """`bringup --resume RUN_ID` alone: the run's planned cases that have no result yet."""
    from bringup.flow import execute_cases, summarize_by_suite  # lazy: torch-free --help

    assert sess.resume_run is not None  # main() calls this for `--resume RUN_ID` alone
    command = sess.resume_run.command
    tool = _commands().get(command)
    if tool is not None and hasattr(module := importlib.import_module(tool[0]), "resume"):
        return int(module.resume(sess))  # a tool that plans its own rounds (bisect) continues from its stored plan
    with sess.open_store() as st:
        pending = st.pending(sess.resume_run.run_id)
    sess.console.print(f"resuming {sess.resume_run.run_id} ({command}): {len(pending)} unfinished case(s)")
    if command == "run":
        from bringup import orchestrate  # lazy: fast --help

        return execute_cases(sess, command, pending, summarize_by_suite, orchestrate.finish)
    suite = get_suite(command)
    if suite is not None and suite.command:
        summarize = lambda rs, console: suite.summarizer(sess.store, sess.run_id)(rs, console)
    else:
        summarize = lambda rs, console: summarize_by_suite(rs, console, sess.store, sess.run_id)
    return execute_cases(sess, command, pending, summarize)


if __name__ == "__main__":
    sys.exit(main())
