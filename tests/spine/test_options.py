"""The options vocabulary (bringup/options.py): each option means the same in every command that takes it.

Over the real parser (`bringup.cli.build_parser()`, every sub-command and `hub`'s own): an option of the
vocabulary has one spelling, one dest type (its validator), one metavar and one help text wherever it
appears; no command spells one by hand; the commands that take each are the table below (a command takes
exactly the options that mean something to it: a new one is a deliberate change here); each old spelling
is hidden and lands in the same dest; and a bad value is one line on stderr and exit 2 in every command.
In-process and torch-free: nothing runs.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from bringup import options
from bringup.cli import build_parser
from tests.conftest import run_main

# option -> (its spelling, the commands that take it)
TABLE: dict[str, tuple[str, set[str]]] = {
    "case_budget": ("--case-budget", {"smoke", "probe", "train", "zoo", "ops", "profile", "selftest", "localize"}),
    "compile_budget": ("--compile-budget", {"train", "flex"}),
    "dtype": ("--dtype", {"smoke", "train", "flex", "zoo", "profile", "localize", "expect import", "expect export"}),
    "seed": ("--seed", {"zoo", "localize"}),
    "filter": ("--filter", {"probe", "zoo", "ops", "hub fetch", "hub plan", "hub export"}),
    "limit": ("--limit", {"zoo", "hub fetch", "hub plan", "hub export"}),
}
HELP = {
    "case_budget": options.CASE_BUDGET_HELP,
    "compile_budget": options.COMPILE_BUDGET_HELP,
    "dtype": options.DTYPE_HELP,
    "seed": options.SEED_HELP,
    "filter": options.FILTER_HELP.split("{what}")[0],
    "limit": options.LIMIT_HELP.split("{what}")[0],
}
BAD = {"case_budget": "0", "compile_budget": "-1", "dtype": "fp8", "seed": "-1", "filter": "(", "limit": "0"}
# the old spellings, per command: (flag, the vocabulary option it now is)
OLD = {
    ("ops", "--budget"): "case_budget",
    ("selftest", "--budget"): "case_budget",
    ("localize", "--budget"): "case_budget",
    ("zoo", "--timeout"): "case_budget",
    ("flex", "--budget"): "compile_budget",
    ("train", "--budget"): "compile_budget",
    ("probe", "--only"): "filter",
}
# what a command needs besides the option under test to parse
REQUIRED = {
    "localize": ["gpt2"],
    "expect import": ["x.csv", "--out", "x.yaml"],
    "expect export": ["--expect", "x.yaml", "--out", "x.csv"],
    "hub fetch": ["--source", "hub-list:x"],
    "hub plan": ["--source", "hub-list:x"],
}


def _parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    def subs(p: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                yield from a.choices.items()

    for name, sp in subs(build_parser()):
        yield name, sp
        for sub, ssp in subs(sp):
            yield f"{name} {sub}", ssp


PARSERS = dict(_parsers())


def _vocab_actions() -> list[tuple[str, str, argparse.Action]]:
    return [(cmd, a.vocab, a) for cmd, p in PARSERS.items() for a in p._actions if hasattr(a, "vocab")]


def test_each_option_is_taken_by_exactly_its_commands() -> None:
    got: dict[str, set[str]] = {k: set() for k in TABLE}
    for cmd, name, _ in _vocab_actions():
        got[name].add(cmd)
    assert got == {k: cmds for k, (_, cmds) in TABLE.items()}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_one_spelling_type_metavar_and_help(name: str) -> None:
    acts = [(cmd, a) for cmd, n, a in _vocab_actions() if n == name]
    assert acts
    flag = TABLE[name][0]
    for cmd, a in acts:
        assert a.option_strings == [flag], cmd
        assert a.help and a.help.startswith(HELP[name]), (cmd, a.help)
        assert a.metavar == acts[0][1].metavar, cmd
        if name == "dtype":  # one validator; smoke and localize allow the pure precisions only
            assert isinstance(a.type, options.DtypeType), cmd
            assert set(a.type.allowed) <= set(options.DTYPES) and "fp32" in a.type.allowed, cmd
        else:
            assert a.type is acts[0][1].type, cmd


def test_no_command_spells_a_vocabulary_option_by_hand() -> None:
    """A `--dtype` / `--case-budget` ... added with add_argument instead of options.add_<name> would mean
    something else again: every action with one of the vocabulary's flags (or an old spelling) came from it."""
    flags = {flag for flag, _ in TABLE.values()}
    for cmd, p in PARSERS.items():
        for a in p._actions:
            if set(a.option_strings) & flags:
                assert hasattr(a, "vocab"), (cmd, a.option_strings)
            if getattr(a, "vocab_alias", False):
                assert a.help == argparse.SUPPRESS, (cmd, a.option_strings)  # hidden
                assert isinstance(a, options._Refused) and a.new in p.format_help(), (cmd, a.option_strings)


