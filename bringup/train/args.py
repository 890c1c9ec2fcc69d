"""train's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup train --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.compile_backend import add_compile_backend
from bringup.options import (
    KILL_LIMIT,
    CommandOptions,
    add_case_budget,
    add_compile_budget,
    add_dtype,
    add_options,
    flag,
    measured,
    not_measured,
    positive_float,
    positive_int,
    vocab,
)
from bringup.train.spec import CACHE_ARTIFACT, CACHE_COLD, CACHE_WARM, TrainSpec

NAME = "train"
HELP = "eager vs compile vs regional training: time to first step, tokens/s, MFU, cold/warm caches, ranks"
ORDER = 30
D = TrainSpec()  # defaults
DEFAULT_CASE_BUDGET_S = 3600.0


@dataclass(frozen=True)
class TrainOptions(CommandOptions):
    """`bringup train`'s options: each field its flag, help and whether it changes what is measured (the parser
    is built from them: add_arguments; bringup/cli.py builds the options). None: the TrainSpec's default
    (`D`), or the mode's / dtype's."""

    model: str | None = measured(
        None,
        flag=flag(
            "--model",
            help="qwen3 preset (qwen3-tiny [default], qwen3-0.6b ... qwen3-32b), "
            "an HF config JSON, or module:function returning a model",
        ),
    )
    override: tuple[str, ...] = measured(
        (),
        flag=flag(
            "--override",
            action="append",
            metavar="KEY=VALUE",
            help="change a model config field (repeatable), e.g. num_key_value_heads=4",
        ),
    )
    modes: str | None = measured(
        None,
        flag=flag(
            "--modes",
            help="comma list of eager,compile,regional,nested,aot (default: "
            "eager,compile,regional; with --cache all: every one)",
        ),
    )
    steps: int | None = measured(
        None, flag=flag("--steps", type=positive_int, help=f"optimizer steps per mode (default {D.steps})")
    )
    warmup: int | None = measured(
        None,
        flag=flag(
            "--warmup",
            type=positive_int,
            help=f"steps left out of the steady median, step 1 included (default {D.warmup})",
        ),
    )
    batch: int | None = measured(
        None, flag=flag("--batch", type=positive_int, help=f"batch per rank (default {D.batch})")
    )
    seq: int | None = measured(None, flag=flag("--seq", type=positive_int, help=f"sequence length (default {D.seq})"))
    seqs: str | None = measured(
        None,
        flag=flag(
            "--seqs",
            metavar="L1,L2,...",
            help="sequence lengths cycled over the steps, as a loader of varying lengths gives them (--seq "
            "becomes their max): what recompiles, and what dynamic shapes save",
        ),
    )
    dynamic: str | None = measured(
        None,
        flag=flag(
            "--dynamic",
            metavar="auto,on,off",
            help="compiled modes' dynamic shapes: auto (torch's default: static, then dynamic on the first "
            "recompile), on (dynamic=True), off (dynamic=False: a graph per shape); a comma list runs each "
            "compiled arm once per setting (default auto)",
        ),
    )
    dtype: str | None = measured(None, flag=vocab(add_dtype, default_note=D.dtype))
    compile_backend: str | None = measured(None, flag=vocab(add_compile_backend))
    cache: str | None = measured(
        None,
        flag=flag(
            "--cache",
            choices=[CACHE_COLD, CACHE_WARM, "both", CACHE_ARTIFACT, "all"],
            help="compile caches: cold (fresh, default), warm (rerun on the cold one), both, artifact (cold, "
            "then a new job with empty caches that loads the cold run's portable artifact), all (every "
            "time-to-first-step arm, each in a fresh process: cold, warm, artifact for compile / regional / "
            "nested, and aot)",
        ),
    )
    save_cache_artifact: str | None = not_measured(
        None,
        "one more copy of the artifact every cold case writes anyway",
        flag=flag(
            "--save-cache-artifact",
            metavar="PATH",
            help="write the cold compile's portable cache artifact here (one compiled mode)",
        ),
    )
    load_cache_artifact: str | None = measured(
        None,
        "the artifact arm starts from this file",
        flag=flag(
            "--load-cache-artifact",
            metavar="PATH",
            help="start compiled modes from this artifact, empty cache dirs (a shipped warm cache)",
        ),
    )
    nproc: int | None = measured(
        None, flag=flag("--nproc", type=positive_int, help="ranks (torchrun launcher, FSDP2; default 1)")
    )
    compile_budget: float | None = measured(
        None,
        "in each compiled case's spec: its first step is judged by it",
        flag=vocab(add_compile_budget, old=["--budget"], default_note="none: the case budget only"),
    )
    case_budget: float = not_measured(DEFAULT_CASE_BUDGET_S, KILL_LIMIT, flag=vocab(add_case_budget))
    lr: float | None = measured(
        None, flag=flag("--lr", type=positive_float, help=f"AdamW learning rate (default {D.lr:g})")
    )
    loss_rtol: float | None = measured(
        None,
        "the loss band compiled modes are judged by",
        flag=flag(
            "--loss-rtol",
            type=positive_float,
            help="loss band of compiled modes around eager (default: by dtype, see docs/train.md)",
        ),
    )
    flops_only: bool = measured(
        False,
        flag=flag("--flops-only", action="store_true", help="params and FLOPs/token only (meta device, no training)"),
    )


OPTIONS = TrainOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, TrainOptions)
