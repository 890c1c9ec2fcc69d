"""Verdict power of the zoo's parity rule: perturbation family x precision -> flagged / applicable, and
the false failures of correct backends, on the quick zoo plus causal-LM types.

    .venv/bin/python bench/verdict_power.py [--precisions fp32,amp-bf16,bf16] [--families act,norm,...]
        [--models llama,gpt2,...] [--limit N] [--clean eager,aot_eager,inductor,splitk,upcast,sdpa_math] [--steps K]
        [--noise-seeds N] [--json FILE]

Each model is run exactly as the zoo runs it (bringup/suites/zoo.py: the float64 reference, the trusted
cpu eager run at the precision, the trusted run under --noise-seeds more seeds, then `judge_run`: the
parity of loss, logits and every grad, and the loss curve). The runs judged are:
  * perturbation families (tests/zoo/perturb_backend.py: FAMILIES): each rewrites one kind of aten
    call in the forward and backward. `--inject mode` (default): a TorchDispatchMode over the eager
    run's forward and backward (FamilyMode: no graph to trace, so ~20x cheaper); `--inject compile`: a
    dynamo backend that rewrites the AOT forward/backward graphs and runs them like aot_eager (what the
    tests use). "applicable" means the family perturbed at least one call of that model's step;
    "flagged" that the zoo's verdict on that run is a failure.
  * correct backends: eager (cpu eager on 1 thread: other reduction splits than the trusted run's;
    often bit-identical to the trusted run in low precision), aot_eager, inductor, and the correct
    variants of tests/zoo/perturb_backend.py (VARIANTS: `splitk` sums matmuls in another order,
    `upcast` computes activations, norms, softmax and SDPA in a wider dtype and rounds once, as fused
    accelerator kernels do, `sdpa_math` takes PyTorch's math attention path instead of the fused cpu
    kernel). Any of those flagged is a false failure.
Each family run also records its `effect`: the same family injected into the float64 reference run,
so power can be read against the size of the change the perturbation makes to the result (a 1% error
in an op whose output a norm rescales may change nothing), not only against the op's own error.
It is a bench, not a test: on 2 cores the default set takes tens of minutes (inductor compiles
dominate); --limit / --families / --precisions / --clean cut it down. Rows are appended to --json as
they finish, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "zoo"))

import perturb_backend as pb  # noqa: E402

import bringup.models  # noqa: E402,F401  (torchvision shim first)
from bringup.checks.parity import parity  # noqa: E402
from bringup.precision import parse_precision  # noqa: E402
from bringup.suites import zoo as sz  # noqa: E402

QUICK = [("hf", "llama"), ("hf", "gpt2"), ("hf", "qwen3"), ("timm", "test_resnet")]
# 26 causal-LM types beyond the quick zoo: dense, GQA/MQA, MoE, parallel blocks, ALiBi, eager-softmax
# attention (bloom, gpt_neox, opt...), learned and rotary positions, LayerNorm / RMSNorm with and
# without biases, gelu / silu / relu MLPs.
LMS = ["mistral", "qwen2", "phi", "phi3", "gemma", "gemma2", "falcon", "gpt_neox", "gptj", "bloom", "opt",
       "olmo", "olmo2", "stablelm", "starcoder2", "cohere", "granite", "mpt", "codegen", "gpt_bigcode",
       "mixtral", "qwen2_moe", "persimmon", "biogpt", "xglm", "glm"]  # fmt: skip
CLEAN = ("eager", "aot_eager", "inductor", *pb.VARIANTS)
EFFECT_BINS = (0.0025, 0.005, 0.01)  # float64 effect of a family run: max |bias| over the judged tensors
PRECISIONS = ("fp32", "amp-bf16", "bf16")


def _one(built: Any, init: Any, batches: Any, prec: Any, backend: Any, threads: int | None,
         mode: str | None = None) -> Any:  # fmt: skip
    torch._dynamo.reset()
    old = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        ctx = None
        if mode in pb.VARIANTS:
            ctx = lambda: pb.CorrectMode(mode)
        elif mode:
            ctx = lambda: pb.FamilyMode(mode)
        return sz.train_run(built, init, batches, torch.device("cpu"), prec, backend=backend, step_context=ctx)
    finally:
        torch.set_num_threads(old)


def run_model(src: str, model: str, prec_name: str, families: list[str], clean: list[str], steps: int,
              noise_seeds: int, inject: str = "mode") -> list[dict[str, Any]]:  # fmt: skip
    prec = parse_precision(prec_name)
    params = {"source": src, "model": model, "task": "causal-lm", "seed": 0}
    head = {"model": model, "precision": prec_name}
    cpu = torch.device("cpu")
    t0 = time.monotonic()
    try:
        built = sz.build_model(params)
        init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
        batches = [built.make_batch(i) for i in range(steps)]
        ref = sz.train_run(built, init, batches, cpu, torch.float64, round_to=prec.param_dtype)
        base = sz.train_run(built, init, batches, cpu, prec)
    except Exception as e:  # a model the zoo itself would call ref_fail
        return [{**head, "run": "setup", "status": "ref_fail", "why": f"{type(e).__name__}: {e}"[:300]}]
    gross = parity(base.tensors, ref.tensors, prec, trusted=True)
    if not gross.ok:
        return [{**head, "run": "setup", "status": "ref_fail", "why": f"trusted run off float64: {gross.summary()}"}]
    noise = sz.measure_noise(params, prec, steps, noise_seeds)
    rows = [{**head, "run": "setup", "status": "ok", "seconds": round(time.monotonic() - t0, 1),
             "noise_seeds": noise.seeds, "noise_errors": noise.errors}]  # fmt: skip
    runs: list[tuple[str, str, Any, int | None]] = []
    for c in clean:
        runs.append((c, "clean", None if c == "eager" or c in pb.VARIANTS else c, 1 if c == "eager" else None))
    for f in families:
        runs.append((f, "family", pb.family_backend(f) if inject == "compile" else None, None))
    for name, kind, backend, threads in runs:
        t = time.monotonic()
        before = pb.FAMILY_NODES[name] if kind == "family" else 0
        mode = name if (kind == "family" and inject == "mode") or name in pb.VARIANTS else None
        try:
            got = _one(built, init, batches, prec, backend, threads, mode)
        except Exception as e:
            rows.append({**head, "run": name, "kind": kind, "status": "error", "why": f"{type(e).__name__}: {e}"[:300]})
            continue
        nodes = pb.FAMILY_NODES[name] - before if kind == "family" else None
        rep, curve = sz.judge_run(got, ref, base, prec, noise)
        flagged = not (rep.ok and curve.ok)
        why = rep.summary() if not rep.ok else curve.summary()
        extra = {"effect": effect(built, init, batches, prec, ref, name)} if kind == "family" and nodes else {}
        rows.append({**head, "run": name, "kind": kind, "nodes": nodes, "flagged": flagged,
                     "by": ("parity" if not rep.ok else "curve") if flagged else "", "score": round(rep.score, 3),
                     "why": why[:300], "seconds": round(time.monotonic() - t, 1), **extra})  # fmt: skip
    return rows


def effect(built: Any, init: Any, batches: Any, prec: Any, ref: Any, family: str) -> dict[str, Any]:
    """What the perturbation does to the result itself: the family injected into the float64 reference
    run, compared with the clean float64 reference. max |bias| (the least-squares scale of the change
    along the tensor) and max rel_rmse over the tensors parity judges by direction (numerically-zero
    references left out, as parity leaves them out): a 1% op error whose effect on every result is
    0.2% is a 0.2% signal, whatever the op's own error."""
    from bringup.checks import parity as P

    pert = sz.train_run(built, init, batches, torch.device("cpu"), torch.float64, round_to=prec.param_dtype,
                        step_context=lambda: pb.FamilyMode(family))  # fmt: skip
    floor = P.scale_floor(ref.tensors.values(), P.judged_dtype(prec))
    worst = (0.0, "")
    rel = 0.0
    for k, r in ref.tensors.items():
        g = pert.tensors.get(k)
        if g is None or tuple(g.shape) != tuple(r.shape) or P.rms(r) < floor:
            continue
        if bool(torch.isfinite(g).all()) and bool(torch.isfinite(r).all()):
            worst = max(worst, (abs(P.bias(g, r)), k))
            rel = max(rel, P.rel_rmse(g, r))
    return {"bias": worst[0], "tensor": worst[1], "rel_rmse": rel}


