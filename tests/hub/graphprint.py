"""The computed graph of a built tiny model, as a comparable fingerprint (tests of hub/signature.py).

One training step (forward, loss, backward) of the model on its step-0 batch under a TorchDispatchMode that
records every aten call: the op, the shape and dtype of each tensor argument and every non-tensor argument
(eps, scales, dims, softcaps); plus the module tree (class per name, parameter shapes) and the content of
every buffer (rope frequencies, position tables: constants of the computation, not weights). Parameter values
are left out: they are the seeded init, not the computation.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def _arg(a: Any) -> str:
    if isinstance(a, torch.Tensor):
        return f"T{tuple(a.shape)}:{str(a.dtype).removeprefix('torch.')}"
    if isinstance(a, float):
        return repr(round(a, 12))
    return repr(a)


class _Record(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        flat, _ = tree_flatten((args, kwargs or {}))
        self.ops.append(f"{func}({','.join(_arg(a) for a in flat)})")
        return func(*args, **(kwargs or {}))


def fingerprint(built: Any) -> dict[str, Any]:
    """{"modules", "buffers", "ops"} of one training step of a zoo `Built` (models/tiny.py)."""
    model = built.model
    modules = [f"{n}:{type(m).__name__}" for n, m in model.named_modules()]
    modules += [f"{n}:{tuple(p.shape)}" for n, p in model.named_parameters()]
    buffers = {
        n: hashlib.sha256(b.detach().to("cpu", torch.float64).numpy().tobytes()).hexdigest()[:16]
        if b.is_floating_point()
        else hashlib.sha256(b.detach().cpu().numpy().tobytes()).hexdigest()[:16]
        for n, b in model.named_buffers()
    }
    batch = built.make_batch(0)
    rec = _Record()
    model.train()
    with rec:
        out = built.forward(model, batch)
        built.loss(out, batch).backward()
    model.zero_grad(set_to_none=True)
    return {"modules": modules, "buffers": buffers, "ops": rec.ops}


def digest(fp: dict[str, Any]) -> str:
    return hashlib.sha256(repr(fp).encode()).hexdigest()[:16]


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Where two fingerprints part (for assertion messages)."""
    for key in ("modules", "buffers", "ops"):
        x, y = a[key], b[key]
        if x == y:
            continue
        if isinstance(x, dict):
            diff = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            return f"{key}: {diff[:5]}"
        for i, (p, q) in enumerate(zip(x, y, strict=False)):
            if p != q:
                return f"{key}[{i}]: {p[:200]} != {q[:200]}"
        return f"{key}: lengths {len(x)} != {len(y)}"
    return "identical"
