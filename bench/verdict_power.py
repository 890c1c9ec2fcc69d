"""Verdict power of the zoo's verdicts (the whole-model parity rule and the module check): perturbation
family x strength x precision -> flagged / applicable, and the false failures of correct backends, on
the quick zoo plus causal-LM types.

    .venv/bin/python bench/verdict_power.py [--precisions fp32,amp-bf16,bf16] [--families act,gate,...]
        [--strengths 0.01,0.02] [--held-out] [--models llama,gpt2,...] [--limit N]
        [--clean eager,aot_eager,inductor,splitk,upcast,sdpa_math] [--steps K] [--noise-seeds N]
        [--module-check on|off] [--tails] [--old-shapes] [--json FILE]

Each model is run exactly as the zoo runs it (bringup/zoo/suite.py: the float64 reference, the trusted
cpu eager run at the precision, the trusted run under --noise-seeds more seeds, then `judge_run`: the
parity of loss, logits and every grad, and the loss curve; and the module check of
bringup/checks/module_check.py: step 0 recorded module by module, each module replayed on the "device"
eager, or compiled alone with the run's backend, and judged against float64 and the trusted run on
the same inputs). A run is flagged when either verdict fails; the rows keep both. The runs judged are:
  * scaling families (tests/zoo/perturb_backend.py: FAMILIES): each rewrites one kind of aten call in
    the forward and backward (an output x1.01, a bf16-accumulating matmul, a dropped bias).
  * bending families (tests/zoo/bend_backend.py: FAMILIES, and with --held-out HELD_OUT): each rewrites
    one kind of torch-level call into a bent function (a sharper gate, a softmax temperature, an
    attention scale, a norm's epsilon, a wrong decomposition, a backward-only error) at each of its
    strengths (STRENGTHS; --strengths overrides); a run is named FAMILY@STRENGTH.
    `--inject mode` (default): a dispatch mode (scaling) or torch-function mode (bending) over the eager
    run's forward and backward (no graph to trace, so ~20x cheaper); `--inject compile`: a dynamo
    backend that rewrites the graphs and runs them like aot_eager (what the tests use; its module check
    compiles each module alone with that backend). "applicable" means the family perturbed at least one
    call of that model's step; "flagged" that the zoo's verdict on that run is a failure.
  * correct backends: eager (cpu eager on 1 thread: other reduction splits than the trusted run's;
    often bit-identical to the trusted run in low precision), aot_eager, inductor, and the correct
    variants of tests/zoo/perturb_backend.py (VARIANTS: `splitk` sums matmuls in another order,
    `upcast` computes activations, norms, softmax and SDPA in a wider dtype and rounds once, as fused
    accelerator kernels do, `sdpa_math` takes PyTorch's math attention path instead of the fused cpu
    kernel). Any of those flagged is a false failure.
Each family run also records its `effect`: the same family injected into the float64 reference run and
compared with the clean float64 run, as relative RMS (the largest over the gradients) and as bias, so
power can be read against the size of the change the perturbation makes to the result (a 1% error in
an op whose output a norm rescales may change nothing), not only against the op's own error. The
resolution table gives, per bending family and precision, the smallest strength flagged on >= 95% of
the models it applies to.
It is a bench, not a test: on 2 cores the default set takes tens of minutes (inductor compiles
dominate); --limit / --families / --precisions / --clean cut it down. Rows are appended to --json as
they finish, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "zoo"))

import bend_backend as bb  # noqa: E402
import convention_backend as cb  # noqa: E402
import datapath_backend as dp  # noqa: E402
import perturb_backend as pb  # noqa: E402
import tail_backend as tb  # noqa: E402

import bringup.models  # noqa: E402,F401  (torchvision shim first)
from bringup.case import Case, CaseResult, Status  # noqa: E402
from bringup.checks.parity import AGG_DTYPES, agg_term, judged_dtype, parity, rel_rmse, rms, scale_floor  # noqa: E402
from bringup.precision import parse_precision  # noqa: E402
from bringup.zoo import judge as zj  # noqa: E402
from bringup.zoo import run as sz  # noqa: E402
from bringup.zoo.args import NOISE_SEEDS  # noqa: E402
from bringup.zoo.spec import ZooSpec  # noqa: E402

QUICK = [("hf", "llama"), ("hf", "gpt2"), ("hf", "qwen3"), ("timm", "test_resnet")]
# 26 causal-LM types beyond the quick zoo: dense, GQA/MQA, MoE, parallel blocks, ALiBi, eager-softmax
# attention (bloom, gpt_neox, opt...), learned and rotary positions, LayerNorm / RMSNorm with and
# without biases, gelu / silu / relu MLPs.
LMS = [
    "mistral",
    "qwen2",
    "phi",
    "phi3",
    "gemma",
    "gemma2",
    "falcon",
    "gpt_neox",
    "gptj",
    "bloom",
    "opt",
    "olmo",
    "olmo2",
    "stablelm",
    "starcoder2",
    "cohere",
    "granite",
    "mpt",
    "codegen",
    "gpt_bigcode",
    "mixtral",
    "qwen2_moe",
    "persimmon",
    "biogpt",
    "xglm",
    "glm",
]
# masked_uniform: cpu eager whose SDPA gives a fully masked row the uniform convention instead of 0 (convention_backend:
# a kernel that adds a finite minimum to masked scores): correct wherever a loss or a gradient reads
CLEAN = ("eager", "aot_eager", "inductor", *pb.VARIANTS, "masked_uniform")
EFFECT_BINS = (0.0025, 0.005, 0.01, 0.02)  # float64 effect of a family run: max rel_rmse over the grads
PRECISIONS = ("fp32", "amp-bf16", "bf16")
RESOLUTION = 0.95  # a strength is resolved at a precision when flagged on >= 95% of the models it applies to


def _bend(run: str) -> tuple[str, float] | None:
    """ "gate@0.01" -> ("gate", 0.01); a scaling family or a clean backend -> None."""
    fam, at, d = run.partition("@")
    return (fam, float(d)) if at else None


def _context(run: str, kind: str) -> Any:
    """The step context of an eager run: a correct variant, a scaling family (dispatch mode) or a bend."""
    if kind == "clean":
        if run == "masked_uniform":
            return lambda: cb.MaskedRowsMode("uniform")
        return (lambda: pb.CorrectMode(run)) if run in pb.VARIANTS else None
    b = _bend(run)
    if b is not None:
        return lambda: bb.BendMode(*b)
    return lambda: pb.FamilyMode(run)


def _backend(run: str, kind: str, inject: str) -> Any:
    if kind == "clean":
        return None if run in ("eager", "masked_uniform") or run in pb.VARIANTS else run
    if inject != "compile":
        return None
    b = _bend(run)
    return bb.bend_backend(*b) if b is not None else pb.family_backend(run)


def _counted(run: str, kind: str) -> int:
    if kind == "clean":
        return 0
    b = _bend(run)
    return bb.BEND_CALLS[b[0]] if b is not None else pb.FAMILY_NODES[run]


def _new_check(built: Any, prec: Any) -> Any:
    from bringup.zoo import modules as zoo_modules

    return zoo_modules.new_check(built.model, prec, torch.device("cpu"))


def _one(built: Any, init: Any, batches: Any, prec: Any, backend: Any, threads: int | None, ctx: Any, mc: Any) -> Any:
    torch._dynamo.reset()
    old = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return sz.train_run(
            built,
            init,
            batches,
            torch.device("cpu"),
            prec,
            sz.RunHow(backend=backend, step_context=ctx, module_check=mc),
        )
    finally:
        torch.set_num_threads(old)


def _probe(built: Any, init: Any, batch: Any, prec: Any) -> set[str]:
    """The torch-level calls one step makes (which bending families can apply)."""
    from torch.overrides import TorchFunctionMode

    names: set[str] = set()

    class Log(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            names.add(bb._name(func))
            return func(*args, **(kwargs or {}))

    sz.train_run(built, init, [batch], torch.device("cpu"), prec, sz.RunHow(step_context=Log))
    return names


def run_model(
    src: str,
    model: str,
    prec_name: str,
    families: list[str],
    clean: list[str],
    steps: int,
    noise_seeds: int,
    inject: str = "mode",
    module_check: bool = True,
    inputs: str = "text",
) -> list[dict[str, Any]]:
    prec = parse_precision(prec_name)
    spec = ZooSpec(
        source=src,
        model=model,
        task="causal-lm" if src == "hf" else "",
        dtype=prec_name,
        steps=steps,
        seed=0,
        noise_seeds=noise_seeds,
        inputs=inputs,
        **SHAPES,
    )
    head = {"model": model, "precision": prec_name, "inputs": inputs, "shapes": "old" if SHAPES["seq"] else "real"}
    cpu = torch.device("cpu")
    t0 = time.monotonic()
    try:
        prep = sz.prepare(spec)  # the zoo's own: build, batches, float64 reference (right padding only if needed)
        built, init, batches, ref = prep.built, prep.init, prep.batches, prep.ref
        base_mc = _new_check(built, prec) if module_check else None
        base = sz.train_run(built, init, batches, cpu, prec, sz.RunHow(module_check=base_mc))
    except Exception as e:  # a model the zoo itself would call ref_fail
        return [{**head, "run": "setup", "status": "ref_fail", "why": f"{type(e).__name__}: {e}"[:300]}]
    gross = parity(base.tensors, ref.tensors, prec, trusted=True, zeros=prep.zeros)
    if not gross.ok:
        return [{**head, "run": "setup", "status": "ref_fail", "why": f"trusted run off float64: {gross.summary()}"}]
    noise = sz.trusted_noise(spec, prep)
    calls = _probe(built, init, batches[0], prec)
    rows = [
        {
            **head,
            "run": "setup",
            "status": "ok",
            "seconds": round(time.monotonic() - t0, 1),
            "noise_seeds": noise.seeds,
            "noise_errors": noise.errors,
            "agg_rounded": rounded_agg(ref.tensors, base.tensors, noise, prec),
        }
    ]
    runs: list[tuple[str, str]] = [(c, "clean") for c in clean]
    for f in families:
        b = _bend(f)
        if b is not None and not any(bb.applies(b[0], n) for n in calls):
            rows.append({**head, "run": f, "kind": "family", "nodes": 0})  # not applicable: not run
            continue
        runs.append((f, "family"))
    for name, kind in runs:
        t = time.monotonic()
        before = _counted(name, kind)
        backend = _backend(name, kind, inject)
        ctx = None if backend is not None else _context(name, kind)
        mc = _new_check(built, prec) if module_check and backend is None else None
        try:
            got = _one(built, init, batches, prec, backend, 1 if name == "eager" else None, ctx, mc)
        except Exception as e:
            rows.append({**head, "run": name, "kind": kind, "status": "error", "why": f"{type(e).__name__}: {e}"[:300]})
            continue
        nodes = _counted(name, kind) - before if kind == "family" else None
        rep, curve = zj.judge_run(got, ref, base, prec, noise)
        pads = CaseResult.for_case(Case("zoo", model, {}, ""), Status.PASS)
        zj.judge_pads(pads, "run", got, ref, prep.uniform)  # the pads: finite, or the case fails there
        whole = not (rep.ok and curve.ok) or pads.status is not Status.PASS
        mods: Any = None
        try:
            if mc is not None:
                mods = mc.judge_eager()
            elif base_mc is not None and backend is not None:
                mods = base_mc.judge_compiled(backend, label=f"compiled ({name})")
        except Exception as e:
            rows.append(
                {
                    **head,
                    "run": name,
                    "kind": kind,
                    "status": "error",
                    "why": f"module check: {type(e).__name__}: {e}"[:300],
                }
            )
            continue
        by_mods = mods is not None and not mods.ok
        why = rep.summary() if not rep.ok else curve.summary() if not curve.ok else pads.reason
        extra = {"effect": effect(built, init, batches, prec, ref, name)} if kind == "family" and nodes else {}
        rows.append(
            {
                **head,
                "run": name,
                "kind": kind,
                "nodes": nodes,
                "flagged": whole or by_mods,
                "whole": whole,
                "modules": by_mods,
                "by": ("parity" if not rep.ok else "curve" if not curve.ok else "pads")
                if whole
                else ("modules" if by_mods else ""),
                "fully_masked_rows": pads.fields.get("fully_masked_rows", {}).get("run"),
                "score": round(rep.score, 3),
                "agg": None if rep.agg is None else round(rep.agg, 3),
                "why": why[:300],
                "module_score": None if mods is None else round(min(mods.score, 1e6), 3),
                "module_why": None if mods is None else mods.summary()[:400],
                "modules_judged": None if mods is None else len(mods.judged),
                "module_s": None if mods is None else round(mods.seconds, 2),
                "seconds": round(time.monotonic() - t, 1),
                **extra,
            }
        )
    return rows


def rounded_agg(ref: dict[str, Any], base: dict[str, Any], noise: Any, prec: Any) -> float | None:
    """The whole-run size statistic (checks/parity.py: the geometric mean over tensors of rel_rmse / the trusted runs'
    RMS rel_rmse, judged <= AGG_FUDGE in low precision) of the case's rounding-elsewhere runs (its float64 step with
    every op result rounded once at random at the run's precision, `Noise.dither`): where a device lands that rounds
    each op's result once more than cpu eager, and nothing else. None where the rule does not judge."""
    dt = judged_dtype(prec)
    if dt not in AGG_DTYPES:
        return None
    floor = scale_floor(ref.values(), dt)
    logs: list[float] = []
    for name, r in ref.items():
        b, nz = base.get(name), noise.tensors.get(name)
        if b is None or nz is None or not nz.dither or tuple(b.shape) != tuple(r.shape):
            continue
        zero = name in noise.zeros or rms(r) == 0.0
        errs = [rel_rmse(b, r, floor if zero else 0.0), *nz.rel_rmse]
        logs += [x for d in nz.dither if (x := agg_term(d, errs)) is not None]
    return round(math.exp(sum(logs) / len(logs)), 3) if logs else None


