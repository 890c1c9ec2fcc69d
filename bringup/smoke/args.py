"""smoke's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup smoke --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse

NAME = "smoke"
HELP = "a GEMM and a tiny MLP training step on the device vs a float64 CPU reference"
ORDER = 10


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="fp32", help="fp32 | bf16 | fp16 (default fp32)")
