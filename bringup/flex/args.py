"""flex's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup flex --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import CommandOptions, add_compile_backend, add_compile_budget, add_dtype, measured

NAME = "flex"
HELP = "FlexAttention matrix (8 mods x shapes): compile budget, numerics vs float64, TFLOP/s, one sentence"
ORDER = 40
DEFAULT_BUDGET_S = 600.0


@dataclass(frozen=True)
class FlexOptions(CommandOptions):
    """`bringup flex`'s options (add_arguments' dests; bringup/cli.py builds them)."""

    matrix: str = measured("auto")
    compile_budget: float = measured(DEFAULT_BUDGET_S, "the matrix's question: a compile past it is 'budget'")
    backward: str | None = measured(None)
    dtype: str | None = measured(None)
    mods: str = measured("")
    compile_backend: str = measured("inductor")
    recompile_limit: int | None = measured(None, "hidden: dynamo's recompile limit, hit on purpose")
    no_dynamo_reset: bool = measured(False, "hidden: dynamo's caches kept from case to case")


OPTIONS = FlexOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--matrix",
        default="auto",
        metavar="quick|default|FILE",
        help="quick (small, fp32: cpu/CI), default (the 96 cases) or a YAML/JSON matrix file; "
        "auto (default): default on an accelerator, quick on cpu",
    )
    add_compile_budget(p, DEFAULT_BUDGET_S, old=["--budget"])
    p.add_argument(
        "--backward",
        default=None,
        metavar="auto|on|off",
        help="run the backward too (default auto: on where the device has a FlexAttention backward; "
        "elsewhere forward cases plus one backward probe)",
    )
    add_dtype(
        p,
        None,
        default_note="the matrix's; default matrix: bf16 on accelerators, fp32 on cpu; amp-*: "
        "bf16/fp16 inputs under autocast, as attention sees them in mixed-precision training",
    )
    p.add_argument(
        "--mods",
        default="",
        metavar="a,b,...",
        help="mods to run, at every shape of the matrix (built-in names, or module:function / "
        "file.py:function user mods)",
    )
    add_compile_backend(p)
    # Hidden, for tests and demonstrations: let dynamo hit its recompile limit on purpose.
    p.add_argument("--recompile-limit", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-dynamo-reset", action="store_true", default=False, help=argparse.SUPPRESS)
