"""zoo's command-line face: its one-line help, its place in `bringup --help` and its options.

torch-free on purpose: `bringup --help`, `bringup zoo --help` and a mistyped option build the parser from
this module alone (bringup.api.BUILTIN_ARGS), without importing the suite (and torch).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bringup.api import Tool
from bringup.compile_backend import add_compile_backend, check_compile_backend
from bringup.errors import BadInput, user_regex
from bringup.hub import flags as hub_flags
from bringup.options import (
    KILL_LIMIT,
    CommandOptions,
    add_case_budget,
    add_dtype,
    add_options,
    add_seed,
    canonical_dtype,
    filter_flag,
    flag,
    limit_flag,
    measured,
    nonneg_int,
    not_measured,
    positive_float,
    positive_int,
    vocab,
)

if TYPE_CHECKING:
    from bringup.device import Device

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


# tiny models' --batch / --seq: a float64 reference and the module check hold every activation of a step on the
# host; beyond these a tiny case stops being tiny (MIN_TINY_SEQ: a padded row keeps a document of >= 4 tokens)
MAX_TINY_BATCH, MIN_TINY_SEQ, MAX_TINY_SEQ = 16, 8, 4096
MAX_NOISE_SEEDS = 16
HUB = "Hub sweeps (--source hub-search:QUERY | hub-list:FILE; docs/hub.md)"  # the Hub options' --help group
SOURCE_HELP = (
    "hf-causal (default: the 196 causal-LM types) | hf-all (every task mapping) | timm | "
    "hub-top (the shipped catalogue of widely used Hub models) | hub:ORG/NAME[@REV][,...] (Hub ids, "
    "through the Hugging Face cache; HF_HUB_OFFLINE respected) | hub-search:[TEXT][,library=L]"
    "[,task=T][,author=A][,sort=downloads|likes] / hub-list:FILE (a Hub sweep: one case per distinct "
    "signature, the verdict for every id; docs/hub.md) | dynamo:huggingface / dynamo:timm (PyTorch's "
    "dynamo benchmark suites' models, named as upstream names them: AlbertForMaskedLM) | hf-class:NAME[,...] "
    "(transformers classes, tiny) | csv:FILE.csv (the rows of an upstream expected-accuracy CSV) | FILE (one "
    "module:function, HF config JSON path or Hub id per line)"
)


def _regex(pattern: str | None) -> None:
    if pattern is not None:
        user_regex(pattern, "--filter")


def _not_fp64(dtype: str) -> None:
    if canonical_dtype(dtype) == "fp64":
        raise BadInput(
            f"--dtype {dtype}: the zoo runs fp32, bf16, fp16, amp-bf16 or amp-fp16 (float64 is the reference)"
        )


@dataclass(frozen=True)
class ZooOptions(CommandOptions):
    """`bringup zoo`'s options: each field its flag, help, check and whether it changes what is measured (the
    parser is built from them: add_arguments). None: the size's default (--steps, --case-budget, --batch, --seq),
    resolved by `resolved()`, never written back. `check` and `check_device` refuse bad input where the options
    are built (bringup/cli.py): planning (zoo/plan.py, zoo/sweep.py) only plans."""

    source: str = measured("hf-causal", flag=flag("--source", help=SOURCE_HELP))
    size: str = measured(
        "tiny",
        flag=flag(
            "--size",
            choices=SIZES,
            help="hub sources: tiny (default: the config shrunk, judged against float64) | full (the real "
            "config, meta-device init, memory preflight, judged against --reference)",
        ),
    )
    reference: str | None = measured(
        None,
        flag=flag(
            "--reference",
            choices=REFERENCES,
            help="--size full: cpu (a cpu fp32 run of the first steps; default without --baseline) | "
            "baseline (the --baseline bundle only; default with it) | none (compiled vs eager only)",
        ),
    )
    batch: int | None = measured(
        None,
        flag=flag(
            "--batch",
            type=positive_int,
            help=f"rows per batch (tiny: per microbatch; default {TINY_BATCH}; --size full {FULL_BATCH})",
        ),
    )
    seq: int | None = measured(
        None,
        flag=flag(
            "--seq",
            type=positive_int,
            help=f"tokens per row (default {TINY_SEQ}; --size full {FULL_SEQ}): raise it to judge long rows "
            "(rotary at large angles, softmax over long rows, sliding windows)",
        ),
    )
    inputs: str = measured(
        "text",
        flag=flag(
            "--inputs",
            choices=INPUTS,
            help="text (default): token ids by rank-frequency as in text, padded rows (left and right, with "
            "attention_mask) and packed documents (position_ids restarting), as training jobs feed; uniform: the "
            "old layout (uniform ids, full unpadded rows, one document per row)",
        ),
    )
    filter: str | None = measured(None, flag=filter_flag("models"), check=_regex)
    limit: int | None = measured(None, flag=limit_flag("models"))
    steps: int | None = measured(
        None,
        flag=flag(
            "--steps",
            type=positive_int,
            metavar="K",
            help=f"optimizer steps per run (default {DEFAULT_STEPS}; {FULL_STEPS} at --size full)",
        ),
    )
    compile_backend: str | None = measured(
        None, flag=vocab(add_compile_backend, extra_help="; 'none' skips the compiled run")
    )
    dtype: str = measured("fp32", flag=vocab(add_dtype), check=_not_fp64)
    noise_seeds: int = measured(
        NOISE_SEEDS,
        "the noise a correct run has, which every tensor's bound is set from",
        flag=flag(
            "--noise-seeds",
            type=nonneg_int,
            metavar="N",
            help=f"trusted runs under N more seeds measure the precision's noise per tensor "
            f"(default {NOISE_SEEDS}; 0: the trusted run of the case's seed only)",
        ),
    )
    module_check: str = measured(
        "auto",
        flag=flag(
            "--module-check",
            choices=["auto", "on", "off"],
            help="judge every module on its own too, forward and backward, on the inputs the device gave it "
            "(eager replay and each module compiled alone; default auto: on, off on lazy devices such as "
            "PyTorch/XLA, where each module's replay is its own graph compile)",
        ),
    )
    case_budget: float | None = not_measured(
        None,
        KILL_LIMIT,
        flag=vocab(
            add_case_budget, old=["--timeout"], default_note=f"{DEFAULT_TIMEOUT:g}; --size full: {FULL_TIMEOUT:g}"
        ),
    )
    baseline: str | None = measured(
        None,
        flag=flag(
            "--baseline", metavar="BUNDLE", help="compare curves and outputs with this exported run (bringup export)"
        ),
    )
    seed: int = measured(0, flag=vocab(add_seed))
    hub_index: str | None = not_measured(
        None,
        "a cache of the Hub's listings and configs",
        flag=flag(
            "--hub-index",
            group=HUB,
            metavar="FILE",
            help=f"the Hub index: listings and fetched configs (resumable, exportable with `bringup hub "
            f"export`); default {hub_flags.INDEX_NAME} beside --db",
        ),
    )
    hub_workers: int = not_measured(
        hub_flags.DEFAULT_WORKERS,
        "concurrent config fetches",
        flag=flag(
            "--hub-workers",
            group=HUB,
            type=positive_int,
            metavar="N",
            help=f"concurrent config fetches (default {hub_flags.DEFAULT_WORKERS})",
        ),
    )
    hub_rate: str | None = not_measured(
        None,
        "requests per window to the Hub",
        flag=flag(
            "--hub-rate",
            group=HUB,
            metavar="API,RESOLVE",
            help=f"requests per 5 minutes to the Hub's API and /resolve/ (default {hub_flags.DEFAULT_API},"
            f"{hub_flags.DEFAULT_RESOLVE}: 90%% of a free token's {hub_flags.FREE_API},{hub_flags.FREE_RESOLVE})",
        ),
        check=hub_flags.parse_limits,
    )
    hub_refresh: bool = not_measured(
        False,
        "the same query listed again: the Hub as it is now, not another sweep",
        flag=flag(
            "--hub-refresh",
            group=HUB,
            action="store_true",
            help="list the query again and fetch every id whose config failed before",
        ),
    )
    full_top: int = measured(
        0,
        flag=flag(
            "--full-top",
            group=HUB,
            type=nonneg_int,
            metavar="K",
            help="also run the K most downloaded signatures at real size (meta init, memory preflight)",
        ),
    )
    nproc: int = measured(
        1,
        flag=flag(
            "--nproc",
            group=HUB,
            type=positive_int,
            metavar="N",
            help="--size full / --full-top: a model that does not fit one device is sharded with FSDP2 over "
            "N ranks (default 1: reported unsupported with the ranks it would need)",
        ),
    )
    device_memory: float | None = measured(
        None,
        "the preflight's memory: which models run, which are unsupported",
        flag=flag(
            "--device-memory",
            group=HUB,
            type=positive_float,
            metavar="GIB",
            help="--size full / --full-top: the preflight's free device memory (default: what the device "
            "reports); e.g. plan for a smaller device",
        ),
    )

    def hub_fetch(self, db: str | None) -> hub_flags.HubFetch:
        """What a Hub sweep's fetch reads (bringup/hub/plan.py); the index beside `db` (the global --db)."""
        return hub_flags.HubFetch(
            self.source, self.limit, self.filter, self.hub_index, self.hub_workers, self.hub_rate, self.hub_refresh, db
        )

    @property
    def sweep(self) -> bool:
        """A Hub sweep source (hub-search:QUERY, hub-list:FILE)."""
        return self.source.startswith(hub_flags.SWEEP_PREFIXES)

    def resolved(self) -> ZooOptions:
        """These options with the size's defaults where one was not given (--steps, --case-budget; at --size
        full --batch and --seq too): a copy, the options as given are never changed."""
        full = self.size == "full"
        return dataclasses.replace(
            self,
            steps=self.steps if self.steps is not None else (FULL_STEPS if full else DEFAULT_STEPS),
            case_budget=self.case_budget
            if self.case_budget is not None
            else (FULL_TIMEOUT if full else DEFAULT_TIMEOUT),
            batch=FULL_BATCH if full and self.batch is None else self.batch,
            seq=FULL_SEQ if full and self.seq is None else self.seq,
        )

    def check(self) -> None:
        """What the options say together, checked before any work (BadInput: one line, exit 2)."""
        opts = self.resolved()
        _check_sweep(opts)
        if opts.size == "full":
            _check_full(opts)
        else:
            _check_tiny(opts)
        if opts.steps is None or opts.steps < 1:
            raise BadInput(f"--steps must be >= 1, got {opts.steps}")
        if opts.limit is not None and opts.limit < 1:
            raise BadInput(f"--limit must be >= 1, got {opts.limit}")
        if not (opts.case_budget is not None and opts.case_budget > 0 and math.isfinite(opts.case_budget)):
            raise BadInput(f"--case-budget must be a positive number of seconds, got {opts.case_budget}")

    def check_device(self, device: Device) -> None:
        """--nproc within the device's units, and the compile backend (--compile-backend, else the device's)
        one torch.compile knows here (plugins imported)."""
        check_ranks(self.nproc, device)
        compile_backend(self.compile_backend or device.default_compile_backend)


