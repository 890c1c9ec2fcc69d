"""smoke's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup smoke --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import KILL_LIMIT, PURE_DTYPES, CommandOptions, add_case_budget, add_dtype, measured, not_measured

NAME = "smoke"
HELP = "a GEMM and a tiny MLP training step on the device vs a float64 CPU reference"
ORDER = 10
DEFAULT_BUDGET_S = 300.0


@dataclass(frozen=True)
class SmokeOptions(CommandOptions):
    """`bringup smoke`'s options (add_arguments' dests; bringup/cli.py builds them)."""

    dtype: str = measured("fp32")
    case_budget: float = not_measured(DEFAULT_BUDGET_S, KILL_LIMIT)


OPTIONS = SmokeOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dtype(
        p,
        "fp32",
        PURE_DTYPES,
        why="the GEMM and the MLP step run in one dtype, weights included; mixed "
        "precision is train's, zoo's and flex's",
    )
    add_case_budget(p, DEFAULT_BUDGET_S)