def effect(built: Any, init: Any, batches: Any, prec: Any, ref: Any, family: str) -> dict[str, Any]:
    """What the perturbation does to the result itself: the family injected into the float64 reference
    run, compared with the clean float64 reference. max rel_rmse over the gradients (the relative RMS of
    the change), max rel_rmse over every judged tensor and max |bias| (the least-squares scale of the
    change along the tensor), numerically-zero references left out as parity leaves them out: a 1% op
    error whose effect on every result is 0.2% is a 0.2% signal, whatever the op's own error."""
    from bringup.checks import parity as P

    pert = sz.train_run(
        built,
        init,
        batches,
        torch.device("cpu"),
        torch.float64,
        sz.RunHow(round_to=prec.param_dtype, step_context=_context(family, "family")),
    )
    floor = P.scale_floor(ref.tensors.values(), P.judged_dtype(prec))
    worst = (0.0, "")
    rel = grad = 0.0
    for k, r in ref.tensors.items():
        g = pert.tensors.get(k)
        if g is None or tuple(g.shape) != tuple(r.shape) or P.rms(r) < floor:
            continue
        if bool(torch.isfinite(g).all()) and bool(torch.isfinite(r).all()):
            worst = max(worst, (abs(P.bias(g, r)), k))
            rel = max(rel, P.rel_rmse(g, r))
            if k.startswith("grad."):
                grad = max(grad, P.rel_rmse(g, r))
    return {"bias": worst[0], "tensor": worst[1], "rel_rmse": rel, "grad_rel_rmse": grad}


