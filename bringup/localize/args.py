"""localize's command-line face (`bringup localize MODEL ...`): its options, torch-free like every
capability's `args.py`, so that `bringup localize --help` and a mistyped option never import torch.
"""

from __future__ import annotations

import argparse

DEFAULT_BUDGET_S = 600.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bringup.options import PURE_DTYPES, add_case_budget, add_dtype, add_seed

    p.add_argument("model", help="a zoo model: an HF model type (llama, gpt2, ...), a timm name, or module:function")
    p.add_argument("--source", choices=["hf", "timm", "fn"], default="hf", help="where MODEL comes from (default hf)")
    p.add_argument("--task", default="causal-lm", help="HF task (default causal-lm)")
    add_dtype(p, "fp32", PURE_DTYPES, why="the module-by-module rule needs one run dtype")
    p.add_argument("--compile-backend", default=None, metavar="NAME",
                   help="also localize a compiled run: when eager matches, each module compiled alone with NAME "
                   "and judged the same way (the first compiled region off)")  # fmt: skip
    add_seed(p, 0)
    add_case_budget(p, DEFAULT_BUDGET_S, dest="budget", old=["--budget"])
