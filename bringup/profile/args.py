"""profile's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup profile --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from bringup.options import (
    KILL_LIMIT,
    CommandOptions,
    add_case_budget,
    add_compile_backend,
    add_dtype,
    measured,
    nonneg_int,
    not_measured,
    positive_int,
    refuse_old,
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
    """`bringup profile`'s options (add_arguments' dests; bringup/cli.py builds them)."""

    model: str = measured(DEFAULTS["model"])
    override: tuple[str, ...] = measured(())
    mode: str = measured(DEFAULTS["mode"])
    compile_backend: str = measured(DEFAULTS["backend"])
    traced_steps: int = measured(DEFAULTS["steps"])
    untraced_steps: int = measured(DEFAULTS["warmup"])
    batch: int = measured(DEFAULTS["batch"])
    seq: int = measured(DEFAULTS["seq"])
    dtype: str = measured(DEFAULTS["dtype"])
    case_budget: float | None = not_measured(None, KILL_LIMIT)
    top: int = not_measured(DEFAULTS["top"], "rows shown in the top ops tables")
    out: str | None = not_measured(None, "a copy of the trace and summary")


OPTIONS = ProfileOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = DEFAULTS
    p.add_argument(
        "--model",
        default=d["model"],
        help="qwen3 preset (qwen3-tiny, qwen3-0.6b, ...), an HF config JSON, or module:function",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a model config field (repeatable), e.g. num_hidden_layers=2",
    )
    p.add_argument("--mode", default=d["mode"], help="eager (default) | compile | regional")
    add_compile_backend(p, default=d["backend"])
    # not train's --steps / --warmup (the warm-up steps inside the measured ones): here the untraced steps come
    # before the traced ones; the train spellings are refused, naming these
    p.add_argument(
        "--traced-steps", type=positive_int, default=d["steps"], metavar="N", help="profiled (traced) steps (default 3)"
    )
    p.add_argument(
        "--untraced-steps",
        type=nonneg_int,
        default=d["warmup"],
        metavar="N",
        help="untraced steps before the traced ones (compile, caches, allocator; default 2)",
    )
    refuse_old(p, ["--steps"], "--traced-steps")
    refuse_old(p, ["--warmup"], "--untraced-steps")
    p.add_argument("--batch", type=positive_int, default=d["batch"], help="batch size (default 4)")
    p.add_argument("--seq", type=positive_int, default=d["seq"], help="sequence length (default 128)")
    add_dtype(p, d["dtype"])
    add_case_budget(p, None, default_note=f"{BUDGET_S['eager']:g}; compile and regional {BUDGET_S['compiled']:g}")
    p.add_argument("--top", type=positive_int, default=d["top"], help="rows in the top ops/kernels tables (15)")
    p.add_argument("--out", metavar="DIR", default=None, help="also copy trace.json.gz and summary.json here")
