"""`bringup localize MODEL [--source hf|timm|fn] [--dtype fp32]`: one case, run in a worker like every
suite's: one training step on the device, judged module by module (the module check: each module's
outputs and gradients on the inputs the device gave it, vs float64 and cpu eager in the same dtype),
then the first module off op by op.

Status: `fail_numeric` when a module is off (the reason is the one line for the report:
"first divergence: model.layers.0.mlp.act_fn -> aten::silu, rel err 1.1e-2 (...)"), `pass` when none is,
`ref_fail` when the model can't be built or no module can be replayed on cpu.

The command's options are in args.py (torch-free), its registration in suite.py; `--localize` on a run
is post_run.py (a post-run step).
"""

from __future__ import annotations

import difflib
import time
import traceback
from typing import TYPE_CHECKING, Any

import torch
from rich.markup import escape

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import first_line
from bringup.compile_backend import check_compile_backend
from bringup.console import case_table
from bringup.errors import BadInput
from bringup.localize.args import LocalizeOptions
from bringup.localize.core import fmt_err, record_call_ops, replay
from bringup.localize.repro import write_repro
from bringup.options import TORCH_DTYPE_NAMES
from bringup.zoo import modules as zoo_modules
from bringup.zoo.run import RunHow, as_precision, build_model, train_run

if TYPE_CHECKING:
    from rich.console import Console


def build_cases(opts: LocalizeOptions) -> list[Case]:
    if not opts.model.strip():
        raise BadInput("localize: give a model")
    if opts.source == "fn" and ":" not in opts.model:
        raise BadInput(f"localize: --source fn needs module:function, got {opts.model!r}")
    if opts.source == "hf":
        _check_model_type(opts.model)
    dtype = TORCH_DTYPE_NAMES[opts.dtype]  # torch's name in the case (its id, and stored runs, as before)
    params = {
        "source": opts.source,
        "model": opts.model,
        "task": opts.task if opts.source == "hf" else "",
        "dtype": dtype,
        "seed": opts.seed,
        "backend": opts.compile_backend or "",
        "inputs": "text",
    }  # (the zoo's step 0 as a job feeds it: bringup/models/batches.py)
    if opts.compile_backend:
        check_compile_backend(opts.compile_backend)
    mode = f" {opts.compile_backend}" if opts.compile_backend else ""
    return [Case("localize", f"{opts.model} {dtype}{mode}", params, "bringup.localize.cli:run_case", opts.case_budget)]


