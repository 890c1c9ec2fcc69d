"""triage's command-line face: `bringup triage [RUN]` is a tool (a command that plans its own work: localize cases
into the run, the minifier and the repro checks, bisections), listed here torch-free so that `bringup --help`
offers it (bringup.api.tools), with its options and `TriageOptions` (typed once from the parsed command line).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.api import Tool
from bringup.errors import BadInput
from bringup.options import (
    CommandOptions,
    add_options,
    flag,
    measured,
    not_measured,
    positive_float,
    positive_int,
)

NAME = "triage"
ORDER = 98
HELP = "from a run's failures to the bugs behind them: groups by root cause, one checked repro and one issue each"
TOOLS = (Tool(NAME, "bringup.triage.cli", HELP, device=False),)
DEFAULT_BUDGET_S = 900.0
DEFAULT_CHECK_BUDGET_S = 300.0


BISECT = "--bisect: the first bad release of each group (bringup bisect on its repro)"  # the --help group


@dataclass(frozen=True)
class TriageOptions(CommandOptions):
    """`bringup triage`'s options: each field its flag (the parser is built from them), checked where they are
    built (`check`)."""

    run: str | None = measured(
        None,
        "the run triaged",
        flag=flag("run", nargs="?", metavar="RUN", help="the stored run (default: the latest)"),
    )
    top: int | None = measured(
        None,
        "how many groups are worked up",
        flag=flag("--top", type=positive_int, metavar="N", help="only the N groups of largest reach"),
    )
    out: str | None = not_measured(
        None,
        "where the issues are written",
        flag=flag("--out", metavar="DIR", help="where the issues go (default: the run's folder/triage)"),
    )
    budget: float = not_measured(
        DEFAULT_BUDGET_S,
        "a kill limit on localize",
        flag=flag(
            "--budget",
            type=positive_float,
            metavar="SEC",
            help=f"device work (localize, the minifier) in all (default {DEFAULT_BUDGET_S:g} s); what does not fit "
            "is said",
        ),
    )
    check_budget: float = not_measured(
        DEFAULT_CHECK_BUDGET_S,
        "a kill limit on each repro check",
        flag=flag(
            "--check-budget",
            type=positive_float,
            metavar="SEC",
            help=f"one run of a repro on the device or on cpu (default {DEFAULT_CHECK_BUDGET_S:g} s)",
        ),
    )
    localize_all: bool = measured(
        False,
        "every case localized, not one per group",
        flag=flag(
            "--localize-all",
            action="store_true",
            help="localize every wrong-numbers case (default: two models per first-module kind, the rest inferred)",
        ),
    )
    no_repro: bool = measured(
        False,
        "no repro made or checked",
        flag=flag("--no-repro", action="store_true", help="groups and issues only: no repro made or checked"),
    )
    bisect: bool = measured(
        False,
        "each group bisected",
        flag=flag(
            "--bisect",
            group=BISECT,
            action="store_true",
            help="bisect each group's checked repro for its own signature",
        ),
    )
    between: tuple[str, ...] | None = measured(
        None,
        flag=flag("--between", group=BISECT, nargs=2, metavar=("OLD", "NEW"), help="as bringup bisect --between"),
    )
    wheels: str | None = measured(
        None, flag=flag("--wheels", group=BISECT, metavar="DIR", help="as bringup bisect --wheels")
    )
    sets: tuple[str, ...] = measured(
        (),
        flag=flag("--set", group=BISECT, action="append", metavar="REQS", help="as bringup bisect --set"),
    )
    inherit_site: bool = measured(
        False,
        "each environment sees this Python's packages too",
        flag=flag("--inherit-site", group=BISECT, action="store_true", help="as bringup bisect --inherit-site"),
    )
    env_cache: str | None = not_measured(
        None,
        "where environments are kept",
        flag=flag("--env-cache", group=BISECT, metavar="DIR", help="as bringup bisect --env-cache"),
    )
    bisect_repeat: int = measured(
        1,
        "runs per candidate: a flake is judged on them",
        flag=flag(
            "--bisect-repeat",
            group=BISECT,
            type=positive_int,
            metavar="N",
            help="runs per candidate (default 1)",
        ),
    )
    compiler_bisect: str = measured(
        "auto",
        flag=flag(
            "--compiler-bisect",
            group=BISECT,
            choices=["auto", "on", "off"],
            help="PyTorch's compiler bisector on the first bad release (auto: a repro compiled with inductor, "
            "whose passes and lowerings it splits)",
        ),
    )

    def check(self) -> None:
        """--bisect and its candidates go together, and need the repros."""
        ways = [self.between is not None, self.wheels is not None, bool(self.sets)]
        if self.bisect and sum(ways) != 1:
            raise BadInput("--bisect needs the candidates: one of --between OLD NEW, --wheels DIR, --set REQS")
        if not self.bisect and any(ways):
            raise BadInput("--between / --wheels / --set choose --bisect's candidates: add --bisect")
        if self.bisect and self.no_repro:
            raise BadInput("--bisect bisects each group's repro: it cannot go with --no-repro")


OPTIONS = TriageOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, TriageOptions)
