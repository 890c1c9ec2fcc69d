"""probe's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup probe --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import KILL_LIMIT, CommandOptions, add_case_budget, add_filter, measured, not_measured

NAME = "probe"
HELP = "feature probe: bf16/fp16/fp8, scaled_mm, autocast, SDPA backends, compile, distributed, TorchAO"
ORDER = 20
DEFAULT_COMPILE_BACKENDS = "aot_eager,inductor"
BUDGET_S = 180.0  # each case's wall-clock limit (--case-budget)
COMPILE_BUDGET_S = 300.0  # a compile probe's (a cold inductor compile takes 10-40 s on 2 cores)


@dataclass(frozen=True)
class ProbeOptions(CommandOptions):
    """`bringup probe`'s options (add_arguments' dests; bringup/cli.py builds them)."""

    filter: str | None = measured(None)
    case_budget: float | None = not_measured(None, KILL_LIMIT)
    compile_backends: str | None = measured(None)


OPTIONS = ProbeOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_filter(p, "features", old=["--only"])
    add_case_budget(p, None, default_note=f"{BUDGET_S:g}; compile probes {COMPILE_BUDGET_S:g}")
    p.add_argument(
        "--compile-backends",
        default=None,
        help=f"torch.compile backends to probe (default {DEFAULT_COMPILE_BACKENDS} and the device's own, "
        "e.g. openxla on xla); e.g. a device's own backend registered by an --import plugin",
    )
