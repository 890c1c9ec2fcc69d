"""zoo's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup zoo --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.api import Tool
from bringup.hub import flags as hub_flags
from bringup.options import (
    KILL_LIMIT,
    CommandOptions,
    add_case_budget,
    add_compile_backend,
    add_dtype,
    add_filter,
    add_limit,
    add_seed,
    measured,
    nonneg_int,
    not_measured,
    positive_int,
)

NAME = "zoo"
HELP = "every transformers architecture and timm model: parity vs float64 cpu, loss curves, graph breaks"
ORDER = 50
# `bringup hub`: Hub sweeps without a device (hub/cli.py), a tool beside the zoo's sub-command
TOOLS = (
    Tool(
        "hub",
        "bringup.hub.cli",
        "Hub sweeps without a device: fetch configs, plan signatures, export/import",
        device=False,
    ),
)

SIZES = ("tiny", "full")
REFERENCES = ("cpu", "baseline", "none")
FULL_STEPS = 3
FULL_BATCH, FULL_SEQ = 2, 64
# tiny models: rows per microbatch and tokens per row (a step runs a padded and a packed microbatch:
# bringup/models/batches.py). Shapes as real jobs have them: an odd batch (one left-padded, one right-padded and
# one full row) and rows of 37 tokens, not a multiple of any block a kernel tiles by (a bug in a partial tail runs;
# at 32 it never did). The old uniform layout (--inputs uniform) runs 2 x 16.
TINY_BATCH, TINY_SEQ, UNIFORM_BATCH, UNIFORM_SEQ = 3, 37, 2, 16
INPUTS = ("text", "uniform")
DEFAULT_STEPS = 4
DEFAULT_TIMEOUT = 600.0  # each case's wall-clock limit (--case-budget)
FULL_TIMEOUT = 3600.0  # --size full's, unless --case-budget is given
# The trusted run (cpu eager at the run precision) and its float64 reference are repeated under this
# many more seeds: per tensor, the spread of their errors is the noise a correct run has at this
# precision (checks/parity.py). 2 more seeds (3 samples) cost 2 x (float64 + eager) runs of a tiny model.
NOISE_SEEDS = 2


@dataclass(frozen=True)
class ZooOptions(CommandOptions):
    """`bringup zoo`'s options (add_arguments' dests, the Hub sweep's included; bringup/cli.py builds them).
    None: the size's default (--steps, --case-budget, --batch, --seq), resolved where the cases are planned
    (zoo/plan.py), never written back."""

    source: str = measured("hf-causal")
    size: str = measured("tiny")
    reference: str | None = measured(None)
    batch: int | None = measured(None)
    seq: int | None = measured(None)
    inputs: str = measured("text")
    filter: str | None = measured(None)
    limit: int | None = measured(None)
    steps: int | None = measured(None)
    compile_backend: str | None = measured(None)
    dtype: str = measured("fp32")
    noise_seeds: int = measured(NOISE_SEEDS, "the noise a correct run has, which every tensor's bound is set from")
    module_check: str = measured("auto")
    case_budget: float | None = not_measured(None, KILL_LIMIT)
    baseline: str | None = measured(None)
    seed: int = measured(0)
    hub_index: str | None = not_measured(None, "a cache of the Hub's listings and configs")
    hub_workers: int = not_measured(hub_flags.DEFAULT_WORKERS, "concurrent config fetches")
    hub_rate: str | None = not_measured(None, "requests per window to the Hub")
    hub_refresh: bool = not_measured(False, "the same query listed again: the Hub as it is now, not another sweep")
    full_top: int = measured(0)
    nproc: int = measured(1)
    device_memory: float | None = measured(None, "the preflight's memory: which models run, which are unsupported")

    def hub_fetch(self, db: str | None) -> hub_flags.HubFetch:
        """What a Hub sweep's fetch reads (bringup/hub/plan.py); the index beside `db` (the global --db)."""
        return hub_flags.HubFetch(
            self.source, self.limit, self.filter, self.hub_index, self.hub_workers, self.hub_rate, self.hub_refresh, db
        )


OPTIONS = ZooOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        default="hf-causal",
        help="hf-causal (default: the 196 causal-LM types) | hf-all (every task mapping) | timm | "
        "hub-top (the shipped catalogue of widely used Hub models) | hub:ORG/NAME[@REV][,...] (Hub ids, "
        "through the Hugging Face cache; HF_HUB_OFFLINE respected) | hub-search:[TEXT][,library=L]"
        "[,task=T][,author=A][,sort=downloads|likes] / hub-list:FILE (a Hub sweep: one case per distinct "
        "signature, the verdict for every id; docs/hub.md) | dynamo:huggingface / dynamo:timm (PyTorch's "
        "dynamo benchmark suites' models, named as upstream names them: AlbertForMaskedLM) | hf-class:NAME[,...] "
        "(transformers classes, tiny) | csv:FILE.csv (the rows of an upstream expected-accuracy CSV) | FILE (one "
        "module:function, HF config JSON path or Hub id per line)",
    )
    p.add_argument(
        "--size",
        default="tiny",
        choices=SIZES,
        help="hub sources: tiny (default: the config shrunk, judged against float64) | full (the real "
        "config, meta-device init, memory preflight, judged against --reference)",
    )
    p.add_argument(
        "--reference",
        default=None,
        choices=REFERENCES,
        help="--size full: cpu (a cpu fp32 run of the first steps; default without --baseline) | "
        "baseline (the --baseline bundle only; default with it) | none (compiled vs eager only)",
    )
    p.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        help=f"rows per batch (tiny: per microbatch; default {TINY_BATCH}; --size full {FULL_BATCH})",
    )
    p.add_argument(
        "--seq",
        type=positive_int,
        default=None,
        help=f"tokens per row (default {TINY_SEQ}; --size full {FULL_SEQ}): raise it to judge long rows (rotary "
        "at large angles, softmax over long rows, sliding windows)",
    )
    p.add_argument(
        "--inputs",
        default="text",
        choices=INPUTS,
        help="text (default): token ids by rank-frequency as in text, padded rows (left and right, with "
        "attention_mask) and packed documents (position_ids restarting), as training jobs feed; uniform: the old "
        "layout (uniform ids, full unpadded rows, one document per row)",
    )
    add_filter(p, "models")
    add_limit(p, "models")
    p.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        metavar="K",
        help=f"optimizer steps per run (default {DEFAULT_STEPS}; {FULL_STEPS} at --size full)",
    )
    add_compile_backend(p, default=None, extra_help="; 'none' skips the compiled run")
    add_dtype(p, "fp32")
    p.add_argument(
        "--noise-seeds",
        type=nonneg_int,
        default=NOISE_SEEDS,
        metavar="N",
        help=f"trusted runs under N more seeds measure the precision's noise per tensor "
        f"(default {NOISE_SEEDS}; 0: the trusted run of the case's seed only)",
    )
    p.add_argument(
        "--module-check",
        default="auto",
        choices=["auto", "on", "off"],
        help="judge every module on its own too, forward and backward, on the inputs the device gave it "
        "(eager replay and each module compiled alone; default auto: on, off on lazy devices such as "
        "PyTorch/XLA, where each module's replay is its own graph compile)",
    )
    add_case_budget(p, None, old=["--timeout"], default_note=f"{DEFAULT_TIMEOUT:g}; --size full: {FULL_TIMEOUT:g}")
    p.add_argument(
        "--baseline",
        default=None,
        metavar="BUNDLE",
        help="compare curves and outputs with this exported run (bringup export)",
    )
    add_seed(p, 0)
    hub_flags.add_arguments(p)
