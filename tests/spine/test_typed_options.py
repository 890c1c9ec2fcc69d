"""One frozen, typed options dataclass per command (issue 46 item 1): the face (bringup/cli.py) builds them once
from argv; nothing below it sees argparse's Namespace or changes an option.

- no function in bringup/ but the face's has a parameter or a return annotated `argparse.Namespace` (argparse's
  own Action callbacks, which argparse calls while parsing, aside);
- every command's dataclass is frozen and its fields are the dests its parser gives (those it leaves to the global
  options aside: `compare --json` is the global --json's dest), and so are each post-run step's and run option's;
- every command line builds (`build_options`) and stores the same option keys the Namespace had.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
from functools import partial
from pathlib import Path

import pytest

from bringup import api
from bringup.cli import _commands, build_options, build_parser, command_options, parse_options, parser_dests
from bringup.options import CommandOptions, GlobalOptions, Options

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "bringup"

# The least each command needs to parse (its required arguments).
ARGV: dict[str, list[str]] = {
    "compare": ["compare", "a", "b"],
    "port": ["port", "x.py"],
    "localize": ["localize", "gpt2"],
    "expect": ["expect", "import", "x.csv", "--out", "x.yaml"],
    "hub": ["hub", "plan", "--source", "hub-list:x"],
    "export": ["export", "--out", "x.json"],
}
# Commands whose actions are sub-commands with dests of their own (none of them stores a run).
SUB_ACTIONS = ("expect", "hub")


def _namespace_annotated(node: ast.expr | None) -> bool:
    return node is not None and "Namespace" in ast.unparse(node)


def _argparse_callbacks(tree: ast.Module) -> set[int]:
    """ids of the methods of argparse.Action subclasses (argparse calls them with its Namespace while parsing)."""
    out: set[int] = set()
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and any("Action" in ast.unparse(b) for b in cls.bases):
            out |= {id(f) for f in cls.body if isinstance(f, ast.FunctionDef)}
    return out


def test_no_namespace_below_the_face() -> None:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "bringup/cli.py":
            continue
        tree = ast.parse(path.read_text())
        callbacks = _argparse_callbacks(tree)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or id(fn) in callbacks:
                continue
            a = fn.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
            if any(_namespace_annotated(p.annotation) for p in params) or _namespace_annotated(fn.returns):
                found.append(f"{rel}:{fn.lineno} {fn.name}")
        for node in ast.walk(tree):  # a dataclass field or a variable typed as one
            if isinstance(node, ast.AnnAssign) and _namespace_annotated(node.annotation):
                found.append(f"{rel}:{node.lineno}")
    assert not found, found


def _adders() -> dict[str, object]:
    """Every command's add_arguments: the face's and the tools' modules, the suites' faces."""
    out: dict[str, object] = {n: importlib.import_module(mod).add_arguments for n, (mod, _) in _commands().items()}
    for c in api.commands():
        out.setdefault(c.name, c.add_arguments)
    return out


def _frozen(cls: type) -> None:
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
    assert issubclass(cls, CommandOptions), cls


@pytest.mark.parametrize("name", sorted(_adders()))
def test_each_command_has_its_frozen_dataclass_of_its_dests(name: str) -> None:
    cls = command_options(name)
    assert cls is not None, f"{name}: no options dataclass (OPTIONS in its module, or its face's)"
    _frozen(cls)
    own = set(parser_dests(_adders()[name]))
    if name == "run":  # the capabilities' run options are theirs (Options.parts)
        own -= {d for o in api.run_options() for d in parser_dests(o.add_arguments)}
    fields = set(cls.dests())
    assert fields <= own, f"{name}: fields the parser does not give: {sorted(fields - own)}"
    assert own - fields <= set(GlobalOptions.dests()), f"{name}: dests without a field: {sorted(own - fields)}"


def test_post_run_steps_and_run_options_have_theirs() -> None:
    for step in api.post_runs():
        assert step.options is not None, step.name
        _frozen(step.options)
        assert set(step.options.dests()) == set(parser_dests(partial(step.add_options, suppress=False))), step.name
    for o in api.run_options():
        assert o.options is not None, o.name
        _frozen(o.options)
        assert set(o.options.dests()) == set(parser_dests(o.add_arguments)), o.name


@pytest.mark.parametrize("name", sorted(_adders()))
def test_every_command_line_builds_and_stores_the_namespace_keys(name: str) -> None:
    argv = ARGV.get(name, [name])
    ns = build_parser().parse_args(argv)
    opts = build_options(ns)
    assert isinstance(opts.command, command_options(name))  # type: ignore[arg-type]
    stored, given = opts.as_dict(), {k: list(v) if isinstance(v, tuple) else v for k, v in vars(ns).items()}
    if name in SUB_ACTIONS:  # one dataclass for every action: the other actions' fields at their defaults
        defaults = {f.name: f.default for f in dataclasses.fields(opts.command)}
        assert {k: v for k, v in stored.items() if k not in given} == {k: defaults[k] for k in stored.keys() - given}
        stored = {k: v for k, v in stored.items() if k in given}
    assert stored == given


def test_options_are_frozen() -> None:
    opts = parse_options(["zoo", "--steps", "3"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.command.steps = 4  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.common.workers = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.command = opts.common  # type: ignore[misc]
    with pytest.raises(TypeError):
        opts.parts["expect"] = opts.common  # type: ignore[index]


def test_zoo_planning_resolves_a_copy() -> None:
    """--size full's defaults (--steps, --case-budget, --batch, --seq) are resolved into a copy, never written back."""
    from bringup.zoo.args import FULL_BATCH, FULL_SEQ, FULL_STEPS, FULL_TIMEOUT, ZooOptions
    from bringup.zoo.plan import resolved

    given = parse_options(["zoo", "--size", "full", "--source", "hub-top"]).of(ZooOptions)
    got = resolved(given)
    assert (got.steps, got.case_budget, got.batch, got.seq) == (FULL_STEPS, FULL_TIMEOUT, FULL_BATCH, FULL_SEQ)
    assert (given.steps, given.case_budget, given.batch, given.seq) == (None, None, None, None)