def _applicable(r: dict[str, Any]) -> bool:
    return r.get("kind") == "family" and bool(r.get("nodes")) and "flagged" in r


def _cell(rows: list[dict[str, Any]], run: str, p: str, key: str = "flagged") -> tuple[int, int]:
    rs = [
        r
        for r in rows
        if r["run"] == run and r["precision"] == p and (_applicable(r) or (r.get("kind") == "clean" and "flagged" in r))
    ]
    return sum(bool(r.get(key)) for r in rs), len(rs)


def _label(run: str) -> str:
    b = _bend(run)
    if b is not None:
        desc = bb.FAMILIES.get(b[0]) or bb.HELD_OUT.get(b[0]) or dp.DATAPATH.get(b[0]) or tb.TAIL.get(b[0], "")
        return f"{run} ({desc.split(':')[0]})"
    return f"{run} ({pb.FAMILIES.get(run, '')})"


def _group(run: str) -> str:
    """scaling (perturb_backend.FAMILIES), bending (bend_backend.FAMILIES), held-out (bend_backend.HELD_OUT) or
    datapath (datapath_backend.DATAPATH: what only a job's batches exercise) or tail (tail_backend.TAIL: what only
    shapes that no block divides exercise)."""
    b = _bend(run)
    if b is None:
        return "scaling"
    if b[0] in dp.DATAPATH:
        return "datapath"
    if b[0] in tb.TAIL:
        return "tail"
    return "held-out" if b[0] in bb.HELD_OUT else "bending"