def effect_table(rows: list[dict[str, Any]], precisions: list[str]) -> str:
    """Power by the size of the perturbation's effect on the result (float64 max |bias|)."""
    edges = (0.0, *EFFECT_BINS, float("inf"))
    bins = list(zip(edges, edges[1:], strict=False))
    head = f"| effect on the result (float64 max bias) | {' | '.join(precisions)} |"
    out = [head, "|---" * (len(precisions) + 1) + "|"]
    for lo, hi in bins:
        label = f"{lo:.2%} - {hi:.2%}" if hi != float("inf") else f">= {lo:.2%}"
        cells = []
        for p in precisions:
            rs = [r for r in rows if r.get("kind") == "family" and r.get("nodes") and r["precision"] == p
                  and "effect" in r and lo <= r["effect"]["bias"] < hi]  # fmt: skip
            cells.append(f"{sum(r['flagged'] for r in rs)}/{len(rs)}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def table(rows: list[dict[str, Any]], families: list[str], clean: list[str], precisions: list[str]) -> str:
    cell: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    missed: dict[tuple[str, str], list[str]] = defaultdict(list)
    errors = [r for r in rows if r.get("status") == "error"]
    for r in rows:
        if "flagged" not in r:
            continue
        if r.get("kind") == "family" and r.get("nodes"):
            c = cell[(r["run"], r["precision"])]
            c[1] += 1
            c[0] += int(r["flagged"])
            if not r["flagged"]:
                missed[(r["run"], r["precision"])].append(r["model"])
        elif r.get("kind") == "clean":
            c = cell[(r["run"], r["precision"])]
            c[1] += 1
            c[0] += int(r["flagged"])
            if r["flagged"]:
                missed[(r["run"], r["precision"])].append(r["model"])
    w = 12

    def frac(k: str, p: str) -> str:
        n, d = cell[(k, p)]
        return f"{n}/{d}"

    out = [f"| flagged / applicable | {' | '.join(precisions)} |", "|---" * (len(precisions) + 1) + "|"]
    for f in families:
        out.append(f"| {f} ({pb.FAMILIES[f]}) | " + " | ".join(f"{frac(f, p):>{w}}" for p in precisions) + " |")
    out.append(f"| **false failures / runs** | {' | '.join(precisions)} |")
    for c in clean:
        out.append(f"| {c} | " + " | ".join(f"{frac(c, p):>{w}}" for p in precisions) + " |")
    setups = [r for r in rows if r.get("run") == "setup"]
    bad = sorted({r["model"] for r in setups if r["status"] != "ok"})
    out.append(f"models judged: {len({r['model'] for r in setups if r['status'] == 'ok'})}; ref_fail: "
               f"{', '.join(bad) or 'none'}")  # fmt: skip
    for r in errors:
        why = " ".join(r["why"].split())[:80]
        out.append(f"  error (not a verdict): {r['model']} {r['precision']} {r['run']}: {why}")
    for (k, p), ms in sorted(missed.items()):
        label = "flagged (false failure)" if k in clean else "missed"
        out.append(f"  {k} {p} {label}: {', '.join(ms)}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--families", default=",".join(pb.FAMILIES))
    ap.add_argument("--clean", default=",".join(CLEAN), help="correct backends to check for false failures")
    ap.add_argument("--models", default=None, help="comma list (timm names start with test_); default quick zoo + LMS")
    ap.add_argument("--limit", type=int, default=None, help="at most N models")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--noise-seeds", type=int, default=sz.NOISE_SEEDS)
    ap.add_argument("--inject", choices=["mode", "compile"], default="mode",
                    help="how families are injected: mode = a TorchDispatchMode in eager (default, no tracing); "
                    "compile = a dynamo backend rewriting the AOT graphs (~20x slower per run)")  # fmt: skip
    ap.add_argument("--json", default="verdict_power.json")
    ap.add_argument("--table-only", action="store_true", help="print the table of an existing --json")
    a = ap.parse_args(argv)
    precisions = [p for p in a.precisions.split(",") if p]
    families = [f for f in a.families.split(",") if f]
    clean = [c for c in a.clean.split(",") if c]
    for f in families:
        if f not in pb.FAMILIES:
            ap.error(f"unknown family {f!r}; one of {', '.join(pb.FAMILIES)}")
    for p in precisions:
        try:
            parse_precision(p)
        except Exception as e:
            ap.error(str(e))
    if a.table_only:
        rows = [json.loads(x) for x in Path(a.json).read_text().splitlines() if x.strip()]
        print(table(rows, families, clean, precisions))
        print(effect_table(rows, precisions))
        return 0
    if a.models:
        models = [("timm" if m.startswith("test_") else "hf", m) for m in a.models.split(",") if m]
    else:
        models = QUICK + [("hf", m) for m in LMS]
    models = models[: a.limit] if a.limit else models
    out = Path(a.json)
    out.write_text("")
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for src, m in models:
        for p in precisions:
            new = run_model(src, m, p, families, clean, a.steps, a.noise_seeds, a.inject)
            rows += new
            with out.open("a") as fh:
                for r in new:
                    fh.write(json.dumps(r) + "\n")
            flagged = [r["run"] for r in new if r.get("flagged")]
            print(f"[{time.monotonic() - t0:7.0f}s] {m} {p}: {new[0]['status']}; flagged: {', '.join(flagged) or '-'}",
                  flush=True)  # fmt: skip
    print(table(rows, families, clean, precisions))
    print(effect_table(rows, precisions))
    print(f"command: {' '.join(sys.argv)}; {time.monotonic() - t0:.0f} s; rows in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