@pytest.mark.parametrize(("cmd", "old"), sorted(OLD))
def test_old_spelling_is_refused_naming_the_new_one(cmd: str, old: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Never silently remapped (`--budget` was the case budget in ops but the compile budget in train): one
    line that names the new spelling, exit 2, with or without a value."""
    name = OLD[(cmd, old)]
    new = TABLE[name][0]
    value = {"case_budget": "7", "compile_budget": "7", "filter": "^x$"}[name]
    for given in ([old, value], [old]):
        p = run_main([cmd, *REQUIRED.get(cmd, []), *given], capsys)
        assert p.returncode == 2
        assert p.stderr == f"bringup: error: {old} is no longer accepted here: use {new}\n", p.stderr
    help_text = PARSERS[cmd].format_help()
    assert new in help_text and f"{old} " not in help_text  # the old spelling is not documented


@pytest.mark.parametrize("name", sorted(TABLE))
def test_one_dest_per_option(name: str) -> None:
    """The value of an option lands in the same attribute in every command (no args.timeout / args.budget)."""
    dests = {a.dest for _, n, a in _vocab_actions() if n == name}
    assert dests == {name}


@pytest.mark.parametrize(("cmd", "name"), sorted((c, n) for n, (_, cmds) in TABLE.items() for c in cmds))
def test_bad_value_is_one_line_and_exit_2(cmd: str, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    flag = TABLE[name][0]
    p = run_main([*cmd.split(), *REQUIRED.get(cmd, []), flag, BAD[name]], capsys)
    assert p.returncode == 2
    err = p.stderr
    assert err.count("\n") == 1 and err.startswith(f"bringup: error: argument {flag}: "), err


@pytest.mark.parametrize("cmd", sorted(TABLE["dtype"][1]))
def test_dtype_names_are_the_same_everywhere(cmd: str) -> None:
    """Every spelling of a precision is stored as its one name (`localize --dtype bfloat16` -> bf16)."""
    p = build_parser()
    for given, want in (("bf16", "bf16"), ("bfloat16", "bf16"), ("FP32", "fp32"), ("half", "fp16")):
        assert p.parse_args([*cmd.split(), *REQUIRED.get(cmd, []), "--dtype", given]).dtype == want


def test_smoke_and_localize_say_what_they_accept(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("smoke", "localize"):
        a = next(a for c, n, a in _vocab_actions() if c == cmd and n == "dtype")
        assert a.type.allowed == options.PURE_DTYPES and "here: fp32, bf16, fp16 only" in a.help
        p = run_main([cmd, *REQUIRED.get(cmd, []), "--dtype", "amp-bf16"], capsys)
        assert p.returncode == 2 and "use one of fp32, bf16, fp16" in p.stderr


def test_vocabulary_dtypes_are_the_precisions() -> None:
    """options.py (torch-free) lists the names bringup/precision.py builds (fp64 is the reference only)."""
    from bringup.precision import PRECISIONS, parse_precision

    assert set(options.DTYPES) == set(PRECISIONS) - {"fp64"}
    for alias, name in options.DTYPE_ALIASES.items():
        assert parse_precision(alias).name == name


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (options.positive_int, {"3": 3}, ["0", "-1", "x", "1.5"]),
        (options.nonneg_int, {"0": 0, "7": 7}, ["-1", "x", "0.5"]),
        (options.positive_float, {"0.5": 0.5}, ["0", "-2", "inf", "nan", "x"]),
        (options.seconds, {"1": 1.0, "2.5": 2.5}, ["0", "inf", "nan", "x"]),
    ],
)
def test_the_one_number_validator(check: options.Number, good: dict[str, object], bad: list[str]) -> None:
    """Shown failing on each bad value: one line naming what was expected and what was given."""
    for s, v in good.items():
        assert check(s) == v and type(check(s)) is check.kind
    for s in bad:
        with pytest.raises(argparse.ArgumentTypeError, match=f"^expected {re.escape(check.what)}, got '{s}'$"):
            check(s)