def table(rows: list[dict[str, Any]], families: list[str], clean: list[str], precisions: list[str]) -> str:
    """flagged / applicable per family (either verdict; the whole-model rule alone in brackets), false
    failures per correct backend (none when `clean` is empty), then the misses and false failures by model."""
    w = 16
    errors = [r for r in rows if r.get("status") == "error" and (r["run"] in families or r["run"] in clean)]

    def frac(k: str, p: str) -> str:
        n, d = _cell(rows, k, p)
        nw, _ = _cell(rows, k, p, "whole")
        return f"{n}/{d} [{nw}]"

    out = [
        f"| flagged / applicable [whole-model rule alone] | {' | '.join(precisions)} |",
        "|---" * (len(precisions) + 1) + "|",
    ]
    for f in families:
        if any(_cell(rows, f, p)[1] for p in precisions):
            out.append(f"| {_label(f)} | " + " | ".join(f"{frac(f, p):>{w}}" for p in precisions) + " |")
    if clean:
        out.append(f"| **false failures / runs** [whole-model rule alone] | {' | '.join(precisions)} |")
    for c in clean:
        out.append(f"| {c} | " + " | ".join(f"{frac(c, p):>{w}}" for p in precisions) + " |")
    setups = [r for r in rows if r.get("run") == "setup"]
    bad = sorted({r["model"] for r in setups if r["status"] != "ok"})
    out.append(
        f"models judged: {len({r['model'] for r in setups if r['status'] == 'ok'})}; ref_fail: "
        f"{', '.join(bad) or 'none'}"
    )
    for r in errors:
        why = " ".join(r["why"].split())[:100]
        out.append(f"  error (not a verdict): {r['model']} {r['precision']} {r['run']}: {why}")
    missed: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in rows:
        if _applicable(r) and not r["flagged"] and r["run"] in families:
            missed[(r["run"], r["precision"])].append(r["model"])
        elif r.get("kind") == "clean" and r.get("flagged") and r["run"] in clean:
            missed[(r["run"], r["precision"])].append(f"{r['model']} ({r.get('by')})")
    for (k, p), ms in sorted(missed.items()):
        label = "flagged (false failure)" if k in clean else "missed"
        out.append(f"  {k} {p} {label}: {', '.join(ms)}")
    return "\n".join(out)


