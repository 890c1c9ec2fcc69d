"""The training loop of one process (the whole case, or one rank of --nproc N): build the model on the
device, apply the mode, then time each optimizer step. Step 1 is timed on the wall clock (it holds
the compile); steady steps with the device's timer (torch.Event where the backend has one).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from bringup.device import Device
from bringup.errors import BadInput
from bringup.models import lm
from bringup.precision import Precision, parse_precision
from bringup.train import compile_metrics, modes
from bringup.train.spec import TrainSpec

DATA_SEED = 1234  # synthetic data seed (rank r uses DATA_SEED + r)


class StageError(Exception):
    """An exception raised in one stage of the case: `build`, `first_step` (compile), `steps`."""

    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(f"{stage}: {type(exc).__name__}: {exc}")
        self.stage = stage
        self.exc = exc


@dataclass
class TrainOutcome:
    losses: list[float]  # per step (all ranks' mean with --nproc)
    step_s: list[float]  # per step; step 1 = wall incl. compile
    setup_s: float  # model build + mode + data on the device
    params: int
    flops_per_token: int | None  # at spec.seq
    peak_mem_bytes: int | None
    first: dict[str, Any]  # compile metrics after step 1
    final: dict[str, Any]  # compile metrics at the end
    compiled_s: list[float] = field(default_factory=list)  # per step: seconds compiling (recompiles after 1)
    flops_per_token_at: dict[int, int] = field(default_factory=dict)  # per sequence length of a --seqs schedule
    fallback_ops: dict[str, int] | None = None  # None: not checked (cpu, or no detector)
    host_reads: dict[str, int] | None = None  # the model's own .item()-style reads in one step (lazy: graph cuts)
    memory_gap: str | None = None  # why peak_mem_bytes is None (the device layer's reason)
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # build_s, apply_mode_s (setup_s's parts)
    rank_first_s: list[float] = field(default_factory=list)  # each rank's compile s (eager: step 1)

    @property
    def ttfs_s(self) -> float:
        return self.step_s[0]

    def steady_s(self, warmup: int) -> float:
        return float(statistics.median(self.step_s[warmup:]))

    def window(self, spec: TrainSpec) -> tuple[float, float | None, float | None]:
        """The steady window (steps after the warm-up): (steady step s, tokens/s, FLOP/s over all ranks).
        One sequence length: the median step, tokens per step / that. A --seqs schedule: the window's
        steps have several lengths, so its mean step, and its tokens (and FLOPs, per length) over its
        summed time."""
        steady = self.steady_s(spec.warmup)
        if not spec.seqs:
            tok_s = spec.tokens_per_step / steady if steady > 0 else None
            return steady, tok_s, (self.flops_per_token * tok_s if tok_s and self.flops_per_token else None)
        steps = range(spec.warmup + 1, len(self.step_s) + 1)
        wall = sum(self.step_s[spec.warmup :])
        if wall <= 0:
            return steady, None, None
        tokens = sum(spec.tokens_at(i) for i in steps)
        flops = (
            sum(spec.tokens_at(i) * self.flops_per_token_at[spec.seq_at(i)] for i in steps)
            if self.flops_per_token_at
            else None
        )
        return wall / len(steps), tokens / wall, (flops / wall if flops else None)


def shard(model: torch.nn.Module, device: Device, world: int) -> torch.nn.Module:
    """FSDP2 as TorchTitan applies it: fully_shard each transformer block, then the root."""
    mesh = init_device_mesh(device.type, (world,))
    for block in lm.decoder_layers(model):
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def prepare(
    model: torch.nn.Module, spec: TrainSpec, device: Device, world: int, mode_kw: dict[str, Any] | None = None
) -> torch.nn.Module:
    """Apply the mode (and FSDP2 when world > 1). Regional: blocks compiled first, then sharded (as
    TorchTitan does); full compile: shard first, then compile the sharded model. nested / aot
    (train/modes.py): one rank only (the suite refuses them with --nproc); `mode_kw` goes to AOTModel."""
    dyn = spec.compile_dynamic
    if spec.mode == "nested":
        return modes.nested_regions(model, spec.backend, dyn)
    if spec.mode == "aot":
        return modes.AOTModel(model, spec.backend, **(mode_kw or {}), dynamic=dyn)
    if world == 1:
        return lm.apply_mode(model, spec.mode, spec.backend, dyn)
    if spec.mode == "regional":
        return shard(lm.apply_mode(model, "regional", spec.backend, dyn), device, world)
    return lm.apply_mode(shard(model, device, world), spec.mode, spec.backend, dyn)


def _stage(name: str) -> Callable[[BaseException], StageError]:
    return lambda e: StageError(name, e)


@dataclass
class _Built:
    """The case built on the device: model (mode applied), optimizer, precision, batches, counts."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    prec: Precision
    scaler: Any
    batches: list[torch.Tensor]
    params: int
    flops: int | None
    flops_at: dict[int, int]
    setup_s: float
    apply_mode_s: float

    def step(self, model: torch.nn.Module, opt: torch.optim.Optimizer, tokens: torch.Tensor) -> torch.Tensor:
        return lm.train_step(model, opt, tokens, self.prec, self.scaler)


