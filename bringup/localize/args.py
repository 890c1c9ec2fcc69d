"""localize's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup localize --help` and a mistyped option build the parser
from this module alone (bringup.api.BUILTIN_ARGS), without importing the capability (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import (
    KILL_LIMIT,
    PURE_DTYPES,
    CommandOptions,
    add_case_budget,
    add_dtype,
    add_seed,
    measured,
    not_measured,
)

NAME = "localize"
HELP = "first divergence: the first module, then the first aten op, where the device leaves float64"
ORDER = 95
DEFAULT_BUDGET_S = 600.0


@dataclass(frozen=True)
class LocalizeOptions(CommandOptions):
    """`bringup localize`'s options (add_arguments' dests; bringup/cli.py builds them). `dtype` is the vocabulary's
    name (fp32, bf16, fp16), as every command stores it; the case's params keep torch's (float32 ...)."""

    model: str = measured("")
    source: str = measured("hf")
    task: str = measured("causal-lm")
    dtype: str = measured("fp32")
    compile_backend: str | None = measured(None)
    seed: int = measured(0)
    case_budget: float = not_measured(DEFAULT_BUDGET_S, KILL_LIMIT)


OPTIONS = LocalizeOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a zoo model: an HF model type (llama, gpt2, ...), a timm name, or module:function")
    p.add_argument("--source", choices=["hf", "timm", "fn"], default="hf", help="where MODEL comes from (default hf)")
    p.add_argument("--task", default="causal-lm", help="HF task (default causal-lm)")
    add_dtype(p, "fp32", PURE_DTYPES, why="the module-by-module rule needs one run dtype")
    p.add_argument(
        "--compile-backend",
        default=None,
        metavar="NAME",
        help="also localize a compiled run: when eager matches, each module compiled alone with NAME "
        "and judged the same way (the first compiled region off)",
    )
    add_seed(p, 0)
    add_case_budget(p, DEFAULT_BUDGET_S, old=["--budget"])
