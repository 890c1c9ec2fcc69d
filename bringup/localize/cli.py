"""`bringup localize MODEL [--source hf|timm|fn] [--dtype float32]`: one case, run in a worker like every
suite's: the model's eager forward on the device vs float64 on cpu, module by module, then op by op.

Status: `fail_numeric` when a module's output is off (the reason is the one line for the report:
"first divergence: model.layers.0.mlp.act_fn -> aten::silu, rel err 1.1e-2"), `pass` when none is,
`ref_fail` when the model can't be built or the cpu reference fails.
"""

from __future__ import annotations

import argparse
import time
import traceback
from typing import Any

from bringup.case import Case, CaseResult, Status
from bringup.errors import BadInput

HELP = "first divergence: the first module, then the first aten op, where the device leaves float64"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a zoo model: an HF model type (llama, gpt2, ...), a timm name, or module:function")
    p.add_argument("--source", choices=["hf", "timm", "fn"], default="hf", help="where MODEL comes from (default hf)")
    p.add_argument("--task", default="causal-lm", help="HF task (default causal-lm)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                   help="the device run's dtype (default float32)")  # fmt: skip
    p.add_argument("--compile-backend", default=None, metavar="NAME",
                   help="also localize a compiled run: compile one submodule at a time with NAME (regional "
                   "bisection) to find the deepest submodule whose compiled output is off")  # fmt: skip
    p.add_argument("--budget", type=float, default=600.0, help="wall budget of the case, seconds (default 600)")


def build_cases(args: argparse.Namespace) -> list[Case]:
    if not args.model.strip():
        raise BadInput("localize: give a model")
    if args.source == "fn" and ":" not in args.model:
        raise BadInput(f"localize: --source fn needs module:function, got {args.model!r}")
    params = {"source": args.source, "model": args.model, "task": args.task if args.source == "hf" else "",
              "dtype": args.dtype, "seed": 0, "backend": args.compile_backend or ""}  # fmt: skip
    if args.compile_backend:
        import torch._dynamo

        if args.compile_backend not in torch._dynamo.list_backends(exclude_tags=()):
            raise BadInput(f"--compile-backend {args.compile_backend}: no such dynamo backend (see `bringup devices`)")
    mode = f" {args.compile_backend}" if args.compile_backend else ""
    return [Case("localize", f"{args.model} {args.dtype}{mode}", params, "bringup.localize.cli:run_case", args.budget)]


def main(sess: Any) -> int:
    from bringup.flow import execute_cases

    return execute_cases(sess, "localize", build_cases(sess.args), summarize)


def _cast_batch(batch: Any, device: Any, dtype: Any) -> Any:
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.to(device=device, dtype=dtype) if batch.is_floating_point() else batch.to(device)
    if isinstance(batch, dict):
        return {k: _cast_batch(v, device, dtype) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_cast_batch(v, device, dtype) for v in batch)
    return batch


def run_case(case: Case, ctx: Any) -> CaseResult:
    import copy

    import torch

    from bringup.checks.errors import first_line
    from bringup.localize.core import first_divergent_module, fmt_err, module_outputs, record_module_ops, replay
    from bringup.localize.repro import write_repro
    from bringup.suites.zoo import build_model

    p = case.params
    dtype = getattr(torch, p["dtype"])
    dev = ctx.device.torch_device
    r = CaseResult.for_case(case, Status.PASS)
    t0 = time.monotonic()
    torch.manual_seed(0)
    try:
        built = build_model(p)
    except Exception as e:
        return CaseResult.for_case(case, Status.REF_FAIL, f"config: {first_line(e)}", error=traceback.format_exc())
    batch = built.make_batch(0)
    base = built.model.eval()

    def outputs(where: Any, dt: Any) -> tuple[torch.nn.Module, Any, dict[str, torch.Tensor]]:
        m = copy.deepcopy(base).to(device=where, dtype=dt)
        b = _cast_batch(batch, where, dt)
        with torch.no_grad(), module_outputs(m) as outs:
            built.forward(m, b)
        return m, b, outs

    try:
        _, _, ref = outputs(torch.device("cpu"), torch.float64)
        _, _, trusted = outputs(torch.device("cpu"), dtype)
    except Exception as e:
        return CaseResult.for_case(case, Status.REF_FAIL, f"reference: {first_line(e)}", error=traceback.format_exc())
    model, b, got = outputs(dev, dtype)
    mod, n_mod = first_divergent_module(got, ref, trusted, dtype)
    r.fields.update({"modules_compared": n_mod, "first_module": None, "first_op": None, "op_rel_err": None,
                     "op_bound": None, "op_shapes": None, "op_dtypes": None, "ops_compared": None,
                     "ops_skipped": None, "repro": None, "compiled_region": None, "regions_tried": None})  # fmt: skip
    if mod is None and p.get("backend"):
        from bringup.localize.core import bisect_compiled

        region, steps = bisect_compiled(model, lambda m: built.forward(m, b), ref, trusted, dtype, p["backend"])
        r.fields["regions_tried"] = [{"module": s.name, "ok": s.ok, "rel_err": s.rel_err, "bound": s.bound,
                                      "error": s.error} for s in steps]  # fmt: skip
        r.fields["compiled_region"] = region
        r.wall_s = time.monotonic() - t0
        r.metric("localize_s", r.wall_s, "s")
        if region is None:
            r.reason = (f"eager: no module diverges ({n_mod}); compiled with {p['backend']}, one submodule at a "
                        f"time: none diverges ({len(steps)} regions tried)")  # fmt: skip
            return r
        last = steps[-1]
        r.status = Status.FAIL_NUMERIC
        r.metric("max_rel_err", last.rel_err)
        r.reason = (f"first divergence (compiled, {p['backend']}): {region}, rel err {fmt_err(last.rel_err)} "
                    f"(eager on the device matches float64; {len(steps)} regions compiled)")  # fmt: skip
        return r
    if mod is None:
        r.reason = f"no module diverges ({n_mod} module outputs within bounds vs float64)"
        r.wall_s = time.monotonic() - t0
        r.metric("localize_s", r.wall_s, "s")
        return r
    r.status = Status.FAIL_NUMERIC
    r.fields.update({"first_module": mod.name, "module_rel_err": mod.rel_err, "module_bound": mod.bound})
    with torch.no_grad(), record_module_ops(model, mod.name) as rec:
        built.forward(model, b)
    op, n_ops, skipped = replay(rec.ops, dtype)
    r.fields.update({"ops_compared": n_ops, "ops_skipped": skipped})
    if op is None:
        r.reason = (f"first divergence: {mod.name} (rel err {fmt_err(mod.rel_err)}, bound {fmt_err(mod.bound)}); none "
                    f"of its {n_ops} aten op(s) is off alone on replay (the error builds up across ops)")  # fmt: skip
    else:
        r.fields.update({"first_op": op.name, "op_rel_err": op.rel_err, "op_bound": op.bound,
                         "op_shapes": op.shapes, "op_dtypes": op.dtypes, "op_index": op.index})  # fmt: skip
        r.reason = f"first divergence: {mod.name} -> {op.name}, rel err {fmt_err(op.rel_err)}"
        try:
            script = write_repro(op, ctx.artifact("repro"), ctx.device.name, dtype, list(ctx.imports), mod.name)
            r.fields["repro"] = str(script)
            r.artifacts["repro"] = str(script)
        except (ValueError, OSError) as e:
            r.fields["repro"] = f"not written: {e}"
    r.wall_s = time.monotonic() - t0
    r.metric("localize_s", r.wall_s, "s")
    r.metric("max_rel_err", r.fields.get("op_rel_err") or mod.rel_err)
    return r


def summarize(results: list[CaseResult], console: Any) -> dict[str, Any]:
    from rich.markup import escape

    from bringup.console import case_table

    console.print(case_table("localize", results, []))
    for r in results:
        if r.fields.get("compiled_region"):
            console.print(escape(f"{r.name}: {r.reason}"), highlight=False)
        if r.fields.get("first_module"):
            console.print(escape(f"{r.name}: {r.reason}"), highlight=False)
            if r.fields.get("first_op"):
                console.print(escape(f"  op inputs {r.fields['op_shapes']} {r.fields['op_dtypes']}, bound "
                                     f"{r.fields['op_bound']:.2g}"), highlight=False)  # fmt: skip
            if r.fields.get("repro"):
                console.print(escape(f"  repro: {r.fields['repro']}"), highlight=False)
    keys = ("first_module", "first_op", "op_rel_err", "repro", "compiled_region")
    return {"localize": [{"case": r.name, **{k: r.fields.get(k) for k in keys}} for r in results]}