def _check_sweep(opts: ZooOptions) -> None:
    """Hub-sweep and full-size options that make no sense elsewhere, and bad values."""
    if opts.full_top and not opts.sweep:
        raise BadInput("--full-top needs a Hub sweep source (hub-search:QUERY or hub-list:FILE)")
    if (opts.full_top or 0) < 0:
        raise BadInput(f"--full-top must be >= 0, got {opts.full_top}")
    if opts.nproc < 1:
        raise BadInput(f"--nproc must be >= 1, got {opts.nproc}")
    mem = opts.device_memory
    if mem is not None and not (mem > 0 and math.isfinite(mem)):
        raise BadInput(f"--device-memory must be a positive number of GiB, got {mem}")
    full = opts.size == "full" or bool(opts.full_top)
    if not full and (opts.nproc > 1 or mem is not None):
        raise BadInput(
            "--nproc and --device-memory apply to full-size runs (--size full, or --full-top K in a Hub "
            "sweep); tiny models run on one device"
        )
    batch = FULL_BATCH if opts.batch is None else opts.batch
    seq = FULL_SEQ if opts.seq is None else opts.seq
    if full and (batch < 1 or seq < 2):
        raise BadInput(f"--batch must be >= 1 and --seq >= 2, got {batch} and {seq}")
    if full and opts.nproc > 1 and batch % opts.nproc:
        raise BadInput(
            f"--batch {batch} does not split over --nproc {opts.nproc} ranks (each rank takes batch / nproc "
            f"rows of the global batch): use a multiple of {opts.nproc}"
        )