@dataclass
class _Steps:
    """What the timed steps left: per-step losses and times, step 1's compile metrics, per-step compile s."""

    losses: list[torch.Tensor]
    times: list[float]
    first: dict[str, Any]
    compiled: list[float]


def train(
    spec: TrainSpec,
    device: Device,
    *,
    rank: int = 0,
    world: int = 1,
    first_step: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    after_first: Callable[[], None] | None = None,
    check_fallbacks: bool = True,
    mode_kw: dict[str, Any] | None = None,
) -> TrainOutcome:
    """Run spec.steps optimizer steps. Raises StageError naming the stage that failed."""
    b = _build(spec, device, rank, world, mode_kw)
    st = _steps(spec, device, b, first_step, after_first)
    peak = device.peak_memory()
    memory_gap = device.memory_gap() if peak is None else None
    final = compile_metrics.snapshot()
    # This rank's own step-1 work: its compile seconds (the step's wall time is the same on every rank:
    # the collectives make the others wait for the slowest), or step 1 itself in eager.
    own_first = compile_metrics.breakdown(st.first["times"])["total_s"] if spec.compiled else st.times[0]
    fallback_ops, notes, host_reads = None, [], None
    if check_fallbacks and not device.is_cpu:
        fallback_ops, note, host_reads = _fallbacks(b.model, b.opt, b.batches[-1], device, b.step)
        notes += [note] if note else []
    losses, step_s, rank_first, peak = _over_ranks(st, device, rank, world, own_first, peak)
    return TrainOutcome(
        losses=losses,
        step_s=step_s,
        setup_s=b.setup_s,
        params=b.params,
        flops_per_token=b.flops,
        peak_mem_bytes=peak,
        first=st.first,
        final=final,
        fallback_ops=fallback_ops,
        host_reads=host_reads,
        notes=notes,
        rank_first_s=rank_first,
        compiled_s=st.compiled,
        flops_per_token_at=b.flops_at,
        phases={"build_s": b.setup_s - b.apply_mode_s, "apply_mode_s": b.apply_mode_s},
        memory_gap=memory_gap,
    )


def _build(spec: TrainSpec, device: Device, rank: int, world: int, mode_kw: dict[str, Any] | None) -> _Built:
    """Model, mode, optimizer and this rank's batches on the device (the `build` stage)."""
    t0 = time.perf_counter()
    prec = parse_precision(spec.dtype)  # amp-*: fp32 params (and AdamW state), autocast compute
    try:
        model = lm.build_model(spec.model, list(spec.overrides), device.torch_device, prec.param_dtype, seed=spec.seed)
        params, _ = lm.param_counts(model)
        try:
            flops: int | None = lm.flops_per_token(model, spec.seq)
            flops_at = {s: lm.flops_per_token(model, s) for s in sorted(set(spec.seqs))}
        except BadInput:
            flops, flops_at = None, {}  # a user model without a transformers config: no FLOPs, no MFU
        vocab = lm.vocab_size(model)
        t_mode = time.perf_counter()
        model = prepare(model, spec, device, world, mode_kw)
        apply_mode_s = time.perf_counter() - t_mode
        opt = torch.optim.AdamW(model.parameters(), lr=spec.lr)
        scaler = prec.grad_scaler(device.type)  # amp-fp16 only
        data = lm.synthetic_batches(vocab, spec.batch, spec.seq, spec.steps, DATA_SEED + rank, learnable=True)
        # a schedule of sequence lengths (--seqs): step i keeps the first seq_at(i) tokens of its batch. Each a
        # tensor of its own with standard strides, as a loader gives them: views into one buffer differ in
        # storage offset and row stride (a (1, 24) slice of a (1, 32) row keeps stride 32), and with dynamic
        # shapes dynamo guarded on both and recompiled (measured), which no real job would see.
        batches = [
            b[:, : spec.seq_at(i)].clone(memory_format=torch.contiguous_format).to(device.torch_device)
            for i, b in enumerate(data, 1)
        ]
        device.synchronize()
        device.reset_peak_memory()
    except Exception as e:
        raise StageError("build", e) from e
    setup_s = time.perf_counter() - t0
    return _Built(model, opt, prec, scaler, batches, params, flops, flops_at, setup_s, apply_mode_s)


