"""selftest's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup selftest --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import CommandOptions, add_case_budget, measured, not_measured, seconds

NAME = "selftest"
HELP = "harness self-test: cases that sleep, crash, exit, hang, raise or blow up memory on purpose"
ORDER = 90


@dataclass(frozen=True)
class SelftestOptions(CommandOptions):
    """`bringup selftest`'s options (add_arguments' dests; bringup/cli.py builds them)."""

    plan: str = measured("ok*3")
    case_budget: float = measured(60.0, "the harness's self-test: its sleep and hang items are judged against it")
    phase_budget: float = measured(1.0, "the 'phase' item is judged against it")
    tag: str = not_measured("", "a name that tells otherwise identical plans apart (in case ids); the work is the same")


OPTIONS = SelftestOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plan",
        default="ok*3",
        help="comma list of ok|sleep:S|segv|exit:N|raise|hang|alloc:GB|"
        "phase:S|unsupported|print|spin:N|lose|loseonce|flip|build:S|inductor, each optionally *N "
        "(default ok*3)",
    )
    add_case_budget(p, 60.0, old=["--budget"])
    p.add_argument(
        "--phase-budget",
        type=seconds,
        default=1.0,
        metavar="SEC",
        help="budget of the 'phase' item's phase, seconds (default 1)",
    )
    p.add_argument("--tag", default="", help="distinguishes otherwise identical plans (part of case ids)")
