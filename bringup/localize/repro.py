"""A standalone repro of one op's mismatch: `repro.py` + `inputs.safetensors` + `op.json`.

`python repro.py` (in a fresh process, no bringup needed: torch + safetensors) imports the device's
plugin modules, runs the op on the device from the saved inputs and on cpu in float64 and in the run
dtype, prints the errors and exits 1 when the device is off, else 0, by a standalone form of the module
rule (bringup/checks/module_rule.py): its size (3x the trusted cpu run's error, at least one rounding)
or its conditional mean given the reference value, in 16 bins, outside the trusted run's [min(0, t),
max(0, t)] widened by one rounding's scale and 6 standard errors (the bend a sharper gate or a wrong
constant makes; the floors come from the rule's table, in op.json). No pickle anywhere.
"""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import torch

from bringup.checks.module_rule import module_tolerance
from bringup.localize.core import OpDivergence

SCRIPT = '''\
"""Repro written by `bringup localize`: {summary}
Run: python repro.py [--device DEV]   (exit 1: the device's output is off; 0: it matches)"""
import argparse, base64, importlib, json, math, sys, zlib
from pathlib import Path

import torch
from safetensors.torch import load, load_file

HERE = Path(__file__).resolve().parent
META = None  # op.json, inline (None: read op.json next to this file)
INPUTS = None  # inputs.safetensors, zlib-compressed and base64, inline (None: read the file next to this one)
meta = META if META is not None else json.loads((HERE / "op.json").read_text())
ap = argparse.ArgumentParser()
ap.add_argument("--device", default=meta["device"])
opts = ap.parse_args()
for m in meta["imports"]:
    importlib.import_module(m)
if INPUTS is not None:
    tensors = load(zlib.decompress(base64.b64decode("".join(INPUTS))))
else:
    tensors = load_file(str(HERE / "inputs.safetensors"))
dtype = getattr(torch, meta["dtype"])


def build(node, where, cast):
    if isinstance(node, dict) and "tensor" in node:
        t = tensors[node["tensor"]]
        t = t.to(cast) if (cast is not None and t.is_floating_point()) else t
        return t.to(where)
    if isinstance(node, dict) and "dtype" in node:
        d = getattr(torch, node["dtype"])
        return cast if (cast is not None and d.is_floating_point) else d
    if isinstance(node, dict) and "device" in node:
        return torch.device(where)
    if isinstance(node, dict) and "list" in node:
        return [build(x, where, cast) for x in node["list"]]
    if isinstance(node, dict) and "dict" in node:
        return {{k: build(v, where, cast) for k, v in node["dict"].items()}}
    return node


ns, _, rest = meta["op"].partition("::")
name, _, overload = rest.partition(".")
op = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")


def run(where, cast):
    out = op(*build(meta["args"], where, cast), **build(meta["kwargs"], where, cast))
    out = out[meta["output"]] if isinstance(out, (list, tuple)) else out
    return out.detach().to("cpu", torch.float64)


def rel_rmse(a, b):
    den = b.pow(2).mean().sqrt().item()
    num = (a - b).pow(2).mean().sqrt().item()
    return num / den if den else (0.0 if num == 0 else math.inf)


def bend(got, ref, trusted):
    """max over 16 bins of the reference value: (|mean error past the trusted envelope| - floor) / 6 se."""
    g, r, t = got.flatten(), ref.flatten(), trusted.flatten()
    n = r.numel()
    if n < 256:
        return 0.0
    scale = r.pow(2).mean().sqrt().item() or 1.0
    worst = 0.0
    for idx in torch.argsort(r).chunk(16):
        eg, et = (g[idx] - r[idx]) / scale, (t[idx] - r[idx]) / scale
        se = math.sqrt((eg.var().item() + et.var().item()) / len(idx))
        lo, hi = min(0.0, et.mean().item()), max(0.0, et.mean().item())
        floor = meta["floor"] * r[idx].pow(2).mean().sqrt().item() / scale
        past = max(lo - floor - eg.mean().item(), eg.mean().item() - hi - floor, 0.0)
        worst = max(worst, past / max(meta["z"] * se, 1e-300))
    return worst


ref = run("cpu", torch.float64)
got = run(opts.device, None)
trusted = run("cpu", dtype)
err, base = rel_rmse(got, ref), rel_rmse(trusted, ref)
bound = 3 * max(base, meta["size_floor"])
shape = bend(got, ref, trusted)
bad = err > bound or shape > 1
print(f"{{meta['op']}} on {{opts.device}}: rel_rmse {{err:.3g}} vs float64 (trusted cpu {{meta['dtype']}}: "
      f"{{base:.3g}}, bound {{bound:.3g}}); conditional mean {{shape:.3g}} of its margin -> "
      f"{{'MISMATCH' if bad else 'ok'}}")
if bad and meta.get("signature"):
    print(f"signature: {{meta['signature']}}")
sys.exit(1 if bad else 0)
'''


def _encode(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(node, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = node.detach().to("cpu").contiguous().clone()
        return {"tensor": key}
    if isinstance(node, torch.dtype):
        return {"dtype": str(node).replace("torch.", "")}
    if isinstance(node, torch.device):
        return {"device": str(node)}
    if isinstance(node, (list, tuple)):
        return {"list": [_encode(x, tensors) for x in node]}
    if isinstance(node, dict):
        return {"dict": {str(k): _encode(v, tensors) for k, v in node.items()}}
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise ValueError(f"argument of type {type(node).__name__} can't be written as JSON")


def write_repro(
    d: OpDivergence, out_dir: Path, device: str, dtype: torch.dtype, imports: list[str], where: str
) -> Path:
    """Write the repro of `d` under out_dir; returns the script's path. ValueError when an argument
    can't be serialised (the report then says so)."""
    from safetensors.torch import save_file  # lazy: loaded only when writing weights

    tensors: dict[str, torch.Tensor] = {}
    args = _encode(list(d.record.args), tensors)
    kwargs = _encode(dict(d.record.kwargs), tensors)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / "inputs.safetensors"))
    tol = module_tolerance(dtype)
    meta = {
        "op": d.name,
        "args": args,
        "kwargs": kwargs,
        "device": device,
        "imports": imports,
        "dtype": str(dtype).replace("torch.", ""),
        "output": d.output,
        "where": where,
        "rel_err": d.rel_err,
        "bound": d.bound,
        "size_floor": tol.size_floor,
        "floor": tol.floor,
        "z": tol.z,
    }
    (out_dir / "op.json").write_text(json.dumps(meta, indent=2) + "\n")
    script = out_dir / "repro.py"
    script.write_text(SCRIPT.format(summary=f"{where} -> {d.name}, rel err {d.rel_err:.2g} on {device}"))
    return script


def inline_script(out_dir: Path, **meta: Any) -> str:
    """The repro under `out_dir` as one file: op.json (with `meta` added, e.g. the triage group's `signature`, which
    the script prints when it finds a mismatch) and the inputs (zlib, base64) written into it, for an issue."""
    data = {**json.loads((out_dir / "op.json").read_text()), **meta}
    blob = base64.b64encode(zlib.compress((out_dir / "inputs.safetensors").read_bytes(), 9)).decode()
    chunks = ",\n".join(f'    "{blob[i : i + 96]}"' for i in range(0, len(blob), 96))
    text = (out_dir / "repro.py").read_text()
    text = text.replace("META = None  #", f"META = {data!r}  #", 1)
    return text.replace("INPUTS = None  #", f"INPUTS = [\n{chunks}\n]  #", 1)