def _check_full(opts: ZooOptions) -> None:
    """--size full: not with a Hub sweep (--full-top is its form there); --reference baseline needs its bundle."""
    if opts.sweep:
        raise BadInput(
            "--size full with a Hub sweep: use --full-top K (the K most downloaded signatures at "
            "real size, beside the tiny sweep)"
        )
    if (opts.reference or ("baseline" if opts.baseline else "cpu")) == "baseline" and not opts.baseline:
        raise BadInput("--reference baseline needs --baseline BUNDLE (an exported full-size run of the same ids)")
    if opts.reference == "none" and (opts.compile_backend or "").lower() == "none" and not opts.baseline:
        raise BadInput(
            "--reference none with --compile-backend none and no --baseline: nothing would judge the run's numerics"
        )


def _check_tiny(opts: ZooOptions) -> None:
    """Tiny models: judged against float64 on cpu (no --reference but with --full-top), at tiny shapes."""
    if opts.reference is not None and not (opts.sweep and opts.full_top):
        raise BadInput(
            "--reference applies to --size full (and --full-top); tiny models are judged against float64 on cpu"
        )
    batch, seq = opts.batch, opts.seq
    if batch is not None and not 1 <= batch <= MAX_TINY_BATCH:
        raise BadInput(f"--batch must be 1..{MAX_TINY_BATCH} rows for tiny models (default {TINY_BATCH}), got {batch}")
    if seq is not None and not MIN_TINY_SEQ <= seq <= MAX_TINY_SEQ:
        raise BadInput(
            f"--seq must be {MIN_TINY_SEQ}..{MAX_TINY_SEQ} tokens for tiny models (default {TINY_SEQ}), got {seq}"
        )
    if opts.noise_seeds is None or not 0 <= opts.noise_seeds <= MAX_NOISE_SEEDS:
        raise BadInput(f"--noise-seeds must be 0..{MAX_NOISE_SEEDS}, got {opts.noise_seeds}")


def check_ranks(nproc: int, device: Device) -> None:
    """--nproc N on a device with fewer than N units (cpu ranks are processes: any N): BadInput before any work."""
    if nproc > 1 and not device.is_cpu and nproc > device.count():
        raise BadInput(f"--nproc {nproc}: only {device.count()} {device.type} device(s) here")


def compile_backend(name: str) -> str:
    """A compile backend torch.compile knows here, or "none" (no compiled run)."""
    return check_compile_backend(name, allow_none=True)


OPTIONS = ZooOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, ZooOptions)
