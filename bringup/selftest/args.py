"""selftest's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup selftest --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import (
    CommandOptions,
    add_case_budget,
    add_options,
    flag,
    measured,
    not_measured,
    seconds,
    vocab,
)

NAME = "selftest"
HELP = "harness self-test: cases that sleep, crash, exit, hang, raise or blow up memory on purpose"
ORDER = 90


@dataclass(frozen=True)
class SelftestOptions(CommandOptions):
    """`bringup selftest`'s options: each field its flag (the parser is built from them; bringup/cli.py builds
    them)."""

    plan: str = measured(
        "ok*3",
        flag=flag(
            "--plan",
            help="comma list of ok|sleep:S|segv|exit:N|raise|hang|alloc:GB|"
            "phase:S|unsupported|print|spin:N|lose|loseonce|flip|build:S|inductor, each optionally *N "
            "(default ok*3)",
        ),
    )
    case_budget: float = measured(
        60.0,
        "the harness's self-test: its sleep and hang items are judged against it",
        flag=vocab(add_case_budget, old=["--budget"]),
    )
    phase_budget: float = measured(
        1.0,
        "the 'phase' item is judged against it",
        flag=flag(
            "--phase-budget",
            type=seconds,
            metavar="SEC",
            help="budget of the 'phase' item's phase, seconds (default 1)",
        ),
    )
    tag: str = not_measured(
        "",
        "a name that tells otherwise identical plans apart (in case ids); the work is the same",
        flag=flag("--tag", help="distinguishes otherwise identical plans (part of case ids)"),
    )


OPTIONS = SelftestOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, SelftestOptions)
