"""train's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup train --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import KILL_LIMIT, CommandOptions, add_compile_backend, measured, not_measured
from bringup.train.spec import CACHE_ARTIFACT, CACHE_COLD, CACHE_WARM, TrainSpec

NAME = "train"
HELP = "eager vs compile vs regional training: time to first step, tokens/s, MFU, cold/warm caches, ranks"
ORDER = 30
D = TrainSpec()  # defaults
DEFAULT_CASE_BUDGET_S = 3600.0


@dataclass(frozen=True)
class TrainOptions(CommandOptions):
    """`bringup train`'s options (add_arguments' dests; bringup/cli.py builds them); None: the TrainSpec's
    default (`D`), or the mode's / dtype's."""

    model: str | None = measured(None)
    override: tuple[str, ...] = measured(())
    modes: str | None = measured(None)
    steps: int | None = measured(None)
    warmup: int | None = measured(None)
    batch: int | None = measured(None)
    seq: int | None = measured(None)
    seqs: str | None = measured(None)
    dynamic: str | None = measured(None)
    dtype: str | None = measured(None)
    compile_backend: str | None = measured(None)
    cache: str | None = measured(None)
    save_cache_artifact: str | None = not_measured(None, "one more copy of the artifact every cold case writes anyway")
    load_cache_artifact: str | None = measured(None, "the artifact arm starts from this file")
    nproc: int | None = measured(None)
    compile_budget: float | None = measured(None, "in each compiled case's spec: its first step is judged by it")
    case_budget: float = not_measured(DEFAULT_CASE_BUDGET_S, KILL_LIMIT)
    lr: float | None = measured(None)
    loss_rtol: float | None = measured(None, "the loss band compiled modes are judged by")
    flops_only: bool = measured(False)


OPTIONS = TrainOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bringup.options import add_case_budget, add_compile_budget, add_dtype, positive_float, positive_int

    p.add_argument(
        "--model",
        default=None,
        help="qwen3 preset (qwen3-tiny [default], qwen3-0.6b ... qwen3-32b), "
        "an HF config JSON, or module:function returning a model",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a model config field (repeatable), e.g. num_key_value_heads=4",
    )
    p.add_argument(
        "--modes",
        default=None,
        help="comma list of eager,compile,regional,nested,aot (default: "
        "eager,compile,regional; with --cache all: every one)",
    )
    p.add_argument("--steps", type=positive_int, default=None, help=f"optimizer steps per mode (default {D.steps})")
    p.add_argument(
        "--warmup",
        type=positive_int,
        default=None,
        help=f"steps left out of the steady median, step 1 included (default {D.warmup})",
    )
    p.add_argument("--batch", type=positive_int, default=None, help=f"batch per rank (default {D.batch})")
    p.add_argument("--seq", type=positive_int, default=None, help=f"sequence length (default {D.seq})")
    p.add_argument(
        "--seqs",
        default=None,
        metavar="L1,L2,...",
        help="sequence lengths cycled over the steps, as a loader of varying lengths gives them (--seq "
        "becomes their max): what recompiles, and what dynamic shapes save",
    )
    p.add_argument(
        "--dynamic",
        default=None,
        metavar="auto,on,off",
        help="compiled modes' dynamic shapes: auto (torch's default: static, then dynamic on the first "
        "recompile), on (dynamic=True), off (dynamic=False: a graph per shape); a comma list runs each "
        "compiled arm once per setting (default auto)",
    )
    add_dtype(p, None, default_note=D.dtype)
    add_compile_backend(p, default=None)
    p.add_argument(
        "--cache",
        choices=[CACHE_COLD, CACHE_WARM, "both", CACHE_ARTIFACT, "all"],
        default=None,
        help="compile caches: cold (fresh, default), warm (rerun on the cold one), both, artifact (cold, "
        "then a new job with empty caches that loads the cold run's portable artifact), all (every "
        "time-to-first-step arm, each in a fresh process: cold, warm, artifact for compile / regional / "
        "nested, and aot)",
    )
    p.add_argument(
        "--save-cache-artifact",
        default=None,
        metavar="PATH",
        help="write the cold compile's portable cache artifact here (one compiled mode)",
    )
    p.add_argument(
        "--load-cache-artifact",
        default=None,
        metavar="PATH",
        help="start compiled modes from this artifact, empty cache dirs (a shipped warm cache)",
    )
    p.add_argument("--nproc", type=positive_int, default=None, help="ranks (torchrun launcher, FSDP2; default 1)")
    add_compile_budget(p, None, old=["--budget"], default_note="none: the case budget only")
    add_case_budget(p, DEFAULT_CASE_BUDGET_S)
    p.add_argument("--lr", type=positive_float, default=None, help=f"AdamW learning rate (default {D.lr:g})")
    p.add_argument(
        "--loss-rtol",
        type=positive_float,
        default=None,
        help="loss band of compiled modes around eager (default: by dtype, see docs/train.md)",
    )
    p.add_argument("--flops-only", action="store_true", help="params and FLOPs/token only (meta device, no training)")