def test_a_plugin_without_a_class_gets_one_from_its_dests() -> None:
    def add(p: object) -> None:
        p.add_argument("--widgets", default="all")  # type: ignore[attr-defined]

    api.register_suite(api.Suite(name="widgets_t", help="a test suite", add_arguments=add))
    try:
        opts = parse_options(["widgets_t", "--widgets", "a,b"])
        assert opts.command.widgets == "a,b"  # type: ignore[attr-defined]
        assert isinstance(opts, Options) and dataclasses.is_dataclass(opts.command)
        with pytest.raises(dataclasses.FrozenInstanceError):
            opts.command.widgets = "c"  # type: ignore[attr-defined]
    finally:
        api.unregister_suite("widgets_t")


def test_a_field_carries_its_flag_and_check() -> None:
    """Shown failing: a field's spelling builds its argument (dest, default, type, group), and its check and the
    class's `check` refuse bad input when the options are built (CommandOptions.checked), not when they are used."""
    import argparse
    from dataclasses import dataclass

    from bringup.errors import BadInput
    from bringup.options import CommandOptions, add_options, flag, measured, not_measured, positive_int

    def even(n: int) -> None:
        if n % 2:
            raise BadInput(f"--n must be even, got {n}")

    @dataclass(frozen=True)
    class Demo(CommandOptions):
        n: int = measured(2, flag=flag("--n", type=positive_int, help="an even count"), check=even)
        tags: tuple[str, ...] = not_measured((), flag=flag("--tag", action="append", group="Tags", help="a tag"))
        quiet: bool = not_measured(False)  # no spelling: not on the command line

        def check(self) -> None:
            if self.n > 4 and not self.tags:
                raise BadInput("--n above 4 needs a --tag")

    p = argparse.ArgumentParser()
    add_options(p, Demo)
    assert [a.dest for a in p._actions if a.dest != "help"] == ["n", "tags"]
    assert [g.title for g in p._action_groups][-1] == "Tags"
    got = Demo.take(vars(p.parse_args(["--n", "6", "--tag", "a", "--tag", "b"]))).checked()
    assert got == Demo(6, ("a", "b")) and Demo.take(vars(p.parse_args([]))) == Demo()
    with pytest.raises(BadInput, match="must be even"):
        Demo.take(vars(p.parse_args(["--n", "3"]))).checked()
    with pytest.raises(BadInput, match="needs a --tag"):
        Demo.take(vars(p.parse_args(["--n", "6"]))).checked()


def test_zoo_options_are_checked_where_built() -> None:
    """Bad zoo input is refused by parse_options (the face), before planning reads a source."""
    from bringup.cli import parse_options
    from bringup.errors import BadInput

    for argv, needle in (
        (["zoo", "--full-top", "2"], "--full-top needs"),
        (["zoo", "--source", "hub-search:x", "--hub-rate", "9"], "--hub-rate"),
        (["zoo", "--batch", "99"], "--batch must be 1..16"),
        (["zoo", "--size", "full", "--reference", "baseline"], "--reference baseline needs --baseline"),
        (["hub", "plan", "--source", "hf-causal"], "use hub-search:QUERY or hub-list:FILE"),
    ):
        with pytest.raises(BadInput, match=needle):
            parse_options(argv)


# Commands whose options are written once (every field its spelling: the parser built from the fields; hub and
# the global options: tests below). The rest (compare, expect, port) still call add_argument.
WRITTEN_ONCE = (
    "zoo", "train", "bisect", "smoke", "probe", "ops", "flex", "selftest", "localize", "profile", "triage",
    "devices", "report", "export", "run",
)  # fmt: skip


