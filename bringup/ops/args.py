"""ops's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup ops --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import (
    KILL_LIMIT,
    CommandOptions,
    add_case_budget,
    add_filter,
    measured,
    not_measured,
    positive_int,
)

NAME = "ops"
HELP = "OpInfo op coverage: every op x dtype on the device vs cpu (pass/fallback/fail_numeric/unsupported)"
ORDER = 60
DEFAULT_DTYPES = "fp32,bf16"
DEFAULT_SAMPLES = 4
DEFAULT_BUDGET_S = 120.0


@dataclass(frozen=True)
class OpsOptions(CommandOptions):
    """`bringup ops`'s options (add_arguments' dests; bringup/cli.py builds them)."""

    filter: str | None = measured(None)
    dtypes: str = measured(DEFAULT_DTYPES)
    samples: int = measured(DEFAULT_SAMPLES)
    case_budget: float = not_measured(DEFAULT_BUDGET_S, KILL_LIMIT)


OPTIONS = OpsOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_filter(p, "OpInfos (name with variant, e.g. div.floor_rounding)")
    p.add_argument("--dtypes", default=DEFAULT_DTYPES, help=f"comma list of dtypes (default {DEFAULT_DTYPES})")
    p.add_argument(
        "--samples",
        type=positive_int,
        default=DEFAULT_SAMPLES,
        help=f"inputs per (op, dtype) from OpInfo reference_inputs (default {DEFAULT_SAMPLES})",
    )
    add_case_budget(p, DEFAULT_BUDGET_S, old=["--budget"])
