"""Test-only dynamo backend that models a device compiler with missing lowerings: `lowering_gap` compiles like
aot_eager, except that a graph whose inputs live on a device other than cpu and that calls one of the ops named
in $TRIAGE_LOWERING_GAP (comma list of aten op base names, default `silu`) raises `LoweringError` while
lowering, as a young backend's compiler does for an op it has no lowering for. On cpu it compiles everything:
the bug belongs to the device's compiler, so a repro fails on the device and passes on cpu.

Import it as a plugin: `bringup --import lowering_gap ...` with tests/triage on PYTHONPATH.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd

ENV = "TRIAGE_LOWERING_GAP"


class LoweringError(RuntimeError):
    """A lowering the device's compiler lacks."""


def _missing() -> set[str]:
    return {s.strip() for s in os.environ.get(ENV, "silu").split(",") if s.strip()}


def _device_of(gm: torch.fx.GraphModule, inputs: Any) -> str:
    for t in inputs:
        if isinstance(t, torch.Tensor):
            return t.device.type
    return "cpu"


def lower(gm: torch.fx.GraphModule, inputs: Any) -> Any:
    """The 'lowering' pass: every call_function node must have a lowering on the device."""
    device = _device_of(gm, inputs)
    if device != "cpu":
        missing = _missing()
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            name = getattr(getattr(node.target, "_schema", None), "name", str(node.target)).split("::")[-1]
            if name in missing:
                raise LoweringError(f"no lowering for {node.target} on {device} (node {node.name})")
    return gm.forward


register_backend(name="lowering_gap", compiler_fn=aot_autograd(fw_compiler=lower, bw_compiler=lower))
