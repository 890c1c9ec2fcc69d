"""The options vocabulary: one spelling, one meaning, one help text and one validator for each option
that several commands take, and the shared argument types behind them.

| option | meaning |
|---|---|
| `--case-budget SEC` | wall-clock limit of each case (its worker is killed past it; the case is `budget`) |
| `--compile-budget SEC` | limit of a case's first call, the compile included (phase `compile`; past it: `budget`) |
| `--dtype NAME` | the run's precision: fp32, bf16, fp16 (pure) or amp-bf16, amp-fp16 (autocast over fp32 weights) |
| `--seed N` | the init and data seed of the models a case builds |
| `--filter REGEX` / `--limit N` | keep what matches REGEX (re.search) / at most N (after --filter) |

Each has an `add_<name>(parser, ...)` helper; a command takes exactly the ones that mean something to it, and
each lands in the same `dest` in every command (case_budget, compile_budget, dtype, seed, filter, limit). An
older spelling (`--budget`, `--timeout`, probe's `--only`, `--backend`) is refused in one line that names the
new one, exit 2: never silently remapped, since `--budget` meant the case budget in some commands and the
compile budget in others (tests/spine/test_options.py holds every command to this table).

argparse `type=` callables raise ArgumentTypeError, which the parser turns into one line and exit 2. Torch-free:
the command line is built from this module without importing torch (tests/spine/test_cli_imports.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar


@dataclass(frozen=True)
class Number:
    """The one number validator (an argparse `type=`): `kind` (int or float) parsed from the string, finite, and
    above `low` (`strict`) or at least it; else ArgumentTypeError "expected {what}, got '...'" (one line, exit 2)."""

    kind: type[int] | type[float]
    low: float
    strict: bool
    what: str

    def __call__(self, s: str) -> Any:
        try:
            v = self.kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.what}, got {s!r}") from None
        if not (math.isfinite(v) and (v > self.low if self.strict else v >= self.low)):
            raise argparse.ArgumentTypeError(f"expected {self.what}, got {s!r}")
        return v

    def __repr__(self) -> str:  # argparse names the type in some messages
        return self.what


positive_int = Number(int, 0, True, "a positive integer")
nonneg_int = Number(int, 0, False, "an integer >= 0")
positive_float = Number(float, 0, True, "a positive number")
seconds = Number(float, 0, True, "a positive number of seconds")  # a budget


# ---- the vocabulary ---------------------------------------------------------------------------------------
# The precisions (bringup/precision.py builds one Precision per name; this is the torch-free list of names).
PURE_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16")
MIXED_DTYPES: tuple[str, ...] = ("amp-bf16", "amp-fp16")
DTYPES: tuple[str, ...] = PURE_DTYPES + MIXED_DTYPES
# Other spellings of the same precisions, accepted everywhere (`localize --dtype bfloat16` was the old form).
DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
    "float64": "fp64", "double": "fp64", "amp_bf16": "amp-bf16", "amp_fp16": "amp-fp16",
    "mixed-bf16": "amp-bf16", "mixed-fp16": "amp-fp16",
}  # fmt: skip
# torch's names of the pure precisions (localize's case params keep them: its stored case ids do not change)
TORCH_DTYPE_NAMES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}

CASE_BUDGET_HELP = "wall-clock limit of each case, seconds: past it its worker is killed and the case is 'budget'"
COMPILE_BUDGET_HELP = (
    "limit of each case's first call, seconds, the compile included (an eager run's first step): "
    "past it the worker is killed and the case is 'budget' (phase compile)"
)
DTYPE_HELP = (
    "precision: fp32, bf16, fp16 (pure: weights and compute in that dtype), amp-bf16, amp-fp16 "
    "(autocast over fp32 weights, GradScaler for fp16)"
)
SEED_HELP = "init and data seed"
FILTER_HELP = "keep only {what} whose name matches REGEX (re.search; anchor with ^...$)"
LIMIT_HELP = "at most N {what} (after --filter)"


def canonical_dtype(name: str) -> str:
    """'bfloat16' -> 'bf16' (any accepted spelling to its one name; an unknown name is returned as given)."""
    key = name.strip().lower()
    return DTYPE_ALIASES.get(key, key)


class DtypeType:
    """The `--dtype` validator: any spelling of a precision in `allowed` -> its one name; else one line, exit 2."""

    def __init__(self, allowed: Sequence[str]) -> None:
        self.allowed = tuple(allowed)

    def __call__(self, s: str) -> str:
        name = canonical_dtype(s)
        if name not in self.allowed:
            raise argparse.ArgumentTypeError(f"unknown dtype {s!r}; use one of {', '.join(self.allowed)}")
        return name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DtypeType) and other.allowed == self.allowed

    def __hash__(self) -> int:
        return hash(self.allowed)

    def __repr__(self) -> str:  # argparse names the type in some messages
        return "dtype"


def regex(s: str) -> str:
    """A --filter pattern: kept as given (the suites compile it), refused here when it does not compile."""
    try:
        re.compile(s)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"bad regex {s!r}: {e}") from None
    return s


def _vocab(action: argparse.Action, name: str) -> argparse.Action:
    action.vocab = name  # type: ignore[attr-defined]  # read by tests/spine/test_options.py
    return action


class _Refused(argparse.Action):
    """An old spelling: hidden (no help line), and refused in one line naming the new one (exit 2)."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kw: object) -> None:
        self.new = new
        super().__init__(option_strings, dest, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: object,  # never read: the refusal ends the parse
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.error(f"{option_string} is no longer accepted here: use {self.new}")


def is_refused(a: argparse.Action) -> bool:
    """Whether `a` is an old spelling `refuse_old` added (no dest of its own: it never parses)."""
    return isinstance(a, _Refused)


def refuse_old(p: argparse.ArgumentParser, old: Sequence[str], new: str) -> None:
    """The old spellings `old` of the option now spelled `new`: refused in one line that names `new`, exit 2."""
    for flag in old:
        a = p.add_argument(flag, action=_Refused, new=new, dest="_refused_" + flag.lstrip("-").replace("-", "_"))
        a.vocab_alias = True  # type: ignore[attr-defined]  # a tag the help reads


def _default(default: object, note: str) -> str:
    if note:
        return f" (default {note})"
    if default is None:
        return ""
    return f" (default {default:g})" if isinstance(default, float) else f" (default {default})"


def add_case_budget(
    p: argparse.ArgumentParser, default: float | None, old: Sequence[str] = (), default_note: str = ""
) -> argparse.Action:
    """`--case-budget SEC`: the wall-clock limit of each case (Case.budget_s)."""
    a = p.add_argument(
        "--case-budget",
        dest="case_budget",
        type=seconds,
        default=default,
        metavar="SEC",
        help=CASE_BUDGET_HELP + _default(default, default_note),
    )
    refuse_old(p, old, "--case-budget")
    return _vocab(a, "case_budget")


def add_compile_budget(
    p: argparse.ArgumentParser, default: float | None, old: Sequence[str] = (), default_note: str = ""
) -> argparse.Action:
    """`--compile-budget SEC`: the limit of a case's first call, compile included (its `compile` phase)."""
    a = p.add_argument(
        "--compile-budget",
        dest="compile_budget",
        type=seconds,
        default=default,
        metavar="SEC",
        help=COMPILE_BUDGET_HELP + _default(default, default_note),
    )
    refuse_old(p, old, "--compile-budget")
    return _vocab(a, "compile_budget")


def add_dtype(
    p: argparse.ArgumentParser,
    default: str | None,
    allowed: Sequence[str] = DTYPES,
    dest: str = "dtype",
    default_note: str = "",
    why: str = "",
) -> argparse.Action:
    """`--dtype NAME`: the run's precision, one of `allowed` (a subset of DTYPES: what the command can run;
    `why` says why others are not offered). Every spelling in DTYPE_ALIASES is accepted and stored as its name."""
    allowed = tuple(allowed)
    unknown = [d for d in allowed if d not in DTYPES]
    if unknown:
        raise ValueError(f"add_dtype: not a precision of the vocabulary: {unknown}")
    accepts = "" if allowed == DTYPES else f"; here: {', '.join(allowed)} only" + (f" ({why})" if why else "")
    a = p.add_argument(
        "--dtype",
        dest=dest,
        type=DtypeType(allowed),
        default=default,
        metavar="NAME",
        help=DTYPE_HELP + accepts + _default(default, default_note),
    )
    return _vocab(a, "dtype")


def add_seed(p: argparse.ArgumentParser, default: int = 0, dest: str = "seed") -> argparse.Action:
    """`--seed N`: the init and data seed (an integer >= 0)."""
    a = p.add_argument(
        "--seed", dest=dest, type=nonneg_int, default=default, metavar="N", help=SEED_HELP + _default(default, "")
    )
    return _vocab(a, "seed")


def add_filter(p: argparse.ArgumentParser, what: str, old: Sequence[str] = ()) -> argparse.Action:
    """`--filter REGEX`: keep the `what` (models, OpInfos, features ...) whose name matches."""
    a = p.add_argument(
        "--filter", dest="filter", type=regex, default=None, metavar="REGEX", help=FILTER_HELP.format(what=what)
    )
    refuse_old(p, old, "--filter")
    return _vocab(a, "filter")


def add_limit(p: argparse.ArgumentParser, what: str, dest: str = "limit") -> argparse.Action:
    """`--limit N`: at most N of `what` (after --filter)."""
    a = p.add_argument(
        "--limit", dest=dest, type=positive_int, default=None, metavar="N", help=LIMIT_HELP.format(what=what)
    )
    return _vocab(a, "limit")


# ---- what changes a measurement: every option field says whether it does ----------------------------------
# An option is `measured` when two runs that differ only in it may measure different things: the cases planned,
# their inputs and shapes, precision, compile backend, reference, or how a verdict is judged. It is
# `not_measured` when it changes where results go, how the work is spread, what is printed, or a limit that
# only kills (`why` says so where it is not obvious). The run stores its measured options with the values in
# effect, defaults included (`Options.measured()`: `info["measured"]`), and `report --history` keys its lines
# by them (bringup/report/history.py). tests/spine/test_measured_options.py fails on a field that says neither.
MEASURED = "measured"  # a field's metadata key: True / False
WHY = "why"  # a field's metadata key: the one-line reason (where it is not obvious)
FLAG = "flag"  # a field's metadata key: how the command line spells it (a Flag, or a vocabulary `add_<name>`)
CHECK = "check"  # a field's metadata key: its check, run on the value when the options are built
KILL_LIMIT = "a kill limit: what a case computes is the same; past it, 'budget'"  # --case-budget's why


@dataclass(frozen=True)
class Flag:
    """How an options field is spelled on the command line: argparse's `add_argument(*names, **kw)`, its dest
    the field's name and its default the field's (a tuple as a list: `append` needs one). `group`: the title
    of the argument group it is shown in (`--help`); `old`: older spellings, refused naming this one;
    `exclusive`: the name of its mutually exclusive group (`[--quick | --full]`); `after`: taken after the
    sub-command too, its default suppressed there (a global option: `bringup smoke --device cpu`), with
    `after_help` for help there when it differs."""

    names: tuple[str, ...]
    kw: Mapping[str, Any]
    group: str | None = None
    old: tuple[str, ...] = ()
    exclusive: str | None = None
    after: bool = False
    after_help: str | None = None


def flag(
    *names: str,
    group: str | None = None,
    old: Sequence[str] = (),
    exclusive: str | None = None,
    after: bool = False,
    after_help: str | None = None,
    **kw: Any,
) -> Flag:
    """`--name`'s spelling, as add_argument takes it: `flag("--steps", type=positive_int, help=...)`."""
    return Flag(names, MappingProxyType(kw), group, tuple(old), exclusive, after or after_help is not None, after_help)


# A vocabulary option's spelling: `add_<name>(parser, default)` (add_dtype, add_case_budget ...: one spelling, one
# help and one validator for every command that takes it), bound to the command's other arguments with partial.
AddOption = Callable[[argparse.ArgumentParser, Any], object]
Check = Callable[[Any], object]  # a field's check: raises BadInput (one line, exit 2) on a bad value


def vocab(add: Callable[..., object], **kw: Any) -> AddOption:
    """A vocabulary option as a field's spelling: `add(parser, <the field's default>, **kw)` (add_dtype,
    add_case_budget, add_compile_budget, add_seed, add_compile_backend)."""
    return lambda p, default: add(p, default, **kw)


def filter_flag(what: str, old: Sequence[str] = ()) -> AddOption:
    """`--filter REGEX` as a field's spelling (its default: None)."""
    return lambda p, default: add_filter(p, what, old)


def limit_flag(what: str) -> AddOption:
    """`--limit N` as a field's spelling (its default: None)."""
    return lambda p, default: add_limit(p, what)


def _field(default: Any, is_measured: bool, why: str, flag: Flag | AddOption | None, check: Check | None) -> Any:
    meta: dict[str, Any] = {MEASURED: is_measured, WHY: why}
    if flag is not None:
        meta[FLAG] = flag
    if check is not None:
        meta[CHECK] = check
    return field(default=default, metadata=meta)


def measured(default: Any, why: str = "", flag: Flag | AddOption | None = None, check: Check | None = None) -> Any:
    """A field whose value changes what a run measures (it keys the run's lines in `report --history`); `flag`: its
    command-line spelling (the parser is built from the fields: `add_options`), `check`: its check."""
    return _field(default, True, why, flag, check)


def not_measured(default: Any, why: str = "", flag: Flag | AddOption | None = None, check: Check | None = None) -> Any:
    """A field that never changes what a run measures (where results go, workers, outputs, a kill limit)."""
    return _field(default, False, why, flag, check)


def add_options(
    p: argparse.ArgumentParser,
    cls: type[CommandOptions],
    names: Sequence[str] | None = None,
    after: bool = False,
    required: Sequence[str] = (),
) -> None:
    """The command-line options of `cls`'s fields that carry a spelling (`names`: only those), in field order,
    each in its group: the one place a field's flag, type, default and help are written. `after`: the parser
    of a sub-command, which takes the fields spelled `after` only, their defaults suppressed (argparse.SUPPRESS:
    a value given before the sub-command stands unless given again after it). `required`: fields required
    here (one class for several parsers: `hub`'s actions)."""
    containers: dict[tuple[str, str], Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # every CommandOptions subclass is a dataclass
        spelling = f.metadata.get(FLAG)
        if spelling is None or (names is not None and f.name not in names):
            continue
        if not isinstance(spelling, Flag):
            if not after:
                spelling(p, f.default)
            continue
        if after and not spelling.after:
            continue
        kw = {"default": list(f.default) if isinstance(f.default, tuple) else f.default, **spelling.kw}
        if f.name in required:
            kw["required"] = True
        if after:
            kw["default"] = argparse.SUPPRESS
            if spelling.after_help is not None:
                kw["help"] = spelling.after_help
        if spelling.names[0].startswith("-"):
            kw["dest"] = f.name
        elif spelling.names != (f.name,):  # a positional's name is its dest
            raise ValueError(f"{cls.__name__}.{f.name}: a positional argument is named as its field")
        _container(p, spelling, containers).add_argument(*spelling.names, **kw)
        refuse_old(p, spelling.old, spelling.names[0])


def _container(p: argparse.ArgumentParser, spelling: Flag, made: dict[tuple[str, str], Any]) -> Any:
    """Where `spelling` is added: `p`, or its argument group, and in that its mutually exclusive group (each made
    on its first field; `made` keeps them by kind and name)."""
    where: Any = p
    if spelling.group is not None:
        if ("group", spelling.group) not in made:
            made["group", spelling.group] = p.add_argument_group(spelling.group)
        where = made["group", spelling.group]
    if spelling.exclusive is not None:
        if ("exclusive", spelling.exclusive) not in made:
            made["exclusive", spelling.exclusive] = where.add_mutually_exclusive_group()
        where = made["exclusive", spelling.exclusive]
    return where


def is_measured(f: dataclasses.Field[Any]) -> bool:
    """Whether field `f` changes a measurement. A field that says neither (a plugin's plain dataclass field)
    counts as measured: a line split once too often is still a true line; two measurements merged into one is not."""
    return bool(f.metadata.get(MEASURED, True))


# ---- typed options: one frozen dataclass per command, built once at the face ------------------------------
class CommandOptions:
    """The base of every command's options (and of each post-run step's and run option's): a frozen dataclass,
    one typed field per dest its parser produces, each field's default the parser's. The face
    (bringup/cli.py) builds them once from argv; nothing below it sees argparse's Namespace or changes an
    option (a value resolved later is a local, or a `dataclasses.replace` copy). tests/spine/test_typed_options.py
    holds each command's fields to its parser's dests."""

    @classmethod
    def dests(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]  # cls: a dataclass

    @classmethod
    def take(cls: type[_O], values: dict[str, Any]) -> _O:
        """The options in `values` (a parser's dests), removed from it; a field `values` lacks keeps its
        default. A list (argparse's `append`, a stored run's JSON) becomes a tuple: options are immutable."""
        got = {k: values.pop(k) for k in cls.dests() if k in values}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in got.items()})

    def as_dict(self) -> dict[str, Any]:
        """The options as the run stores them (`info["options"]`): JSON values, tuples as lists."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]  # self is a CommandOptions dataclass

    def checked(self: _O) -> _O:
        """These options, checked (BadInput, one line, exit 2, on the first bad one): each field's own check,
        then `check` across fields. bringup/cli.py calls it where it builds them: planning only plans."""
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every CommandOptions subclass is a dataclass
            check = f.metadata.get(CHECK)
            if check is not None:
                check(getattr(self, f.name))
        self.check()
        return self

    def check(self) -> None:
        """What the options say together (--a needs --b ...): BadInput on a contradiction. Torch-free."""

    def check_device(self, device: Any) -> None:
        """What the options ask of the device the run resolved (ranks, a compile backend): BadInput when it
        cannot. bringup/cli.py calls it once the device is resolved, before the session starts."""


_O = TypeVar("_O", bound=CommandOptions)


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


@dataclass(frozen=True)
class NoOptions(CommandOptions):
    """A command without options of its own (`bringup --resume RUN_ID` alone)."""


@dataclass(frozen=True)
class GlobalOptions(CommandOptions):
    """The options every command takes, each field its flag (bringup/cli.py builds the parser from them): before
    the sub-command, and those spelled `after` after it too (`bringup smoke --device cpu`; defaults suppressed
    there, so that one given before stands). `command` is the sub-command's name (the parser's sub-parsers)."""

    command: str | None = measured(None)
    device: str | None = not_measured(
        None,
        "the device asked for: a line's machine is the device the run resolved",
        flag(
            "--device",
            help="auto (default) | cpu | cuda:1 | neuron | any PrivateUse1 name",
            after_help="the device, as the global --device",  # it wins over one given before
        ),
    )
    imports: tuple[str, ...] = measured(
        (),
        "a plugin's code runs in every worker: a backend, a device, a patch",
        flag(
            "--import",
            action="append",
            metavar="MODULE",
            help="import MODULE first, here and in every worker (device plugins, compile backends). "
            "Runs that module's code.",
        ),
    )
    db: str | None = not_measured(
        None, flag=flag("--db", help="SQLite result store (default ./bringup-results/bringup.db)")
    )
    resume: str | None = not_measured(
        None,
        "a resumed run keeps the options it was started with",
        flag(
            "--resume",
            metavar="RUN_ID",
            help="continue RUN_ID: run only its unfinished cases (alone: the planned ones)",
        ),
    )
    executor: str = not_measured(
        "local",
        "where the workers run, not what they compute",
        flag("--executor", choices=["local", "ray"], help="local (default) or ray"),
    )
    ray_address: str | None = not_measured(
        None, flag=flag("--ray-address", help="Ray cluster address (default: start a local one)")
    )
    max_rss_gb: float | None = not_measured(
        None,
        "a kill limit: what a case computes is the same; past it, oom",
        flag(
            "--max-rss-gb",
            type=positive_float,
            help="kill a worker whose memory passes this and report the case as oom",
        ),
    )
    # None: not given (1; `bringup run --quick`: one per core, bringup/orchestrate.py)
    workers: int | None = not_measured(
        None,
        "how many cases run at once, not what each computes",
        flag(
            "--workers",
            type=positive_int,
            after=True,
            help="worker processes (default 1; `run --quick`: one per core, at most 4)",
        ),
    )
    allow_unsupported: bool = not_measured(
        False,
        "the exit code only: every status is the same",
        flag(
            "--allow-unsupported",
            action="store_true",
            after=True,
            help="'unsupported' cases don't make the exit code 1",
        ),
    )
    fallback: tuple[str, ...] | None = measured(
        None,
        "a CPU fallback judged a gap or a failure: verdicts change",
        flag(
            "--fallback",
            action="append",
            metavar="[SUITE=]POLICY",
            after=True,
            help="what a CPU fallback is: gap (default: as each suite judges it) or error (a failure in "
            "every case, ops named); SUITE=POLICY for one suite; repeatable",
        ),
    )
    json: str | None = not_measured(
        None, flag=flag("--json", metavar="FILE", after=True, help="write results in the common JSON contract")
    )
    junit: str | None = not_measured(
        None, flag=flag("--junit", metavar="FILE", after=True, help="write a JUnit XML (a testcase per case)")
    )
    csv: str | None = not_measured(
        None, flag=flag("--csv", metavar="FILE", after=True, help="write a CSV (dynamo-harness-like columns)")
    )


@dataclass(frozen=True)
class Options:
    """One command line, typed: the global options, the command's own (`command`: the command's dataclass), and
    each post-run step's and run option's (`parts`, by name: bringup.api.PostRun / RunOptions)."""

    common: GlobalOptions = field(default_factory=GlobalOptions)
    command: CommandOptions = field(default_factory=NoOptions)
    parts: Mapping[str, CommandOptions] = field(default_factory=lambda: MappingProxyType({}))

    def of(self, cls: type[_O]) -> _O:
        """The command's options as `cls` (the command's own dataclass); a TypeError when they are not."""
        if not isinstance(self.command, cls):
            raise TypeError(f"the command's options are {type(self.command).__name__}, not {cls.__name__}")
        return self.command

    def part(self, name: str, cls: type[_O]) -> _O | None:
        """The options of post-run step or run option `name` as `cls`; None when this command has none."""
        got = self.parts.get(name)
        if got is None:
            return None
        if not isinstance(got, cls):
            raise TypeError(f"the options of {name!r} are {type(got).__name__}, not {cls.__name__}")
        return got

    def as_dict(self) -> dict[str, Any]:
        """Every option by its dest, as the run stores them (`info["options"]`; `--resume` reads them back), in the
        parser's order: the global options, the post-run steps', the command's name, the command's own."""
        out = self.common.as_dict()
        command = out.pop("command")
        for p in self.parts.values():
            out.update(p.as_dict())
        out["command"] = command
        out.update(self.command.as_dict())
        return out

    def measured(self) -> dict[str, Any]:
        """The options that change what the run measures (`is_measured`), by dest, with the values in effect
        (defaults included; JSON values, tuples as lists): the run's `info["measured"]`, what `report --history`
        keys its lines by. A dest the command shares with a global option is the command's, as in as_dict."""
        out: dict[str, Any] = {}
        for part in (self.common, *self.parts.values(), self.command):
            for f in dataclasses.fields(part):  # type: ignore[arg-type]  # every part is a CommandOptions dataclass
                out.pop(f.name, None)
                if is_measured(f):
                    out[f.name] = _plain(getattr(part, f.name))
        return out