def _steps(
    spec: TrainSpec,
    device: Device,
    b: _Built,
    first_step: Callable[[], contextlib.AbstractContextManager[Any]],
    after_first: Callable[[], None] | None,
) -> _Steps:
    """Step 1 on the wall clock (it holds the compile: the `first_step` stage), then the steady steps
    on the device's timer (the `steps` stage). Each timed step hands its loss and the model its
    optimizer updated to the timer, which has the device compute them before the clock stops (a lazy
    device runs nothing nobody holds)."""
    losses: list[torch.Tensor] = []
    times: list[float] = []
    try:
        with first_step():
            wall = device.timer(wall=True)
            wall.start()
            losses.append(b.step(b.model, b.opt, b.batches[0]))
            times.append(wall.stop(losses[-1], b.model, b.opt))
    except Exception as e:
        raise StageError("first_step", e) from e
    first = compile_metrics.snapshot()
    compiled = [compile_metrics.compile_seconds(first["times"])] if spec.compiled else []
    compiled_so_far = compiled[0] if compiled else 0.0
    if after_first is not None:
        after_first()
    timer = device.timer()
    try:
        for tokens in b.batches[1:]:
            timer.start()
            losses.append(b.step(b.model, b.opt, tokens))
            times.append(timer.stop(losses[-1], b.model, b.opt))
            if spec.compiled:  # outside the timed step: what this step spent compiling (a recompile)
                # the difference of two running totals, rounded as they are: a difference against a
                # sum of rounded parts leaves a float's last bit (5e-17 s), which read as a recompile
                now = compile_metrics.compile_seconds()
                compiled.append(round(now - compiled_so_far, 4))
                compiled_so_far = now
    except Exception as e:
        raise StageError("steps", e) from e
    return _Steps(losses, times, first, compiled)


def _over_ranks(
    st: _Steps, device: Device, rank: int, world: int, own_first: float, peak: int | None
) -> tuple[list[float], list[float], list[float], int | None]:
    """Losses, step times, each rank's step-1 work and the peak memory, over all ranks: the mean loss;
    a step takes as long as its slowest rank; the largest peak."""
    loss_t = torch.stack(st.losses).float()
    step_t = torch.tensor(st.times, dtype=torch.float64)
    rank_first = [own_first]
    if world > 1:
        loss_t = loss_t.to(device.torch_device)
        dist.all_reduce(loss_t)
        loss_t /= world
        step_t = step_t.to(device.torch_device)
        firsts = torch.zeros(world, dtype=torch.float64, device=step_t.device)
        firsts[rank] = own_first
        dist.all_reduce(firsts)  # each rank's own compile, which the MAX of the step times below hides
        rank_first = [float(x) for x in firsts.cpu()]
        dist.all_reduce(step_t, op=dist.ReduceOp.MAX)
        mem = torch.tensor([peak or 0], dtype=torch.float64, device=step_t.device)
        dist.all_reduce(mem, op=dist.ReduceOp.MAX)
        peak = int(mem.item()) or peak
    return [float(x) for x in loss_t.cpu()], [float(x) for x in step_t.cpu()], rank_first, peak


def _fallbacks(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    tokens: torch.Tensor,
    device: Device,
    step: Callable[[torch.nn.Module, torch.optim.Optimizer, torch.Tensor], torch.Tensor],
) -> tuple[dict[str, int] | None, str, dict[str, int] | None]:
    """One extra (untimed) step under the CPU-fallback detector: ({op: calls} that ran via the fallback,
    a note, {op: calls} of the step's own host reads). The window holds the model's step and nothing of
    the harness: the loss is read (and the device drained) after it closes."""
    try:
        from bringup.checks.fallbacks import FallbackDetector  # lazy: optional
    except ImportError as e:
        return None, f"fallbacks not checked: {e}", None
    try:
        with FallbackDetector(device) as det:
            loss = step(model, opt, tokens)
        device.materialize(loss, model)
        rep = det.report()
        return dict(rep.fallback_ops), "", dict(rep.host_reads)
    except Exception as e:
        return None, f"fallbacks not checked: {type(e).__name__}: {e}".splitlines()[0][:200], None
