"""A zoo case from a model entry: `Entry` (what a source lists) and `make_case` (the tiny case's params, written
exactly as stored runs have them: case ids stay stable). Used by planning (zoo/plan.py) and the Hub sweep
(zoo/sweep.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.case import Case
from bringup.zoo.args import FULL_BATCH, FULL_SEQ, NOISE_SEEDS, ZooOptions

# The worker's entry of a tiny case. Runs stored before the zoo was split name "bringup.zoo.suite:run_model",
# which stays importable (zoo/suite.py), so `--resume` of such a run still finds it.
ENTRY = "bringup.zoo.run:run_model"
FULL_ENTRY = "bringup.zoo.full:run_full"


@dataclass(frozen=True)
class Entry:
    source: str  # hf | timm | fn | hf-json | hub (a Hub id) | hub-top (a catalogue id)
    model: str  # model type, timm name, module:function or (absolute) config path
    task: str = ""
    label: str = ""  # the name as the user wrote it (a config path from a FILE), if not `model`

    @property
    def name(self) -> str:
        return self.label or self.model


@dataclass(frozen=True)
class TinyRun:
    """How every tiny case of one plan runs, built once from the zoo's options (or the quick / `bringup run`
    defaults): `module_check` None is auto; `inputs` how a text model is fed (bringup/models/batches.py);
    `batch` / `seq` 0: the tiny defaults."""

    dtype: str
    steps: int
    backend: str
    timeout: float
    seed: int = 0
    noise_seeds: int = NOISE_SEEDS
    module_check: bool | None = None
    inputs: str = "text"
    batch: int = 0
    seq: int = 0


def make_case(e: Entry, run: TinyRun, baseline: Any = None) -> Case:
    """One tiny case: `baseline` is a BaselineIndex (zoo/baseline.py) or None."""
    params: dict[str, Any] = {
        "source": e.source,
        "model": e.model,
        "task": e.task,
        "dtype": run.dtype,
        "steps": run.steps,
        "backend": run.backend,
        "seed": run.seed,
        "inputs": run.inputs,
    }
    if run.batch:
        params["batch"] = run.batch
    if run.seq:
        params["seq"] = run.seq
    if run.noise_seeds != NOISE_SEEDS:  # the default stays out of the params: existing case ids stay stable
        params["noise_seeds"] = run.noise_seeds
    if run.module_check is not None:  # auto stays out of the params
        params["module_check"] = run.module_check
    if baseline is not None:
        params["baseline"] = baseline.entry_for(e.name, run.dtype, run.steps)
    # Pooled, not isolated: a fresh process per model would re-import torch + transformers (~5-10 s)
    # and start inductor's compile workers cold every time. What a model could leak into the next
    # case is reset per case (dynamo caches and counters, seeds, peak memory); a hang, segfault or
    # OOM still costs only its own case (the runner replaces the worker).
    return Case("zoo", e.name, params, ENTRY, budget_s=run.timeout, isolated=False)


@dataclass(frozen=True)
class FullRun:
    """How every --size full / --full-top case of one plan runs: precision, steps, compile backend, what judges it
    (--reference) and the zoo's options (seed, batch, seq, --nproc, --device-memory)."""

    dtype: str
    steps: int
    backend: str
    reference: str
    opts: ZooOptions


def full_params(e: Entry, run: FullRun, weights: str, **extra: Any) -> dict[str, Any]:
    """A --size full / --full-top case's params (zoo/full.py), written as stored runs have them: the run-wide
    ones from the command line (seed, batch, seq, --nproc and --device-memory when given), then `extra`
    (`e.label` is not written: the case's name is the caller's)."""
    opts = run.opts
    batch, seq = opts.batch or FULL_BATCH, opts.seq or FULL_SEQ
    params: dict[str, Any] = {
        "source": e.source,
        "model": e.model,
        "task": e.task,
        "dtype": run.dtype,
        "steps": run.steps,
        "backend": run.backend,
        "seed": opts.seed,
        "size": "full",
        "batch": batch,
        "seq": seq,
        "weights": weights,
        "reference": run.reference,
        **extra,
    }
    if opts.nproc > 1:  # FSDP2 over N ranks when one device is too small (zoo/fsdp.py)
        params["nproc"] = int(opts.nproc)
    if opts.device_memory:
        params["device_memory_gib"] = float(opts.device_memory)
    return params
