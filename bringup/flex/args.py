"""flex's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup flex --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.compile_backend import add_compile_backend
from bringup.options import (
    CommandOptions,
    add_compile_budget,
    add_dtype,
    add_options,
    flag,
    measured,
    vocab,
)

NAME = "flex"
HELP = "FlexAttention matrix (8 mods x shapes): compile budget, numerics vs float64, TFLOP/s, one sentence"
ORDER = 40
DEFAULT_BUDGET_S = 600.0


@dataclass(frozen=True)
class FlexOptions(CommandOptions):
    """`bringup flex`'s options: each field its flag (the parser is built from them; bringup/cli.py builds them)."""

    matrix: str = measured(
        "auto",
        flag=flag(
            "--matrix",
            metavar="quick|default|FILE",
            help="quick (small, fp32: cpu/CI), default (the 96 cases) or a YAML/JSON matrix file; "
            "auto (default): default on an accelerator, quick on cpu",
        ),
    )
    compile_budget: float = measured(
        DEFAULT_BUDGET_S,
        "the matrix's question: a compile past it is 'budget'",
        flag=vocab(add_compile_budget, old=["--budget"]),
    )
    backward: str | None = measured(
        None,
        flag=flag(
            "--backward",
            metavar="auto|on|off",
            help="run the backward too (default auto: on where the device has a FlexAttention backward; "
            "elsewhere forward cases plus one backward probe)",
        ),
    )
    dtype: str | None = measured(
        None,
        flag=vocab(
            add_dtype,
            default_note="the matrix's; default matrix: bf16 on accelerators, fp32 on cpu; amp-*: "
            "bf16/fp16 inputs under autocast, as attention sees them in mixed-precision training",
        ),
    )
    mods: str = measured(
        "",
        flag=flag(
            "--mods",
            metavar="a,b,...",
            help="mods to run, at every shape of the matrix (built-in names, or module:function / "
            "file.py:function user mods)",
        ),
    )
    compile_backend: str = measured("inductor", flag=vocab(add_compile_backend))
    # Hidden, for tests and demonstrations: let dynamo hit its recompile limit on purpose.
    recompile_limit: int | None = measured(
        None,
        "hidden: dynamo's recompile limit, hit on purpose",
        flag=flag("--recompile-limit", type=int, help=argparse.SUPPRESS),
    )
    no_dynamo_reset: bool = measured(
        False,
        "hidden: dynamo's caches kept from case to case",
        flag=flag("--no-dynamo-reset", action="store_true", help=argparse.SUPPRESS),
    )


OPTIONS = FlexOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, FlexOptions)
