"""First-divergence localization: which module, then which aten op, first goes off.

1. Modules: the module check (checks/module_check.py) on one training step on the device: every
   module replayed on its own, forward and backward, on the inputs the device gave it, against float64
   and the trusted run (cpu eager in the run dtype) on the same inputs, by the module rule
   (checks/module_rule.py). The first module off, in the order the forwards finished (inner before
   outer), is the first divergent module. With a compile backend and an eager run that is right, each
   module compiled alone with that backend is judged the same way (a compiled region).
2. Ops: that module's device replay runs once more under a TorchDispatchMode that records every aten
   op, forward and backward, with its inputs and outputs (copied to cpu). Each op is replayed on cpu in
   float64 from the device's *own* inputs (so earlier errors don't propagate) and in the run dtype (its
   trusted baseline); the first op whose device output fails the same rule is named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from bringup.checks.module_replay import replay as replay_call
from bringup.checks.module_rule import TensorFacts, judge_module_tensor


def _cpu_copy(x: Any) -> Any:
    return x.detach().to("cpu").clone() if isinstance(x, torch.Tensor) else x


@dataclass
class OpRecord:
    func: Any  # torch._ops.OpOverload
    args: Any  # cpu copies of the device inputs
    kwargs: dict[str, Any]
    out: Any  # cpu copy of the device output
    backward: bool = False  # run by the autograd engine (the module's backward), not its forward

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
        backward = torch._C._current_graph_task_id() != -1  # inside the autograd engine: a backward op
        self.ops.append(OpRecord(func, a, k, tree_map(_cpu_copy, out), backward))
        return out


def record_call_ops(mc: Any, name: str) -> list[OpRecord]:
    """Every aten op of module `name`'s device replay (forward and backward), recorded."""
    call = mc.calls[name]
    rec = OpRecorder()
    with rec:
        replay_call(call, call.module, mc.device, lambda: mc.prec.autocast(mc.device.type))
    return rec.ops


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
    output: int = 0  # which of the op's floating outputs is off


def replay(ops: list[OpRecord], dtype: torch.dtype) -> tuple[OpDivergence | None, int, list[str]]:
    """Replay each recorded op on cpu in float64 (reference) and in `dtype` (trusted), from the device's
    own inputs, judged by the module rule; (the first op whose device output is off, or None; ops
    compared; ops skipped + why)."""
    skipped: list[str] = []
    n = 0
    for i, op in enumerate(ops):
        got = _floats(op.out)
        if not got:
            continue
        try:
            ref = _floats(
                op.func(
                    *tree_map(lambda x: _cast(x, torch.float64), op.args),
                    **tree_map(lambda x: _cast(x, torch.float64), op.kwargs),
                )
            )
            base = _floats(
                op.func(*tree_map(lambda x: _cast(x, dtype), op.args), **tree_map(lambda x: _cast(x, dtype), op.kwargs))
            )
        except Exception as e:  # an op cpu can't run (a device-only kernel): named, not judged
            skipped.append(f"{op.name}: {type(e).__name__}")
            continue
        if len(ref) != len(got):
            skipped.append(f"{op.name}: {len(got)} outputs vs {len(ref)} on cpu")
            continue
        n += 1
        tens = [x for x in op.args if isinstance(x, torch.Tensor)]
        for j, (g, r) in enumerate(zip(got, ref, strict=True)):
            if j >= len(base):
                continue
            x = next((t for t in tens if t.is_floating_point() and t.shape == g.shape), None)
            tp = judge_module_tensor(f"{op.name}[{j}]", g, r, base[j], dtype, TensorFacts(covariate=x))
            if not tp.ok:
                max_abs = float((g.double() - r.double()).abs().max()) if g.numel() and g.shape == r.shape else math.inf
                return (
                    OpDivergence(
                        i,
                        op.name,
                        tp.rel_rmse,
                        tp.bound,
                        max_abs,
                        [list(x.shape) for x in tens],
                        [str(x.dtype).replace("torch.", "") for x in tens],
                        tp.summary(),
                        op,
                        j,
                    ),
                    n,
                    skipped,
                )
    return None, n, skipped


def fmt_err(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.2g}"