def _effect(r: dict[str, Any], key: str = "grad_rel_rmse") -> float:
    e = r.get("effect") or {}
    return float(e.get(key, e.get("rel_rmse", 0.0)))


def family_table(rows: list[dict[str, Any]], precisions: list[str], groups: tuple[str, ...]) -> str:
    """Per family (its strengths pooled) and precision: flagged / applicable among the runs whose effect on
    the result (float64, max relative RMS change of a gradient) is >= 1%, and among those under 1%."""
    fams = sorted(
        {(_bend(r["run"]) or (r["run"], 0))[0] for r in rows if _applicable(r) and _group(r["run"]) in groups}
    )
    head = " | ".join(f"{p} >= 1% | {p} < 1%" for p in precisions)
    out = [
        f"| family (strengths pooled): flagged / applicable by effect [whole-model alone] | {head} |",
        "|---" * (2 * len(precisions) + 1) + "|",
    ]
    for fam in fams:
        cells = []
        for p in precisions:
            rs = [
                r
                for r in rows
                if _applicable(r)
                and r["precision"] == p
                and "effect" in r
                and (_bend(r["run"]) or (r["run"], 0))[0] == fam
            ]
            for big in (True, False):
                sel = [r for r in rs if (_effect(r) >= 0.01) == big]
                n, nw = sum(bool(r["flagged"]) for r in sel), sum(bool(r.get("whole")) for r in sel)
                cells.append(f"{n}/{len(sel)} [{nw}]" if sel else "-")
        out.append(f"| {fam} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def effect_table(
    rows: list[dict[str, Any]],
    precisions: list[str],
    key: str = "grad_rel_rmse",
    groups: tuple[str, ...] = ("scaling", "bending", "held-out"),
) -> str:
    """Power by the size of the perturbation's effect on the result (float64: max relative RMS change of
    a gradient), the families of `groups` together; the last row is the issue's goal (effect >= 1%)."""
    edges = (0.0, *EFFECT_BINS, float("inf"))
    head = f"| effect on the result (float64, max grad rel RMS): {' + '.join(groups)} | {' | '.join(precisions)} |"
    out = [head, "|---" * (len(precisions) + 1) + "|"]
    for lo, hi in [*zip(edges, edges[1:], strict=False), (0.01, float("inf"))]:
        label = f"{lo:.2%} - {hi:.2%}" if hi != float("inf") else f">= {lo:.2%}"
        if (lo, hi) == (0.01, float("inf")):
            label = f"**goal: >= {lo:.0%}** (either rule) [whole-model alone]"
        cells = []
        for p in precisions:
            rs = [
                r
                for r in rows
                if _applicable(r)
                and r["precision"] == p
                and "effect" in r
                and _group(r["run"]) in groups
                and lo <= _effect(r, key) < hi
            ]
            cells.append(f"{sum(r['flagged'] for r in rs)}/{len(rs)} [{sum(bool(r.get('whole')) for r in rs)}]")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def resolution_table(rows: list[dict[str, Any]], precisions: list[str]) -> str:
    """Per bending family and precision: the smallest strength flagged on >= RESOLUTION of the models it
    applies to (and the median float64 effect of that strength), '-' when none is."""
    fams: dict[str, set[float]] = defaultdict(set)
    for r in rows:
        b = _bend(r["run"]) if _applicable(r) else None
        if b is not None:
            fams[b[0]].add(b[1])
    out = [
        f"| resolution (smallest strength flagged >= {RESOLUTION:.0%}; median effect) | {' | '.join(precisions)} |",
        "|---" * (len(precisions) + 1) + "|",
    ]
    for fam in sorted(fams):
        cells = []
        for p in precisions:
            found = "-"
            for d in sorted(fams[fam], key=abs):
                rs = [r for r in rows if _applicable(r) and r["run"] == f"{fam}@{d:g}" and r["precision"] == p]
                if rs and sum(r["flagged"] for r in rs) >= RESOLUTION * len(rs):
                    eff = sorted(r.get("effect", {}).get("grad_rel_rmse", 0.0) for r in rs)
                    found = f"{d:g} ({len(rs)} models; effect {eff[len(eff) // 2]:.2%})"
                    break
            cells.append(found)
        out.append(f"| {fam} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def cost_table(rows: list[dict[str, Any]], precisions: list[str]) -> str:
    """Median seconds the module check added to a run (replays, references, judging; compiles)."""
    out = [f"| module check s per run (median) | {' | '.join(precisions)} |", "|---" * (len(precisions) + 1) + "|"]
    kinds = (
        ("eager runs", lambda r: r["run"] not in ("aot_eager", "inductor")),
        ("aot_eager", lambda r: r["run"] == "aot_eager"),
        ("inductor", lambda r: r["run"] == "inductor"),
    )
    for kind, pick in kinds:
        cells = []
        for p in precisions:
            v = sorted(r["module_s"] for r in rows if r.get("module_s") is not None and r["precision"] == p and pick(r))
            cells.append(f"{v[len(v) // 2]:.1f} ({len(v)})" if v else "-")
        out.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def report(rows: list[dict[str, Any]], families: list[str], clean: list[str], precisions: list[str]) -> str:
    """Every table: the families the rule was developed on (scaling, bending) and the correct backends, then
    the held-out families on their own (written after the rule was frozen), by strength, by family and
    effect, the resolution, power by effect, and the module check's cost."""
    dev = [f for f in families if _group(f) not in ("held-out", "datapath", "tail")]
    held = [f for f in families if _group(f) == "held-out"]
    data = [f for f in families if _group(f) == "datapath"]
    tails = [f for f in families if _group(f) == "tail"]
    parts = [table(rows, dev, clean, precisions)]
    if held:
        parts.append(
            "held-out families (written after the module rule was frozen; measured only):\n"
            + table(rows, held, [], precisions)
        )
    if data:
        parts.append(
            "data-path families (what only a job's batches exercise; measured only):\n"
            + table(rows, data, [], precisions)
        )
    if tails:
        parts.append(
            "tail families (what only shapes that no block divides exercise; measured only):\n"
            + table(rows, tails, [], precisions)
        )
    parts += [
        family_table(rows, precisions, ("scaling", "bending")),
        family_table(rows, precisions, ("held-out",)),
        family_table(rows, precisions, ("datapath",)),
        family_table(rows, precisions, ("tail",)),
        resolution_table(rows, precisions),
        effect_table(rows, precisions, groups=("scaling", "bending")),
        effect_table(rows, precisions, groups=("held-out",)),
        effect_table(rows, precisions, groups=("datapath",)),
        effect_table(rows, precisions, groups=("tail",)),
        cost_table(rows, precisions),
    ]
    return "\n\n".join(parts)


SHAPES = {"batch": 0, "seq": 0}  # a case's rows and tokens (0: the zoo's defaults); --old-shapes: 2 x 32


def old_shapes() -> None:
    """The zoo's shapes before 2026-12-06, for this process: the shrinker's sizes and the rows' length and count."""
    import dataclasses

    from bringup.models import tiny_config as zc

    old = dataclasses.replace(zc.SIZES, **tb.OLD_SIZES)
    zc.shrink_dict.__defaults__ = (old,)
    zc.tiny_config.__defaults__ = (old,)
    SHAPES.update(batch=tb.OLD_ROWS, seq=tb.OLD_SEQ)


def _families(
    arg: str, strengths: str | None, held_out: bool, datapath: bool = False, tails: bool = False
) -> list[str]:
    out: list[str] = []
    names = [f for f in arg.split(",") if f]
    if held_out:
        names += [f for f in bb.HELD_OUT if f not in names]
    if datapath:
        names += [f for f in dp.DATAPATH if f not in names]
    if tails:
        names += [f for f in tb.TAIL if f not in names]
    bends = {**bb.FAMILIES, **bb.HELD_OUT, **dp.DATAPATH, **tb.TAIL}
    for f in names:
        if f in pb.FAMILIES:
            out.append(f)
        elif f in bends:
            ds = list(bb.STRENGTHS.get(f, (0.01,)))
            if strengths == "min":  # the smallest strength of each family (a resolution bound: caught there, or not)
                ds = [min(ds, key=abs)]
            elif strengths:
                ds = [float(x) for x in strengths.split(",")]
            out += [f"{f}@{d:g}" for d in ds]
        elif _bend(f) is not None and _bend(f)[0] in bends:  # type: ignore[index]
            out.append(f)
        else:
            raise ValueError(f"unknown family {f!r}; one of {', '.join([*pb.FAMILIES, *bb.FAMILIES, *bb.HELD_OUT])}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument(
        "--families",
        default=",".join([*pb.FAMILIES, *bb.FAMILIES]),
        help="scaling (perturb_backend.FAMILIES) and bending (bend_backend.FAMILIES) families; a "
        "bending family runs at each of its STRENGTHS, or FAMILY@STRENGTH",
    )
    ap.add_argument(
        "--strengths", default=None, help="comma list: every bending family's strengths; 'min': each one's smallest"
    )
    ap.add_argument("--held-out", action="store_true", help="add the held-out bending families (bend_backend.HELD_OUT)")
    ap.add_argument(
        "--datapath",
        action="store_true",
        help="add the data-path families (datapath_backend.DATAPATH: only real batches exercise them)",
    )
    ap.add_argument(
        "--tails",
        action="store_true",
        help="add the tail families (tail_backend.TAIL: only shapes that no block divides exercise them)",
    )
    ap.add_argument(
        "--old-shapes",
        action="store_true",
        help="the zoo's shapes before 2026-12-06 (rows of 32 tokens, 2 rows, hidden 64, head dim 16, ffn 128, "
        "vocab 256, 2 query heads per kv head): every block divides them",
    )
    ap.add_argument("--clean", default=",".join(CLEAN), help="correct backends to check for false failures")
    ap.add_argument("--models", default=None, help="comma list (timm names start with test_); default quick zoo + LMS")
    ap.add_argument("--limit", type=int, default=None, help="at most N models")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--noise-seeds", type=int, default=NOISE_SEEDS)
    ap.add_argument("--module-check", choices=["on", "off"], default="on", help="the module-level verdict too")
    ap.add_argument(
        "--inject",
        choices=["mode", "compile"],
        default="mode",
        help="how families are injected: mode = a dispatch / torch-function mode in eager (default, no "
        "tracing); compile = a dynamo backend rewriting the graphs (~20x slower per run)",
    )
    ap.add_argument(
        "--inputs",
        choices=["text", "uniform"],
        default="text",
        help="the zoo's batches (text: Zipf ids, padded and packed microbatches; uniform: the old layout)",
    )
    ap.add_argument("--json", default="verdict_power.json")
    ap.add_argument("--append", action="store_true", help="append to --json instead of starting it afresh")
    ap.add_argument("--table-only", action="store_true", help="print the tables of an existing --json")
    a = ap.parse_args(argv)
    precisions = [p for p in a.precisions.split(",") if p]
    try:
        families = _families(a.families, a.strengths, a.held_out, a.datapath, a.tails)
    except ValueError as e:
        ap.error(str(e))
    clean = [c for c in a.clean.split(",") if c]
    for p in precisions:
        try:
            parse_precision(p)
        except Exception as e:
            ap.error(str(e))
    if a.table_only:
        rows = [json.loads(x) for x in Path(a.json).read_text().splitlines() if x.strip()]
        if not a.families or a.families == ",".join([*pb.FAMILIES, *bb.FAMILIES]):
            seen = {r["run"] for r in rows if r.get("kind") == "family"}
            families = sorted(seen, key=lambda x: (_bend(x) is not None, _bend(x) or (x, 0)))
        print(report(rows, families, clean, precisions))
        return 0
    if a.models:
        models = [("timm" if m.startswith("test_") else "hf", m) for m in a.models.split(",") if m]
    else:
        models = QUICK + [("hf", m) for m in LMS]
    models = models[: a.limit] if a.limit else models
    if a.old_shapes:
        old_shapes()
    out = Path(a.json)
    if not a.append:
        out.write_text("")
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for src, m in models:
        for p in precisions:
            new = run_model(
                src, m, p, families, clean, a.steps, a.noise_seeds, a.inject, a.module_check == "on", a.inputs
            )
            rows += new
            with out.open("a") as fh:
                for r in new:
                    fh.write(json.dumps(r) + "\n")
            flagged = [r["run"] for r in new if r.get("flagged")]
            print(
                f"[{time.monotonic() - t0:7.0f}s] {m} {p}: {new[0]['status']}; flagged: {', '.join(flagged) or '-'}",
                flush=True,
            )
    print(report(rows, families, clean, precisions))
    print(f"command: {' '.join(sys.argv)}; {time.monotonic() - t0:.0f} s; rows in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
