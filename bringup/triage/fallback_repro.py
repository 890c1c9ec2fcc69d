"""A fallback group's standalone repro: the ops of its signature, each called once on the device with the shapes,
dtypes and scalar arguments of the first call that fell back in the sweep (the fallback detector records them:
bringup/checks/fallbacks.py `fallback_examples`; no values: floating inputs are random, integer and bool ones zero,
which is a valid index for every op). Each call runs under the profiler: an op with an `aten::_to_cpu` child went
through PyTorch's boxed CPU fallback (`at::native::cpu_fallback` copies the inputs to the host), which is what the
sweep measured; the dispatcher's registration for the device's key is printed beside it.

`python repro.py [--device D]` (torch and the device's plugin only): exit 1 when an op falls back on D, 0 when
every op runs natively (cpu: nothing falls back). It prints `signature: ...` (the group's) when it fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

SCRIPT = '''\
"""Repro written by `bringup triage`: {title}
Each op below ran through the device's CPU fallback in the sweep,
with these shapes and dtypes. Run: python repro.py [--device DEV]
(exit 1: an op falls back to the CPU on DEV; exit 0: every op runs natively there)"""
import argparse, importlib, sys

import torch

DEVICE = {device!r}
IMPORTS = {imports!r}  # the device's plugin modules
SIGNATURE = {signature!r}
null, true, false = None, True, False  # the calls below are JSON
CALLS = {calls}

ap = argparse.ArgumentParser()
ap.add_argument("--device", default=DEVICE)
opts = ap.parse_args()
for m in IMPORTS:
    importlib.import_module(m)


def build(node, where):
    if isinstance(node, dict) and "tensor" in node:
        dtype = getattr(torch, node["dtype"])
        shape = node["tensor"]
        if dtype.is_floating_point or dtype.is_complex:
            t = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(0))
        else:
            t = torch.zeros(shape, dtype=dtype)  # zero: a valid index, mask or count for every op
        return t.to(where if node.get("device", "cpu") != "cpu" else "cpu")
    if isinstance(node, dict) and "dtype" in node:
        return getattr(torch, node["dtype"])
    if isinstance(node, dict) and "device" in node:
        return torch.device(where if node["device"] != "cpu" else "cpu")
    if isinstance(node, dict) and "list" in node:
        return [build(x, where) for x in node["list"]]
    if isinstance(node, dict) and "dict" in node:
        return {{k: build(v, where) for k, v in node["dict"].items()}}
    if isinstance(node, dict) and "repr" in node:
        return eval(node["repr"], {{"torch": torch, "inf": float("inf"), "nan": float("nan")}})
    return node


def shapes_of(node):
    if isinstance(node, dict) and "tensor" in node:
        return node["tensor"]
    if isinstance(node, dict) and "list" in node:
        return [s for s in (shapes_of(x) for x in node["list"]) if s is not None]
    return None


def resolve(name):
    ns, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), base), overload or "default")


def fell_back(fn):
    """True when the call ran an aten::_to_cpu inside an op: PyTorch's boxed CPU fallback at work."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return any(any(k.name == "aten::_to_cpu" for k in e.cpu_children) for e in prof.events())


key = str(torch._C._dispatch_key_for_device(torch.device(opts.device).type))
bad = 0
for call in CALLS:
    op = resolve(call["op"])
    args, kwargs = build(call["args"], opts.device), build(call["kwargs"], opts.device)
    try:
        fb = fell_back(lambda: op(*args, **kwargs))
    except Exception as e:  # the op cannot run here at all: a gap of another kind, said as such
        print(f"{{call['op']}}[{{'/'.join(call['dtypes'])}}] on {{opts.device}}: raised {{type(e).__name__}}: {{e}}")
        bad += 1
        continue
    kernel = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)
    shapes = shapes_of(call["args"])
    why = f" (no {{key}} kernel registered for {{op.name()}})" if fb and not kernel else ""
    print(f"{{call['op']}}[{{'/'.join(call['dtypes'])}}] {{shapes}} on {{opts.device}}: "
          f"{{'ran through the CPU fallback' if fb else 'native'}}{{why}}")
    bad += fb
if bad:
    print(f"signature: {{SIGNATURE}}")
sys.exit(1 if bad else 0)
'''


def calls_for(ops: Sequence[str], examples: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The repro's calls for the signature's `ops` ("aten::x[float32]", "aten::y[bfloat16,float32]": one call per
    dtype) from a case's recorded examples (keyed "aten::x[float32]"); and the items with no recorded call (the
    backend's own counter named them, the detector did not see them)."""
    calls, missing = [], []
    for item in ops:
        name, _, rest = item.partition("[")
        for kind in rest.rstrip("]").split(",") if rest else [""]:
            ex = examples.get(f"{name}[{kind}]")
            if ex is None:
                missing.append(f"{name}[{kind}]" if kind else name)
                continue
            dtypes = kind.split("/") if kind else []
            calls.append({"op": name, "dtypes": dtypes, "args": ex["args"], "kwargs": ex["kwargs"]})
    return calls, missing


def script(title: str, device: str, imports: Sequence[str], signature: str, calls: Sequence[Mapping[str, Any]]) -> str:
    body = json.dumps(list(calls), indent=1)
    return SCRIPT.format(
        title=title.replace('"""', "'''"), device=device, imports=list(imports), signature=signature, calls=body
    )
