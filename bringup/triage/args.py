"""triage's command-line face: `bringup triage [RUN]` is a tool (a command that plans its own work: localize cases
into the run, the minifier and the repro checks, bisections), listed here torch-free so that `bringup --help`
offers it (bringup.api.tools), with its options and `TriageOptions` (typed once from the parsed command line).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.api import Tool
from bringup.options import CommandOptions, measured, not_measured, positive_float, positive_int

NAME = "triage"
ORDER = 98
HELP = "from a run's failures to the bugs behind them: groups by root cause, one checked repro and one issue each"
TOOLS = (Tool(NAME, "bringup.triage.cli", HELP, device=False),)
DEFAULT_BUDGET_S = 900.0
DEFAULT_CHECK_BUDGET_S = 300.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="?", default=None, metavar="RUN", help="the stored run (default: the latest)")
    p.add_argument("--top", type=positive_int, default=None, metavar="N", help="only the N groups of largest reach")
    p.add_argument("--out", default=None, metavar="DIR", help="where the issues go (default: the run's folder/triage)")
    p.add_argument(
        "--budget",
        type=positive_float,
        default=DEFAULT_BUDGET_S,
        metavar="SEC",
        help=f"device work (localize, the minifier) in all (default {DEFAULT_BUDGET_S:g} s); what does not fit is said",
    )
    p.add_argument(
        "--check-budget",
        type=positive_float,
        default=DEFAULT_CHECK_BUDGET_S,
        metavar="SEC",
        help=f"one run of a repro on the device or on cpu (default {DEFAULT_CHECK_BUDGET_S:g} s)",
    )
    p.add_argument(
        "--localize-all",
        action="store_true",
        help="localize every wrong-numbers case (default: two models per first-module kind, the rest inferred)",
    )
    p.add_argument("--no-repro", action="store_true", help="groups and issues only: no repro made or checked")
    b = p.add_argument_group("--bisect: the first bad release of each group (bringup bisect on its repro)")
    b.add_argument("--bisect", action="store_true", help="bisect each group's checked repro for its own signature")
    b.add_argument("--between", nargs=2, metavar=("OLD", "NEW"), default=None, help="as bringup bisect --between")
    b.add_argument("--wheels", metavar="DIR", default=None, help="as bringup bisect --wheels")
    b.add_argument("--set", dest="sets", action="append", default=[], metavar="REQS", help="as bringup bisect --set")
    b.add_argument("--inherit-site", action="store_true", help="as bringup bisect --inherit-site")
    b.add_argument("--env-cache", metavar="DIR", default=None, help="as bringup bisect --env-cache")
    b.add_argument("--bisect-repeat", type=positive_int, default=1, metavar="N", help="runs per candidate (default 1)")
    b.add_argument(
        "--compiler-bisect",
        choices=["auto", "on", "off"],
        default="auto",
        help="PyTorch's compiler bisector on the first bad release (auto: a repro compiled with inductor, whose "
        "passes and lowerings it splits)",
    )


@dataclass(frozen=True)
class TriageOptions(CommandOptions):
    """`bringup triage`'s options (add_arguments' dests)."""

    run: str | None = measured(None, "the run triaged")
    top: int | None = measured(None, "how many groups are worked up")
    out: str | None = not_measured(None, "where the issues are written")
    budget: float = not_measured(DEFAULT_BUDGET_S, "a kill limit on localize")
    check_budget: float = not_measured(DEFAULT_CHECK_BUDGET_S, "a kill limit on each repro check")
    localize_all: bool = measured(False, "every case localized, not one per group")
    no_repro: bool = measured(False, "no repro made or checked")
    bisect: bool = measured(False, "each group bisected")
    between: tuple[str, ...] | None = measured(None)
    wheels: str | None = measured(None)
    sets: tuple[str, ...] = measured(())
    inherit_site: bool = measured(False, "each environment sees this Python's packages too")
    env_cache: str | None = not_measured(None, "where environments are kept")
    bisect_repeat: int = measured(1, "runs per candidate: a flake is judged on them")
    compiler_bisect: str = measured("auto")


OPTIONS = TriageOptions