@pytest.mark.parametrize("command", WRITTEN_ONCE)
def test_each_option_is_written_once(command: str) -> None:
    """Every field of the command's options carries its spelling, and its parser is exactly those fields'."""
    from bringup.cli import build_parser, command_options, parser_dests
    from bringup.options import FLAG

    cls = command_options(command)
    assert cls is not None
    missing = [f.name for f in dataclasses.fields(cls) if FLAG not in f.metadata]
    assert not missing, f"{command}: fields without a flag: {missing}"
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    own = [d for d in parser_dests(lambda p: _add_from(p, cls)) if d in cls.dests()]
    assert own == [d for d in cls.dests()], command
    assert set(cls.dests()) <= {a.dest for a in sub._actions}


def _add_from(p: argparse.ArgumentParser, cls: type) -> None:
    from bringup.options import add_options

    add_options(p, cls)


def _sub(p: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))


def test_the_global_options_are_written_once() -> None:
    """Every global option but the sub-command's name carries its spelling; the global parser takes them all, in
    field order (then the post-run steps'), and each device command takes those spelled `after`, defaults
    suppressed (one given before the command stands)."""
    from bringup.options import FLAG

    fields = [f for f in dataclasses.fields(GlobalOptions) if f.name != "command"]
    assert all(FLAG in f.metadata for f in fields), [f.name for f in fields if FLAG not in f.metadata]
    steps = {d for s in api.post_runs() for d in parser_dests(partial(s.add_options, suppress=False))}
    p = build_parser()
    top = [a.dest for a in p._actions if a.dest not in steps and a.dest not in ("help", "version", "command")]
    assert top == [f.name for f in fields]
    after = [f.name for f in fields if f.metadata[FLAG].after]
    assert after == ["device", "workers", "allow_unsupported", "fallback", "json", "junit", "csv"]
    smoke = _sub(p).choices["smoke"]
    taken = {a.dest: a.default for a in smoke._actions if a.dest in after}
    assert taken == dict.fromkeys(after, argparse.SUPPRESS)
    assert parse_options(["--device", "cpu", "--workers", "2", "smoke"]).common.device == "cpu"
    got = parse_options(["--device", "cpu", "smoke", "--device", "meta", "--json", "x.json"]).common
    assert (got.device, got.json, got.workers) == ("meta", "x.json", None)


def test_hub_options_are_written_once() -> None:
    """Every hub option but the action's name carries its spelling, and each action's parser takes exactly its
    fields (hub/cli.py ACTIONS); --source is required by fetch and plan only."""
    from bringup.hub.cli import ACTIONS, HubOptions
    from bringup.options import FLAG

    missing = [f.name for f in dataclasses.fields(HubOptions) if FLAG not in f.metadata and f.name != "hub_action"]
    assert not missing, missing
    actions = _sub(_sub(build_parser()).choices["hub"]).choices
    assert set(actions) == set(ACTIONS)
    for name, (_, fields) in ACTIONS.items():
        assert [a.dest for a in actions[name]._actions if a.dest != "help"] == list(fields), name
        source = [a for a in actions[name]._actions if a.dest == "source"]
        assert [a.required for a in source] == ([True] if name in ("fetch", "plan") else [False] if source else [])


def test_a_flag_names_its_exclusive_group_and_whether_it_is_taken_after_the_command() -> None:
    """Shown failing: two fields of one `exclusive` group refuse each other; `after=True` fields alone are added to
    a sub-command's parser, defaults suppressed, `after_help` their help there; `required` makes a field required."""
    from dataclasses import dataclass

    from bringup.options import CommandOptions, add_options, flag, not_measured

    @dataclass(frozen=True)
    class Demo(CommandOptions):
        fast: bool = not_measured(False, flag=flag("--fast", action="store_true", exclusive="speed"))
        slow: bool = not_measured(False, flag=flag("--slow", action="store_true", exclusive="speed"))
        where: str | None = not_measured(None, flag=flag("--where", help="before", after_help="after"))
        name: str | None = not_measured(None, flag=flag("--name"))

    p = argparse.ArgumentParser()
    add_options(p, Demo, required=("name",))
    assert Demo.take(vars(p.parse_args(["--fast", "--name", "a"]))) == Demo(fast=True, name="a")
    with pytest.raises(SystemExit):
        p.parse_args(["--fast", "--slow", "--name", "a"])  # not allowed with --fast
    with pytest.raises(SystemExit):
        p.parse_args(["--fast"])  # --name is required
    sub = argparse.ArgumentParser()
    add_options(sub, Demo, after=True)
    assert [(a.dest, a.default, a.help) for a in sub._actions if a.dest != "help"] == [
        ("where", argparse.SUPPRESS, "after")
    ]
    assert vars(sub.parse_args([])) == {}
