"""localize's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup localize --help` and a mistyped option build the parser
from this module alone (bringup.api.BUILTIN_ARGS), without importing the capability (and torch).
"""

from __future__ import annotations

import argparse

NAME = "localize"
HELP = "first divergence: the first module, then the aten op, off vs float64"
ORDER = 95


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a zoo model: an HF model type (llama, gpt2, ...), a timm name, or module:function")
    p.add_argument("--source", choices=["hf", "timm", "fn"], default="hf", help="where MODEL comes from (default hf)")
    p.add_argument("--task", default="causal-lm", help="HF task (default causal-lm)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                   help="the device run's dtype (default float32)")  # fmt: skip
    p.add_argument("--compile-backend", default=None, metavar="NAME",
                   help="also localize a compiled run: when eager matches, each module compiled alone with NAME "
                   "and judged the same way (the first compiled region off)")  # fmt: skip
    p.add_argument("--budget", type=float, default=600.0, help="wall budget of the case, seconds (default 600)")
