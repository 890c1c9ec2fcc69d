"""Every option says whether it changes what a run measures (issue 50, item 5): each field of every registered
command's options dataclass, of the global options, of each post-run step's and of each run option's is marked
`measured` or `not_measured` (bringup/options.py), so a new option cannot slip past unclassified; the run records
its measured options with the values in effect (Options.measured: info["measured"]); and every measured field, and
no other, reaches the key `report --history` draws a line by (bringup/report/history.py: StoredRun.key).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType

import pytest

from bringup import api
from bringup.cli import _commands, command_options, options_class, parse_options, parser_dests
from bringup.options import (
    MEASURED,
    WHY,
    CommandOptions,
    GlobalOptions,
    Options,
    is_measured,
    measured,
    not_measured,
)
from bringup.report.history import StoredRun
from tests.conftest import fake_run

CHANGED = "__changed__"  # a value no option has by default


def _classes() -> dict[str, type[CommandOptions]]:
    """Every options dataclass a command line builds: each command's (the face's, the tools', the suites'), the
    global options, each post-run step's and each run option's."""
    out: dict[str, type[CommandOptions]] = {"global": GlobalOptions}
    names = [*_commands(), *(c.name for c in api.commands())]
    for name in dict.fromkeys(names):
        cls = command_options(name)
        assert cls is not None, f"{name}: no options dataclass"
        out[f"command {name}"] = cls
    for step in api.post_runs():
        out[f"post-run step {step.name}"] = step.options or options_class(
            step.name, parser_dests(partial(step.add_options, suppress=False))
        )
    for o in api.run_options():
        out[f"run option {o.name}"] = o.options or options_class(o.name, parser_dests(o.add_arguments))
    return out


def unclassified(cls: type[CommandOptions]) -> list[str]:
    """The fields of `cls` that say neither measured nor not measured."""
    return [f.name for f in dataclasses.fields(cls) if not isinstance(f.metadata.get(MEASURED), bool)]


CLASSES = _classes()


def test_every_command_is_walked() -> None:
    names = {k.split(" ", 1)[1] for k in CLASSES if k.startswith("command ")}
    want = {"smoke", "probe", "train", "flex", "zoo", "ops", "profile", "selftest", "localize", "bisect", "run"}
    assert want | {"port", "hub", "report", "export", "compare", "expect", "devices"} <= names, names
    assert {"post-run step expect", "post-run step localize", "run option port", "run option train"} <= set(CLASSES)


@pytest.mark.parametrize("where", sorted(CLASSES))
def test_every_option_says_whether_it_changes_a_measurement(where: str) -> None:
    cls = CLASSES[where]
    assert not unclassified(cls), (
        f"{where} ({cls.__name__}): option(s) {unclassified(cls)} say neither measured(...) nor not_measured(...): "
        "mark each (bringup/options.py), so that report --history keys runs by it or knows it may not"
    )
    for f in dataclasses.fields(cls):
        assert "\n" not in str(f.metadata.get(WHY, "")), f"{where}.{f.name}: the reason is one line"


def test_the_walk_catches_an_unclassified_option() -> None:
    @dataclass(frozen=True)
    class NewOptions(CommandOptions):
        dtype: str = measured("fp32")
        workers: int = not_measured(1, "how many at once")
        new_flag: int = 3  # a new option, added plainly

    assert unclassified(NewOptions) == ["new_flag"]
    # and until it is classified, it counts as measured: a run is never merged with one that measured otherwise
    got = Options(command=NewOptions()).measured()
    assert got == {"command": None, "imports": [], "fallback": None, "dtype": "fp32", "new_flag": 3}
    assert is_measured(dataclasses.fields(NewOptions)[2])


def _options(where: str, cls: type[CommandOptions], value: CommandOptions | None = None) -> Options:
    """Options holding `value` (default: cls()) where `where` says it goes."""
    value = value if value is not None else cls()
    if where == "global":
        return Options(common=value)  # type: ignore[arg-type]
    if where.startswith("command "):
        return Options(command=value)
    return Options(parts=MappingProxyType({where.rsplit(" ", 1)[1]: value}))


def _key(opts: Options, command: str = "x") -> str:
    run = fake_run(command=command, info={"measured": opts.measured(), "options": opts.as_dict()})
    return StoredRun(1, "a.db", run, ()).key


@pytest.mark.parametrize("where", sorted(CLASSES))
def test_a_measured_option_changes_the_history_key_and_no_other_does(where: str) -> None:
    cls = CLASSES[where]
    base = _options(where, cls)
    for f in dataclasses.fields(cls):
        if f.name == "command" and where == "global":
            continue  # the command's name: the run's own command keys its line (StoredRun.measured)
        changed = _options(where, cls, dataclasses.replace(cls(), **{f.name: CHANGED}))
        if is_measured(f):
            assert changed.measured()[f.name] == CHANGED, f"{where}.{f.name}: measured, not in the run's record"
            assert _key(changed) != _key(base), f"{where}.{f.name}: measured, yet not in report --history's key"
        else:
            assert changed.measured() == base.measured(), f"{where}.{f.name}: not measured, yet in the record"
            assert _key(changed) == _key(base), f"{where}.{f.name}: not measured, yet it splits a history line"


def test_the_record_holds_defaults_in_effect() -> None:
    """A run that left --inputs at its default records 'text', so it is told apart from one that asked for uniform."""
    plain, uniform = parse_options(["zoo"]).measured(), parse_options(["zoo", "--inputs", "uniform"]).measured()
    assert plain["inputs"] == "text" and uniform["inputs"] == "uniform"
    assert plain["noise_seeds"] == 2 and plain["module_check"] == "auto" and plain["seed"] == 0
    assert plain["command"] == "zoo" and "workers" not in plain and "db" not in plain and "case_budget" not in plain
    # bisect's own --repeat (measured) is the command's, not the expectations gate's (a dest both have)
    assert parse_options(["bisect", "x.py", "--repeat", "3"]).measured()["repeat"] == 3
    # run: its suites' run options ride along (train's artifact to start from is measured; port's scan is not)
    run = parse_options(["run", "--quick", "--load-cache-artifact", "a.bin", "--port", "x.py"]).measured()
    assert run["quick"] is True and run["load_cache_artifact"] == "a.bin" and "port" not in run


def test_a_plugins_undeclared_options_count_as_measured() -> None:
    cls = options_class("plugin_options", ["knob"])
    (f,) = dataclasses.fields(cls)
    assert f.metadata[MEASURED] is True and is_measured(f)


# What issue 50 found history merging (each must be measured), and what must never split a line.
MUST_MEASURE = {
    "command zoo": [
        "inputs",
        "noise_seeds",
        "module_check",
        "reference",
        "baseline",
        "seed",
        "dtype",
        "compile_backend",
    ],
    "command ops": ["samples"],
    "command flex": ["backward"],
    "command probe": ["compile_backends"],
    "command train": ["dynamic", "seqs", "override"],
    "command run": ["quick", "full"],
    "global": ["imports", "fallback"],
}
NEVER_MEASURE = {
    "global": ["db", "workers", "json", "junit", "csv", "resume", "executor", "ray_address", "allow_unsupported"],
    "command run": ["out"],
    "command profile": ["out"],
    "command zoo": ["case_budget", "hub_workers"],
}


@pytest.mark.parametrize(("where", "want", "table"), [(w, True, MUST_MEASURE) for w in MUST_MEASURE] + [
    (w, False, NEVER_MEASURE) for w in NEVER_MEASURE])  # fmt: skip
def test_the_options_history_merged_or_split_wrongly(where: str, want: bool, table: dict[str, list[str]]) -> None:
    fields = {f.name: f for f in dataclasses.fields(CLASSES[where])}
    wrong = [name for name in table[where] if is_measured(fields[name]) is not want]
    assert not wrong, f"{where}: {wrong} should {'' if want else 'not '}be measured"
