"""profile's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup profile --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from bringup.compile_backend import add_compile_backend
from bringup.options import (
    KILL_LIMIT,
    CommandOptions,
    add_case_budget,
    add_dtype,
    add_options,
    flag,
    measured,
    nonneg_int,
    not_measured,
    positive_int,
    vocab,
)

NAME = "profile"
HELP = "a few training steps under torch.profiler: trace, busy/idle/host split, top ops, transfers"
ORDER = 70

DEFAULTS: dict[str, Any] = {
    "model": "qwen3-tiny",
    "mode": "eager",
    "steps": 3,
    "warmup": 2,
    "batch": 4,
    "seq": 128,
    "dtype": "fp32",
    "top": 15,
    "backend": "inductor",
}
BUDGET_S = {"eager": 600.0, "compiled": 1500.0}  # each case's wall-clock limit (--case-budget), by mode


@dataclass(frozen=True)
class ProfileOptions(CommandOptions):
    """`bringup profile`'s options: each field its flag (the parser is built from them; bringup/cli.py builds
    them). Not train's --steps / --warmup (the warm-up steps inside the measured ones): here the untraced steps
    come before the traced ones; the train spellings are refused, naming these."""

    model: str = measured(
        DEFAULTS["model"],
        flag=flag("--model", help="qwen3 preset (qwen3-tiny, qwen3-0.6b, ...), an HF config JSON, or module:function"),
    )
    override: tuple[str, ...] = measured(
        (),
        flag=flag(
            "--override",
            action="append",
            metavar="KEY=VALUE",
            help="change a model config field (repeatable), e.g. num_hidden_layers=2",
        ),
    )
    mode: str = measured(DEFAULTS["mode"], flag=flag("--mode", help="eager (default) | compile | regional"))
    compile_backend: str = measured(DEFAULTS["backend"], flag=vocab(add_compile_backend))
    traced_steps: int = measured(
        DEFAULTS["steps"],
        flag=flag(
            "--traced-steps",
            old=["--steps"],
            type=positive_int,
            metavar="N",
            help="profiled (traced) steps (default 3)",
        ),
    )
    untraced_steps: int = measured(
        DEFAULTS["warmup"],
        flag=flag(
            "--untraced-steps",
            old=["--warmup"],
            type=nonneg_int,
            metavar="N",
            help="untraced steps before the traced ones (compile, caches, allocator; default 2)",
        ),
    )
    batch: int = measured(DEFAULTS["batch"], flag=flag("--batch", type=positive_int, help="batch size (default 4)"))
    seq: int = measured(DEFAULTS["seq"], flag=flag("--seq", type=positive_int, help="sequence length (default 128)"))
    dtype: str = measured(DEFAULTS["dtype"], flag=vocab(add_dtype))
    case_budget: float | None = not_measured(
        None,
        KILL_LIMIT,
        flag=vocab(
            add_case_budget, default_note=f"{BUDGET_S['eager']:g}; compile and regional {BUDGET_S['compiled']:g}"
        ),
    )
    top: int = not_measured(
        DEFAULTS["top"],
        "rows shown in the top ops tables",
        flag=flag("--top", type=positive_int, help="rows in the top ops/kernels tables (15)"),
    )
    out: str | None = not_measured(
        None,
        "a copy of the trace and summary",
        flag=flag("--out", metavar="DIR", help="also copy trace.json.gz and summary.json here"),
    )


OPTIONS = ProfileOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, ProfileOptions)
