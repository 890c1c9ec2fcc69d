"""Module replay: each module of a model run again on its own, forward and backward, on the inputs and
the output gradient the device gave it in a real training step (the machinery of the module-level
verdict, checks/module_check.py).

1. `ModuleRecorder` wraps one training step (forward and backward) on the device. For every judged
   module (`judged_modules`: every submodule that runs, except the root and the trunks that hold a
   stack of blocks) a forward pre-hook keeps detached copies of the inputs of its first call, and
   tensor hooks on its outputs keep the gradient the device's backward gave each of them.
2. `replay` runs one recorded call again: the module on the inputs, then `torch.autograd.grad` of its
   outputs with the recorded output gradients, for the floating inputs that required grad and the
   module's own parameters (nothing accumulates into `.grad`; buffers a train-mode forward updates,
   BatchNorm's running statistics, are put back). The same call replays on the device (eager, or the
   module compiled on its own with the run's backend: a real region boundary), on cpu in float64 and
   on cpu at the run's precision: three computations of one function on the same inputs.

Recording is eager only: hooks do not fire inside a whole-model compiled graph, so a compiled run's
modules are replayed, compiled one by one, on the inputs its eager run recorded (same weights, same
batch): an error that only appears when fusing across module boundaries is the whole-model rule's.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

from bringup.checks.module_rule import one_rounding
from bringup.precision import Precision


def _float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _stack_of_blocks(mod: torch.nn.Module) -> bool:
    """A ModuleList / Sequential holding >= 2 modules of one class: a stack of repeated blocks."""
    if not isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)):
        return False
    kinds = [type(c) for c in mod.children()]
    return len(kinds) >= 2 and len(set(kinds)) < len(kinds)


def judged_modules(model: torch.nn.Module, blocks: int | None = None) -> dict[str, torch.nn.Module]:
    """name -> module of every module judged on its own: all submodules except the root, containers
    (ModuleList / ModuleDict: they have no forward) and trunks (a module that holds a stack of >= 2
    repeated blocks below it: its output is the whole residual stream, the whole-model rule's).
    `blocks`: of each stack, only the first `blocks` blocks and what is inside them (a deep model's
    blocks run the same code: train's first step judges one)."""
    trunks: set[str] = {""}
    skipped: list[str] = []
    for name, m in model.named_modules():
        if _stack_of_blocks(m):
            parts = name.split(".") if name else []
            trunks.update(".".join(parts[:i]) for i in range(len(parts) + 1))
            if blocks is not None:
                prefix = f"{name}." if name else ""
                skipped += [f"{prefix}{k}" for k in list(dict(m.named_children()))[blocks:]]
    out: dict[str, torch.nn.Module] = {}
    for name, m in model.named_modules():
        if name in trunks or isinstance(m, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            continue
        if any(name == s or name.startswith(f"{s}.") for s in skipped):
            continue
        out[name] = m
    return out


@dataclass
class Call:
    """One recorded module call: its inputs as the device saw them and its outputs' gradients."""

    name: str  # the module's name; its k-th recorded call (k >= 2) is "name#k"
    module: torch.nn.Module = field(repr=False)
    args: tuple[Any, ...] = field(repr=False)
    kwargs: dict[str, Any] = field(repr=False)
    grad_in: list[bool] = field(default_factory=list)  # per flattened input leaf: judge its gradient
    in_names: list[str] = field(default_factory=list)  # per flattened input leaf: a readable path
    out_grads: list[torch.Tensor | None] = field(default_factory=list, repr=False)  # per float output
    calls: int = 1  # how many times the module ran in the step (the first MAX_CALLS are recorded)

    @property
    def module_name(self) -> str:
        return self.name.split("#")[0]

    @property
    def has_backward(self) -> bool:
        return any(g is not None for g in self.out_grads)


def _float_outputs(out: Any) -> list[torch.Tensor]:
    if hasattr(out, "to_tuple"):  # transformers' ModelOutput
        out = out.to_tuple()
    leaves, _ = tree_flatten(out)
    return [t for t in leaves if _float(t)]


# A module called more than once in a step (an MoE's experts' activation, once per expert; a block
# shared by layers) has its first MAX_CALLS calls recorded: judged together, each call alone may be a
# handful of tokens.
MAX_CALLS = 8
# Dither leaves an integer of at most this size as it is: every float format judged holds it exactly (bf16 keeps 8
# significant bits), so no rounding moves it, and code that counts with floats reads it as an integer (jetmoe's router:
# `zeros.scatter(1, top_k, 1).long().sum(0)` is each expert's share of the split; a 1.0 moved to 0.99998 truncates
# to 0, and the split no longer sums to the tokens routed)
EXACT_INT = 256.0


class ModuleRecorder:
    """While active (around one step's forward and backward on the device): the first MAX_CALLS calls of
    every judged module, recorded (module doc). `calls` in the order the forwards finished (inner before
    outer); a module's later calls are named "name#2", "name#3", ..."""

    def __init__(self, model: torch.nn.Module, modules: dict[str, torch.nn.Module] | None = None) -> None:
        self.model = model
        self.modules = judged_modules(model) if modules is None else modules
        self.calls: dict[str, Call] = {}
        self._pending: dict[str, Call] = {}
        self._handles: list[Any] = []

    def _pre(self, name: str) -> Callable[..., None]:
        def hook(mod: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            first = self.calls.get(name) or self._pending.get(name)
            n = 1 if first is None else first.calls + 1
            if first is not None:
                first.calls = n
            if n > MAX_CALLS or (n > 1 and name in self._pending):  # past the cap, or re-entered
                return
            paths, spec = tree_flatten_with_path((args, kwargs))
            leaves = [v for _, v in paths]
            keep = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in leaves]
            a, k = tree_unflatten(keep, spec)
            grad_in = [_float(v) and bool(v.requires_grad) for v in leaves]
            key = name if n == 1 else f"{name}#{n}"
            self._pending[name] = Call(key, mod, a, k, grad_in, [_leaf_name(p) for p, _ in paths])

        return hook

    def _post(self, name: str) -> Callable[..., None]:
        def hook(mod: torch.nn.Module, args: Any, out: Any) -> None:
            call = self._pending.pop(name, None)
            if call is None:
                return
            outs = _float_outputs(out)
            call.out_grads = [None] * len(outs)
            for i, t in enumerate(outs):
                if t.requires_grad:
                    t.register_hook(self._keep_grad(call, i))
            self.calls[call.name] = call

        return hook

    @staticmethod
    def _keep_grad(call: Call, i: int) -> Callable[[torch.Tensor], None]:
        def fn(g: torch.Tensor) -> None:
            if call.out_grads[i] is None:
                call.out_grads[i] = g.detach().clone()

        return fn

    def __enter__(self) -> ModuleRecorder:
        for name, m in self.modules.items():
            self._handles.append(m.register_forward_pre_hook(self._pre(name), with_kwargs=True))
            self._handles.append(m.register_forward_hook(self._post(name)))
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._pending.clear()


def _leaf_name(path: Any) -> str:
    """A flattened input's readable path: the (args, kwargs) pair's [0][1] -> "1", [1]['mask'] -> "mask"."""
    s = keystr(path)[3:]
    return s.replace("['", ".").replace("']", "").replace("[", ".").replace("]", "").strip(".") or "x"


@dataclass
class Replayed:
    """One computation of one call: forward outputs and gradients, on cpu, by name."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # the float inputs (cpu), by name
    seconds: float = 0.0
    # with replay(dtypes=True): the dtype of every floating result of every aten op it ran, forward and backward
    dtypes: set[torch.dtype] = field(default_factory=set)


def _cast(
    t: Any, device: torch.device, dtype: torch.dtype | None, dither: float = 0.0, gen: torch.Generator | None = None
) -> Any:
    """A copy of a recorded tensor for one replay (a module may write into its inputs), its floating
    values cast to `dtype` and, with `dither`, each multiplied by (1 + dither x N(0, 1))."""
    if not isinstance(t, torch.Tensor):
        return t
    t = t.detach()
    if not t.is_floating_point():
        return t.to(device, copy=True)
    t = t.to(device=device, dtype=dtype or t.dtype, copy=True)
    if dither:
        noise = torch.randn(t.shape, generator=gen, dtype=torch.float64)
        t = (t.double() * (1 + dither * noise.to(t.device))).to(t.dtype)
    return t


class Dither(TorchDispatchMode):
    """Every floating result of every aten op (forward and backward), except views and in-place results,
    multiplied by (1 + d x N(0, 1)): a computation that rounds each intermediate once, at random, with
    one rounding's relative RMS (a stochastic model of rounding, in float64). A float64 result stands
    for a value the run holds at its own precision: `d`, that precision's rounding. A result the
    module's own code cast to a narrower float (an RMSNorm's `.to(torch.float32)` and what it computes
    from it, rotary angles) is held there in the run too, whatever the run's precision: it is rounded
    as that dtype rounds (fp32: 2e-8), not as bf16 (2e-3). The cast back is a float64 result and
    rounds at `d`, as the run's cast back to bf16 does. `every_dtype`: every result at `d`, whatever its dtype
    (the float64 reference's twin, parity.exact_zeros: a perturbation larger than any rounding inside it). An
    element that is a small integer (|x| <= EXACT_INT: a mask's 1, a count, a position) stays as it is: no rounding
    moves a value every format holds exactly; so does one the perturbation would overflow (a mask's minimum,
    finfo.min: made -inf, a fully masked row's softmax turned NaN, and the NaN reached every gradient of the
    attention; trocr's key biases, zero in exact arithmetic, were not found so, and the trusted run was called
    off float64)."""

    def __init__(self, d: float, gen: torch.Generator, every_dtype: bool = False) -> None:
        super().__init__()
        self.d, self.gen, self.every_dtype = d, gen, every_dtype

    def _one(self, t: Any, ins: set[int]) -> Any:
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()) or t.untyped_storage().data_ptr() in ins:
            return t
        held = t.dtype == torch.float64 or self.every_dtype
        d = self.d if held else min(self.d, one_rounding(t.dtype))
        noise = torch.randn(t.shape, generator=self.gen, dtype=torch.float64).to(t.device)
        x = t.double()
        exact = (x == x.round()) & (x.abs() <= EXACT_INT)
        out = torch.where(exact, x, x * (1 + d * noise)).to(t.dtype)
        # no rounding overflows a finite value; compared in float64: float8 (kolibri1_1's NVFP4 scales) has no isfinite
        return torch.where(torch.isfinite(x) & ~torch.isfinite(out.double()), t, out)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.is_view or torch.Tag.inplace_view in func.tags:
            return out
        ins = {a.untyped_storage().data_ptr() for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)}
        flat, spec = tree_flatten(out)
        return tree_unflatten([self._one(t, ins) for t in flat], spec)


class _Dtypes(TorchDispatchMode):
    """Notes the dtype of every floating result of every aten op (forward and backward): which precisions
    a computation actually rounded to, casts included."""

    def __init__(self, seen: set[torch.dtype]) -> None:
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.seen.update(t.dtype for t in tree_flatten(out)[0] if _float(t))
        return out


@contextlib.contextmanager
def _kept_buffers(module: torch.nn.Module) -> Iterator[None]:
    """A train-mode forward updates some buffers (BatchNorm's running stats): put them back after."""
    saved = [(b, b.detach().clone()) for b in module.buffers()]
    try:
        yield
    finally:
        with torch.no_grad():
            for b, v in saved:
                if b.shape == v.shape:
                    b.copy_(v)


@dataclass(frozen=True)
class ReplayNoise:
    """A replay's perturbation (Dither): inputs, output gradients and every intermediate result (forward and
    backward) each multiplied by (1 + dither x N(0, 1)), seeded: what rounding everything once costs this module
    (its conditioning); `every_dtype`: at `dither` whatever a result's dtype."""

    dither: float
    seed: int = 1
    every_dtype: bool = False


def replay(
    call: Call,
    module: torch.nn.Module,
    device: torch.device,
    autocast: Callable[[], Any],
    dtype: torch.dtype | None = None,
    fn: Callable[..., Any] | None = None,
    noise: ReplayNoise | None = None,
    dtypes: bool = False,
) -> Replayed:
    """Run `call` again through `module` (or `fn`, e.g. the module compiled) on `device`, its floating
    inputs cast to `dtype` (None: as recorded), under `autocast()`; then the gradients of its floating
    inputs that required grad and of its parameters, given the recorded output gradients (cast to each
    output's dtype). `noise`: perturbed as it says (ReplayNoise). `dtypes`: note in `Replayed.dtypes` the
    dtype of every floating result of every op it ran. Raises what the module raises."""
    t0 = time.perf_counter()
    dither = noise.dither if noise is not None else 0.0
    gen = torch.Generator().manual_seed(noise.seed) if noise is not None and dither else None
    leaves, spec = tree_flatten((call.args, call.kwargs))
    new = [_cast(v, device, dtype, dither, gen) for v in leaves]
    wanted: list[tuple[str, torch.Tensor]] = []
    passed = list(new)
    for i, v in enumerate(new):
        if call.grad_in[i] and isinstance(v, torch.Tensor):
            v.requires_grad_(True)
            wanted.append((f"grad.in.{call.in_names[i]}", v))
            passed[i] = v.clone()  # not the leaf itself: a module may write into its input (ReLU(inplace))
    args, kwargs = tree_unflatten(passed, spec)
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    out_res = Replayed()
    out_res.inputs = {call.in_names[i]: _kept(v) for i, v in enumerate(new) if _float(v)}
    mode: Any = contextlib.nullcontext()
    if dither and gen is not None:
        mode = Dither(dither, gen, noise.every_dtype if noise is not None else False)
    elif dtypes:
        mode = _Dtypes(out_res.dtypes)
    with _kept_buffers(module), mode:
        with autocast():
            out = (module if fn is None else fn)(*args, **kwargs)
        _backward(call, out, wanted + [(f"grad.{n}", p) for n, p in params], out_res, (dither, gen))
    out_res.seconds = time.perf_counter() - t0
    return out_res


def _kept(t: torch.Tensor) -> torch.Tensor:
    """A replay's record of a tensor: a cpu copy, never the tensor itself (on cpu `.to("cpu")` is the same
    tensor). A module may return one of its parameters (gpt_neox_japanese's attention returns its dense_bias),
    which the run's optimizer step then moves, or write into an input it was passed, after the record."""
    return t.detach().to("cpu", copy=True)


def _backward(
    call: Call,
    out: Any,
    targets: list[tuple[str, torch.Tensor]],
    res: Replayed,
    noise: tuple[float, torch.Generator | None],
) -> None:
    """The replay's floating outputs and, given the recorded output gradients (cast to each output's dtype,
    perturbed as the inputs were), the gradients of `targets` (name, tensor), on `res` (cpu)."""
    outs = _float_outputs(out)
    for i, o in enumerate(outs):
        res.tensors[f"out.{i}"] = _kept(o)
    pairs = [(o, g) for o, g in zip(outs, call.out_grads, strict=False) if g is not None and o.requires_grad]
    if not (pairs and targets):
        return
    dither, gen = noise
    grads = torch.autograd.grad(
        [o for o, _ in pairs],
        [t for _, t in targets],
        [_cast(g, o.device, o.dtype, dither, gen) for o, g in pairs],
        allow_unused=True,
    )
    for (n, _), g in zip(targets, grads, strict=True):
        if g is not None:
            res.tensors[n] = g.detach().to("cpu")


def copy_module(module: torch.nn.Module, memo: dict[int, Any] | None = None) -> torch.nn.Module:
    """copy.deepcopy of a module (`memo` as deepcopy's); a tensor one of its modules holds as a plain attribute (or in
    a list, tuple or dict there) that is not a graph leaf, a state its last forward cached with its history
    (recurrent_gemma's recurrent states, after a training step), is copied detached: deepcopy refuses such a tensor."""
    memo = {} if memo is None else memo
    for m in module.modules():
        for v in vars(m).values():
            for t in tree_flatten(v)[0] if isinstance(v, (list, tuple, dict)) else [v]:
                if isinstance(t, torch.Tensor) and not t.is_leaf and id(t) not in memo:
                    memo[id(t)] = t.detach().clone()
    return copy.deepcopy(module, memo)


def cpu_copy(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """The module on cpu with its floating parameters and buffers in `dtype` (a deep copy)."""
    m = copy_module(module)
    return m.to(device="cpu", dtype=dtype)


def precision_autocast(prec: Precision, device_type: str) -> Callable[[], Any]:
    return lambda: prec.autocast(device_type)


def finite(ts: dict[str, torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in ts.values())


def nbytes(calls: dict[str, Call]) -> int:
    """The recorded inputs' and gradients' size (what the recorder holds)."""
    n = 0
    for c in calls.values():
        leaves, _ = tree_flatten((c.args, c.kwargs))
        n += sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))
        n += sum(g.numel() * g.element_size() for g in c.out_grads if g is not None)
    return n