def _check_model_type(model: str) -> None:
    """`--source hf` builds a tiny model of a transformers model type: a name transformers does not know is
    bad input (one line, exit 2, nothing written), not a case whose reference failed."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # lazy: slow transformers import

    if model not in CONFIG_MAPPING_NAMES:
        near = difflib.get_close_matches(model, list(CONFIG_MAPPING_NAMES), n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise BadInput(
            f"localize: {model!r} is not a transformers model type{hint}; --source timm or fn for other models"
        )


def run_case(case: Case, ctx: Any) -> CaseResult:
    """Build the model, one training step on the device with every module recorded, judge the modules;
    then the first module off, op by op (or, eager clean and a backend given, each module compiled alone)."""
    p = case.params
    prec = as_precision(getattr(torch, p["dtype"]))
    dev = ctx.device.torch_device
    r = CaseResult.for_case(case, Status.PASS)
    t0 = time.monotonic()
    torch.manual_seed(0)
    try:
        built = build_model(p)
    except Exception as e:
        return CaseResult.for_case(case, Status.REF_FAIL, f"config: {first_line(e)}", error=traceback.format_exc())
    init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
    mc = zoo_modules.new_check(built.model, prec, dev)
    # one training step on the device (the zoo's step 0), every module recorded and replayed
    train_run(built, init, [built.make_batch(0)], dev, prec, RunHow(module_check=mc))
    rep = mc.judge_eager()
    if not rep.judged and mc.calls:
        return CaseResult.for_case(
            case, Status.REF_FAIL, f"reference: no module could be replayed on cpu ({rep.modules[0].note})"
        )
    r.fields.update({**_NOT_FOUND, "modules_compared": len(rep.judged), "module_check": rep.fields()})
    mod = rep.first_failed
    if mod is None and p.get("backend"):
        metrics = _judge_compiled(r, mc, rep, p["backend"])
    elif mod is None:
        r.reason = f"no module diverges ({len(rep.judged)} modules within bounds vs float64, forward and backward)"
        metrics = {}
    else:
        metrics = _localize_module(r, mc, mod, prec, ctx)
    r.wall_s = time.monotonic() - t0
    r.metric("localize_s", r.wall_s, "s")
    for name, value in metrics.items():
        r.metric(name, value)
    return r


# the fields every case records: None until the step that finds them
_NOT_FOUND = dict.fromkeys(
    (
        "modules_compared",
        "first_module",
        "first_op",
        "op_rel_err",
        "op_bound",
        "op_shapes",
        "op_dtypes",
        "ops_compared",
        "ops_skipped",
        "repro",
        "compiled_region",
        "regions_tried",
    )
)


def _judge_compiled(r: CaseResult, mc: Any, rep: Any, backend: str) -> dict[str, float | None]:
    """Eager is clean: each module compiled alone with `backend`, the first one off (if any)."""
    crep = mc.judge_compiled(backend)
    r.fields["regions_tried"] = [{"module": m.name, "ok": m.ok, "score": m.score, "note": m.note} for m in crep.modules]
    r.fields["module_check_compiled"] = crep.fields()
    region = crep.first_failed
    if region is None:
        r.reason = (
            f"eager: no module diverges ({len(rep.judged)} judged); compiled with {backend}, each "
            f"module alone: none diverges ({len(crep.judged)} judged)"
        )
        return {}
    w = region.worst
    r.fields["compiled_region"] = region.name
    r.status = Status.FAIL_NUMERIC
    r.reason = (
        f"first divergence (compiled, {backend}): {region.name}, "
        f"{w.summary() if w else region.note} (eager on the device matches float64; "
        f"{len(crep.judged)} modules compiled alone)"
    )
    return {"max_rel_err": w.rel_rmse if w else None}


def _localize_module(r: CaseResult, mc: Any, mod: Any, prec: Any, ctx: Any) -> dict[str, float | None]:
    """The first module off: its ops replayed one by one, the first one off, and its repro script."""
    r.status = Status.FAIL_NUMERIC
    w = mod.worst
    r.fields.update(
        {
            "first_module": mod.name,
            "module_rel_err": w.rel_rmse if w else None,
            "module_bound": w.bound if w else None,
            "module_why": w.summary() if w else mod.note,
        }
    )
    op, n_ops, skipped = replay(record_call_ops(mc, mod.name), prec.compute_dtype)
    r.fields.update({"ops_compared": n_ops, "ops_skipped": skipped})
    if op is None:
        r.reason = (
            f"first divergence: {mod.name} ({w.summary() if w else mod.note}); none of its {n_ops} aten "
            "op(s) is off alone on replay (the error builds up across ops)"
        )
    else:
        r.fields.update(
            {
                "first_op": op.name,
                "op_rel_err": op.rel_err,
                "op_bound": op.bound,
                "op_shapes": op.shapes,
                "op_dtypes": op.dtypes,
                "op_index": op.index,
                "op_why": op.why,
                "op_backward": op.record.backward,
            }
        )
        r.reason = f"first divergence: {mod.name} -> {op.name}, rel err {fmt_err(op.rel_err)} ({op.why})"
        try:
            script = write_repro(
                op, ctx.artifact("repro"), ctx.device.name, prec.compute_dtype, list(ctx.imports), mod.name
            )
            r.fields["repro"] = str(script)
            r.artifacts["repro"] = str(script)
        except (ValueError, OSError) as e:
            r.fields["repro"] = f"not written: {e}"
    return {"max_rel_err": r.fields.get("op_rel_err") or (w.rel_rmse if w else None)}


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    console.print(case_table("localize", results, []))
    for r in results:
        if r.fields.get("compiled_region"):
            console.print(escape(f"{r.name}: {r.reason}"), highlight=False)
        if r.fields.get("first_module"):
            console.print(escape(f"{r.name}: {r.reason}"), highlight=False)
            if r.fields.get("first_op"):
                console.print(
                    escape(
                        f"  op inputs {r.fields['op_shapes']} {r.fields['op_dtypes']}, bound {r.fields['op_bound']:.2g}"
                    ),
                    highlight=False,
                )
            if r.fields.get("repro"):
                console.print(escape(f"  repro: {r.fields['repro']}"), highlight=False)
    keys = ("first_module", "first_op", "op_rel_err", "repro", "compiled_region")
    return {"localize": [{"case": r.name, **{k: r.fields.get(k) for k in keys}} for r in results]}
