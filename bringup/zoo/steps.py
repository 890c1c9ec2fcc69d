"""The zoo's training step, one loop for every size: the tiny run (`train_run`: SGD, step 0's tensors kept for
parity), the full-size run (zoo/full.py: AdamW, per-step series) and each FSDP2 rank (zoo/fsdp.py) all train
through `train_steps`, with the helpers they share (a batch cast to the run's device and dtype, dropout off).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from bringup.case import CaseResult, Status
from bringup.device import Device
from bringup.models import batches
from bringup.models.kept_fp32 import floating_state, fp32_kept
from bringup.precision import PRECISIONS, Precision, default_dtype, parse_precision

LR = 0.5  # tiny runs, SGD: big enough that a tiny random-init model's loss moves visibly in a few steps
MAX_GRAD_NORM = 1.0  # clipped like HF Trainer's default: keeps the few steps out of chaotic regimes
FULL_LR = 1e-4  # full size (zoo/full.py, zoo/fsdp.py), AdamW, as people train: K steps stay out of chaotic regimes

StepFn = Callable[[dict[str, Any]], tuple[torch.Tensor, torch.Tensor | None]]


@dataclass(frozen=True)
class StepOutputs:
    """A step's loss and logits, and the logits' positions the job defines (`positions`, bool over the logits'
    first two dimensions: batches.output_positions; None: every position is the job's). A pad's output is what
    the kernel chose (a fully masked attention row gives 0 on PyTorch's SDPA, a uniform row on a kernel that adds
    a finite minimum): no loss reads it, so a verdict reads it for finiteness only (design.md, "Inputs")."""

    loss: torch.Tensor
    logits: torch.Tensor | None
    positions: torch.Tensor | None = None

    def on_cpu(self) -> StepOutputs:
        """The same outputs detached on the host (where a boolean selection costs a lazy device no graph)."""
        cpu = torch.device("cpu")
        logits = None if self.logits is None else self.logits.detach().to(cpu)
        positions = None if self.positions is None else self.positions.to(cpu)
        return StepOutputs(self.loss.detach().to(cpu), logits, positions)

    def defined(self) -> torch.Tensor | None:
        """The logits at the positions the job defines (rows x seq flattened to the positions kept)."""
        if self.logits is None or self.positions is None:
            return self.logits
        return self.logits[self.positions]

    def pads(self) -> torch.Tensor | None:
        """The logits at positions no loss reads (None: there are none)."""
        if self.logits is None or self.positions is None or bool(self.positions.all()):
            return None
        return self.logits[~self.positions]

    def moments(self) -> list[torch.Tensor]:
        """count, sum and sum of squares (float64, on the device: no host sync) of the defined logits."""
        dev = self.loss.device
        if self.logits is None:
            return [torch.zeros((), dtype=torch.float64, device=dev)] * 3
        x = self.logits.detach().to(torch.float64)
        if self.positions is None:
            return [torch.tensor(float(x.numel()), dtype=torch.float64, device=x.device), x.sum(), (x * x).sum()]
        w = self.positions.to(torch.float64)
        w = w.reshape(*w.shape, *([1] * (x.dim() - w.dim()))).expand_as(x)
        return [w.sum(), (x * w).sum(), (x * x * w).sum()]


def fail(r: CaseResult, status: Status, reason: str) -> CaseResult:
    """Fail `r` with `status`; the first failure names the case (later ones leave it as it is)."""
    if r.status is Status.PASS:
        r.status, r.reason = status, reason
    return r


def cast_batch(
    batch: dict[str, Any], device: torch.device, dtype: torch.dtype, round_to: torch.dtype | None = None
) -> dict[str, Any]:
    """The batch on `device`, its floating tensors in `dtype` (first rounded through `round_to`)."""

    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            if v.is_floating_point():
                if round_to is not None:
                    v = v.to(round_to)
                return v.to(device=device, dtype=dtype)
            return v.to(device)
        if isinstance(v, dict):
            return {k: one(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(one(x) for x in v)
        return v

    return {k: one(v) for k, v in batch.items()}


def no_dropout(model: torch.nn.Module) -> None:
    """Dropout draws different masks in each run (and compiled code draws them differently again):
    parity needs the same function in every run. Configs are built with dropout 0 (models/tiny_config.py);
    this catches nn.Dropout modules a user model or a fixed-size config still has."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0


def experts_impl(model: torch.nn.Module, impl: str | None) -> None:
    """transformers' MoE layers dispatch on config._experts_implementation at call time; the default
    (grouped_mm) has no float64 kernel, so the float64 reference runs the eager per-expert loop: the
    same mathematics, another code path. Other runs get back the model's own choice."""
    seen: set[int] = set()
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is None or id(cfg) in seen or not hasattr(cfg, "_experts_implementation"):
            continue
        seen.add(id(cfg))
        own = cfg.__dict__.setdefault("_bringup_own_experts_impl", cfg._experts_implementation)
        cfg._experts_implementation = impl or own


def step_fn(
    forward: Callable[[Any, dict[str, Any]], Any],
    loss: Callable[[Any, dict[str, Any]], torch.Tensor],
    logits: Callable[[Any], torch.Tensor | None],
    model: Any,
    prec: Precision,
    device_type: str,
    backend: str | None = None,
) -> StepFn:
    """batch -> (loss, logits) under the precision's autocast; compiled with `backend` when given."""

    def fwd_loss(b: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        with prec.autocast(device_type):
            out = forward(model, b)
            return loss(out, b), logits(out)

    return fwd_loss if backend is None else torch.compile(fwd_loss, backend=backend)


@dataclass(frozen=True)
class Feed:
    """What the loop trains on: `steps` batches (batch_at(i)), cast to `dtype` on `device` (first rounded
    through `round_to`: cast_batch)."""

    batch_at: Callable[[int], Any]
    steps: int
    device: torch.device
    dtype: torch.dtype
    round_to: torch.dtype | None = None


@dataclass(frozen=True)
class StepHooks:
    """What a caller adds to the loop. `step_context` wraps each step's forward and backward (not the optimizer),
    `first_step` step 0's too (a compile phase, a module recording); `sync_first` makes the device compute step 0
    before its clock stops (a lazy device: one graph). `at_step0(outputs)` sees step 0 before clipping,
    `after_clip(outputs, total_grad_norm)` every step."""

    step_context: Callable[[], AbstractContextManager[Any]] | None = None
    first_step: Callable[[], AbstractContextManager[Any]] | None = None
    sync_first: bool = False
    at_step0: Callable[[StepOutputs], None] | None = None
    after_clip: Callable[[StepOutputs, torch.Tensor], None] | None = None


def train_steps(
    model: torch.nn.Module,
    fn: StepFn,
    opt: torch.optim.Optimizer,
    feed: Feed,
    hooks: StepHooks = StepHooks(),
    scaler: Any = None,
    max_grad_norm: float = MAX_GRAD_NORM,
) -> tuple[float, float]:
    """The one training-step loop: `feed.steps` steps of batch -> forward + loss -> backward (scaled by a
    GradScaler when given, then unscaled: the grads kept and clipped are the true ones) -> clip to
    `max_grad_norm` -> optimizer step, with the caller's `hooks`. Returns (seconds, step 0's seconds)."""
    t0 = time.perf_counter()
    first = 0.0
    for i in range(feed.steps):
        b = cast_batch(feed.batch_at(i), feed.device, feed.dtype, feed.round_to)
        ts = time.perf_counter()
        outputs = _forward_backward(fn, b, opt, scaler, hooks.first_step if i == 0 else None, hooks.step_context)
        if i == 0:
            if hooks.sync_first:
                Device(feed.device.type, feed.device.index).materialize(outputs.loss, outputs.logits, model)
            first = time.perf_counter() - ts
            if hooks.at_step0 is not None:
                hooks.at_step0(outputs)
        gn = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_grad_norm)
        if hooks.after_clip is not None:
            hooks.after_clip(outputs, gn)
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0, first


def _forward_backward(
    fn: StepFn,
    b: dict[str, Any],
    opt: torch.optim.Optimizer,
    scaler: Any,
    first_step: Callable[[], AbstractContextManager[Any]] | None,
    step_context: Callable[[], AbstractContextManager[Any]] | None,
) -> StepOutputs:
    """One step's forward, loss and backward (scaled, then unscaled), inside the step's contexts."""
    with step_context() if step_context is not None else nullcontext():
        with first_step() if first_step is not None else nullcontext():
            loss, logits = fn(b)
            (loss if scaler is None else scaler.scale(loss)).backward()
            if scaler is not None:
                scaler.unscale_(opt)
    return StepOutputs(loss, logits, batches.output_positions(b, logits))


# ---- the tiny run ---------------------------------------------------------------------------------
@dataclass
class RunOut:
    """One training run: step-0 tensors (loss, logits, grads) and the K-step loss curve."""

    tensors: dict[str, torch.Tensor]
    curve: list[float]
    seconds: float = 0.0
    first_step_s: float = 0.0
    pads: torch.Tensor | None = None  # step 0's logits at positions no loss reads (judged finite only)


def finite_curve(c: list[float]) -> bool:
    return all(math.isfinite(x) for x in c)


def as_precision(p: Precision | torch.dtype | str) -> Precision:
    if isinstance(p, Precision):
        return p
    if isinstance(p, str):
        return parse_precision(p)
    return next(x for x in PRECISIONS.values() if not x.mixed and x.param_dtype == p)


def _load_init(
    model: torch.nn.Module,
    init: dict[str, torch.Tensor],
    device: torch.device,
    dtype: torch.dtype,
    round_to: torch.dtype | None,
) -> torch.nn.Module:
    """The model on `device` in `dtype`, its floating state first rounded through `round_to` (the run
    dtype): the float64 reference starts from exactly the weights the run holds. What a job loading the model in
    that dtype keeps in fp32 (fp32_kept) stays fp32 in the run, and is rounded through fp32 for the reference."""
    model.load_state_dict(init)
    kept = fp32_kept(model, round_to or dtype)
    # a kept tensor's value before the cast: init's (a copy: the run trains it in place), else the model's own
    # (a non-persistent buffer, kept fp32 by the run before)
    keep = {
        n: (init[n] if n in init else t.detach()).to(device=device, dtype=torch.float32, copy=True)
        for n, t in floating_state(model)
        if n in kept
    }
    model.to(device=device, dtype=dtype)
    with torch.no_grad():
        for name, t in floating_state(model):
            if name in keep:
                # the reference (float64) starts from the kept value; a run in a low dtype holds it in fp32
                t.data = keep[name].to(dtype) if dtype == torch.float64 else keep[name]
            elif round_to is not None and round_to != dtype:
                t.copy_(t.to(round_to).to(dtype))
    return model


class Float64Softmax(TorchFunctionMode):
    """The float64 reference's softmax stays float64 where the model asks for an fp32 one (transformers' eager
    attention: `softmax(scores, dtype=torch.float32)`, for low-precision stability). Cast to fp32, float64's
    mask minimum (-1.8e308) becomes -inf, and a query with every key masked (a left-padded row's pad queries, a
    pad run longer than a sliding window) turns NaN where fp32 and bf16 runs, whose minimum stays finite, get a
    uniform row; and the reference would round the probabilities to fp32."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if kwargs.get("dtype") == torch.float32 and getattr(func, "__name__", "") == "softmax":
            x = args[0] if args else kwargs.get("input")
            if isinstance(x, torch.Tensor) and x.dtype == torch.float64:
                kwargs = {**kwargs, "dtype": torch.float64}
        return func(*args, **kwargs)


def _to_float64(x: Any) -> Any:
    return torch.float64 if x == torch.float32 or x in ("torch.FloatTensor", "torch.float32") else x


class Float64Casts(TorchFunctionMode):
    """The float64 reference of a model whose code casts to fp32 and then mixes the result with its float64
    weights (inkling2's router: `F.linear(hidden.float(), self.weight)`, a weight transformers keeps in fp32 in
    every dtype), which cannot run in float64 as written: every cast to fp32 is a cast to float64 (`.float()`,
    `.to(torch.float32)`, `.type(...)`, a `dtype=torch.float32` argument), so the reference is float64
    throughout. Used only for such a model (zoo/run.py: prepare): every other reference keeps the fp32 its
    code asks for, as the bounds were measured."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = {k: _to_float64(v) if k == "dtype" else v for k, v in (kwargs or {}).items()}
        name = getattr(func, "__name__", "")
        if name == "float" and args and isinstance(args[0], torch.Tensor):
            return args[0].to(torch.float64)
        if name in ("to", "type") and args and isinstance(args[0], torch.Tensor):
            args = (args[0], *(_to_float64(a) if isinstance(a, (torch.dtype, str)) else a for a in args[1:]))
        return func(*args, **kwargs)


@contextmanager
def _default_dtype(dtype: torch.dtype, casts: bool = False) -> Iterator[None]:
    """The float64 reference also creates its own tensors (masks, `torch.full(finfo.min)`, position
    tables) in float64: some models build them with the default dtype, and keeps its softmax in float64
    (Float64Softmax); with `casts`, every cast to fp32 too (Float64Casts). Restored afterwards."""
    f64 = dtype == torch.float64
    with default_dtype(dtype), Float64Softmax() if f64 else nullcontext():
        with Float64Casts() if f64 and casts else nullcontext():
            yield


@dataclass(frozen=True)
class RunHow:
    """How train_run runs (its doc): the dtype the start state is rounded through, the compile backend, the
    first step's context factory, every step's, and the module check that records step 0."""

    round_to: torch.dtype | None = None
    backend: str | None = None
    on_first_step: Any = None
    step_context: Any = None
    module_check: Any = None


def train_run(
    built: Any,
    init: dict[str, torch.Tensor],
    batches: list[dict[str, Any]],
    device: torch.device,
    dtype: Precision | torch.dtype | str,
    how: RunHow = RunHow(),
) -> RunOut:
    """K SGD steps at a precision (a pure dtype, or mixed: fp32 weights, forward under autocast, fp16 with
    a GradScaler). Step 0's loss, logits and grads (unscaled) are kept (moved to cpu) for parity.
    `how.step_context` (a context-manager factory, e.g. a TorchDispatchMode) wraps each step's forward and
    backward, not the optimizer. `how.module_check` (checks/module_check.ModuleCheck, eager runs only)
    records step 0's module calls and replays them on the device, inside `step_context`."""
    prec = as_precision(dtype)
    if how.module_check is not None and how.backend is not None:
        raise ValueError("a module check records an eager run (hooks do not fire inside a compiled graph)")
    with _default_dtype(prec.param_dtype, getattr(built, "float64_casts", False)):
        return _train_run(built, init, batches, device, prec, how)


class _Step0:
    """What a tiny run keeps: step 0's loss, defined logits, pads and grads (on cpu), and every step's loss."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.tensors: dict[str, torch.Tensor] = {}
        self.curve: list[float] = []
        self.pads: torch.Tensor | None = None

    def at_step0(self, step: StepOutputs) -> None:
        out = step.on_cpu()
        self.tensors["loss"] = out.loss.reshape(())
        if (logits := out.defined()) is not None:
            self.tensors["logits"] = logits
        if (pad := out.pads()) is not None and self.pads is None:
            self.pads = pad
        for n, p in self.model.named_parameters():
            if p.grad is not None:
                self.tensors[f"grad.{n}"] = p.grad.detach().to("cpu").clone()

    def after_clip(self, out: StepOutputs, gn: torch.Tensor) -> None:
        self.curve.append(float(out.loss.detach().to("cpu", torch.float64)))


def _train_run(
    built: Any,
    init: dict[str, torch.Tensor],
    batches: list[dict[str, Any]],
    device: torch.device,
    prec: Precision,
    how: RunHow,
) -> RunOut:
    dtype = prec.param_dtype
    model = _load_init(built.model, init, device, dtype, how.round_to)
    model.zero_grad(set_to_none=True)  # a run that raised mid-backward must not leave its grads to the next
    model.train()
    no_dropout(model)
    experts_impl(model, "eager" if dtype == torch.float64 else None)
    fn = step_fn(built.forward, built.loss, built.logits, model, prec, device.type, how.backend)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    kept = _Step0(model)

    @contextmanager
    def first_step() -> Iterator[None]:
        with how.on_first_step() if how.on_first_step is not None else nullcontext():
            with how.module_check.recording() if how.module_check is not None else nullcontext():
                yield

    hooks = StepHooks(
        step_context=how.step_context,
        first_step=first_step if (how.on_first_step is not None or how.module_check is not None) else None,
        sync_first=True,
        at_step0=kept.at_step0,
        after_clip=kept.after_clip,
    )
    feed = Feed(lambda i: batches[i], len(batches), device, dtype, how.round_to)
    seconds, first = train_steps(model, fn, opt, feed, hooks, scaler=prec.grad_scaler(device.type))
    return RunOut(kept.tensors, kept.curve, seconds, first, kept.pads)
