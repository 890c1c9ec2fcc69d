"""First-divergence localization, in eager mode: which module, then which aten op, first goes off.

1. The same model (same weights, same inputs) runs three times: on cpu in float64 (the reference), on
   cpu in the run dtype (the trusted run: what this precision itself costs) and on the device in the
   run dtype. A forward hook on every module records its first floating-point output.
2. Modules are taken in the order their forward *finished* on the device (inner before outer); the
   first whose output fails `checks.parity.compare_tensor` against float64, with the trusted run as
   baseline (the precision-aware bound: 3x the trusted error, floor 2 eps, plus the bias test), is the
   first divergent module.
3. That module runs once more on the device under a TorchDispatchMode that records every aten op with
   its inputs and outputs (copied to cpu). Each op is replayed on cpu in float64 from the device's
   *own* inputs (so earlier errors don't propagate) and in the run dtype (its trusted baseline); the
   first op whose device output fails the same comparison is named.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from bringup.checks.parity import compare_tensor


def first_float(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out if out.is_floating_point() else None
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        for v in out:
            t = first_float(v)
            if t is not None:
                return t
    return None


@contextmanager
def module_outputs(model: torch.nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """While active: name -> the first float output of each module's first call, on cpu, in the order
    the forwards finished. A module called again records as `name#2`, `name#3`, ..."""
    outs: dict[str, torch.Tensor] = {}
    calls: dict[str, int] = {}

    def hook(name: str) -> Callable[..., None]:
        def fn(mod: torch.nn.Module, args: Any, out: Any) -> None:
            n = calls[name] = calls.get(name, 0) + 1
            t = first_float(out)
            if t is not None:
                outs[name if n == 1 else f"{name}#{n}"] = t.detach().to("cpu").clone()

        return fn

    handles = [m.register_forward_hook(hook(name or "<model>")) for name, m in model.named_modules()]
    try:
        yield outs
    finally:
        for h in handles:
            h.remove()


@dataclass
class ModuleDivergence:
    name: str
    rel_err: float
    bound: float
    why: str
    checked: int  # modules compared before (and including) this one


def first_divergent_module(
    dev: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], trusted: dict[str, torch.Tensor], dtype: torch.dtype
) -> tuple[ModuleDivergence | None, int]:
    """(the first module off, or None; how many modules were compared)."""
    n = 0
    for name, got in dev.items():
        if name not in ref:
            continue
        n += 1
        tp = compare_tensor(name, got, ref[name], dtype, baseline=trusted.get(name))
        if not tp.ok:
            return ModuleDivergence(name, tp.rel_rmse, tp.bound, tp.why, n), n
    return None, n


def _cpu_copy(x: Any) -> Any:
    return x.detach().to("cpu").clone() if isinstance(x, torch.Tensor) else x


@dataclass
class OpRecord:
    func: Any  # torch._ops.OpOverload
    args: Any  # cpu copies of the device inputs
    kwargs: dict[str, Any]
    out: Any  # cpu copy of the device output

    @property
    def name(self) -> str:
        return op_name(self.func)


def op_name(func: Any) -> str:
    """aten.silu.default -> "aten::silu"; other overloads keep theirs: "aten::add.Tensor"."""
    ns = func.namespace
    base = func._schema.name.split("::")[-1]
    ov = func._overloadname
    return f"{ns}::{base}" + ("" if ov in ("default", "") else f".{ov}")


class OpRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpRecord] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        a, k = tree_map(_cpu_copy, args), tree_map(_cpu_copy, kwargs)
        out = func(*args, **kwargs)
        self.ops.append(OpRecord(func, a, k, tree_map(_cpu_copy, out)))
        return out


@contextmanager
def record_module_ops(model: torch.nn.Module, name: str) -> Iterator[OpRecorder]:
    """Records the aten ops run inside the first call of module `name` (hooks enter/exit the mode)."""
    mod = model if name == "<model>" else model.get_submodule(name.split("#")[0])
    rec = OpRecorder()
    state = {"done": False, "active": False}

    def pre(m: torch.nn.Module, args: Any) -> None:
        if not state["done"] and not state["active"]:
            state["active"] = True
            rec.__enter__()

    def post(m: torch.nn.Module, args: Any, out: Any) -> None:
        if state["active"]:
            rec.__exit__(None, None, None)
            state["active"], state["done"] = False, True

    h1, h2 = mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)
    try:
        yield rec
    finally:
        h1.remove()
        h2.remove()
        if state["active"]:
            rec.__exit__(None, None, None)


def _cast(x: Any, dtype: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.is_floating_point() else x
    if isinstance(x, torch.dtype) and x.is_floating_point:
        return dtype
    return x


def _floats(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _floats(o)]
    return []


@dataclass
class OpDivergence:
    index: int  # position among the module's recorded ops
    name: str
    rel_err: float
    bound: float
    max_abs: float
    shapes: list[list[int]]
    dtypes: list[str]
    why: str
    record: OpRecord = field(repr=False)


def replay(ops: list[OpRecord], dtype: torch.dtype) -> tuple[OpDivergence | None, int, list[str]]:
    """Replay each recorded op on cpu in float64 (reference) and in `dtype` (trusted), from the device's
    own inputs; (the first op whose device output is off, or None; ops compared; ops skipped + why)."""
    skipped: list[str] = []
    n = 0
    for i, op in enumerate(ops):
        got = _floats(op.out)
        if not got:
            continue
        try:
            ref = _floats(op.func(*tree_map(lambda x: _cast(x, torch.float64), op.args),
                                  **tree_map(lambda x: _cast(x, torch.float64), op.kwargs)))  # fmt: skip
            base = _floats(op.func(*tree_map(lambda x: _cast(x, dtype), op.args),
                                   **tree_map(lambda x: _cast(x, dtype), op.kwargs)))  # fmt: skip
        except Exception as e:  # an op cpu can't run (a device-only kernel): named, not judged
            skipped.append(f"{op.name}: {type(e).__name__}")
            continue
        if len(ref) != len(got):
            skipped.append(f"{op.name}: {len(got)} outputs vs {len(ref)} on cpu")
            continue
        n += 1
        for j, (g, r) in enumerate(zip(got, ref, strict=True)):
            b = base[j] if j < len(base) else None
            tp = compare_tensor(f"{op.name}[{j}]", g, r, dtype, baseline=b)
            if not tp.ok:
                tens = [x for x in op.args if isinstance(x, torch.Tensor)]
                return OpDivergence(i, op.name, tp.rel_rmse, tp.bound, tp.max_abs_err,
                                    [list(x.shape) for x in tens], [str(x.dtype).replace("torch.", "") for x in tens],
                                    tp.why, op), n, skipped  # fmt: skip
    return None, n, skipped


def fmt_err(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.2g}"


def _callable_children(mod: torch.nn.Module, prefix: str) -> list[tuple[str, torch.nn.Module]]:
    """A module's children that have their own forward; containers (ModuleList/ModuleDict) are
    looked through."""
    out: list[tuple[str, torch.nn.Module]] = []
    for n, c in mod.named_children():
        full = f"{prefix}.{n}" if prefix else n
        if isinstance(c, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            out += _callable_children(c, full)
        else:
            out.append((full, c))
    return out


@dataclass
class RegionStep:
    name: str
    ok: bool
    rel_err: float
    bound: float
    error: str = ""


def bisect_compiled(
    model: torch.nn.Module,
    run: Callable[[torch.nn.Module], Any],
    ref: dict[str, torch.Tensor],
    trusted: dict[str, torch.Tensor],
    dtype: torch.dtype,
    backend: str,
) -> tuple[str | None, list[RegionStep]]:
    """Regional bisection of a compiled run: compile ONE submodule at a time (its forward only, so its
    own output is observed eagerly), run the model, and judge that submodule's output against float64
    (trusted run as baseline). Top-down: among a module's children (in the order they finished), the
    first whose compiled output is off is entered next; the deepest such module is returned (None: no
    child of the model is off when compiled alone). Every compile tried is in the steps."""
    steps: list[RegionStep] = []
    node_name, node = "", model
    found: str | None = None
    while True:
        kids = [(n, c) for n, c in _callable_children(node, node_name) if n in ref]
        kids.sort(key=lambda nc: list(ref).index(nc[0]))
        nxt = None
        for name, child in kids:
            torch._dynamo.reset()
            seen: dict[str, torch.Tensor] = {}

            def hook(m: torch.nn.Module, a: Any, out: Any, name: str = name, seen: dict[str, Any] = seen) -> None:
                t = first_float(out)
                if t is not None and name not in seen:
                    seen[name] = t.detach().to("cpu").clone()

            child.forward = torch.compile(child.forward, backend=backend)  # type: ignore[method-assign]
            h = child.register_forward_hook(hook)
            try:
                with torch.no_grad():
                    run(model)
                err = ""
            except Exception as e:  # a compile error in one region: a divergence of its own kind
                err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            finally:
                h.remove()
                del child.forward  # back to the class's eager forward
            if err or name not in seen:
                steps.append(RegionStep(name, False, math.inf, math.inf, err or "no output"))
                nxt = (name, child)
                break
            tp = compare_tensor(name, seen[name], ref[name], dtype, baseline=trusted.get(name))
            steps.append(RegionStep(name, tp.ok, tp.rel_rmse, tp.bound))
            if not tp.ok:
                nxt = (name, child)
                break
        if nxt is None:
            break
        found, (node_name, node) = nxt[0], nxt
    torch._dynamo.reset()
    return found, steps
