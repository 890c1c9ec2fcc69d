"""zoo --size full: a Hub model at its real size, judged without a float64 reference.

Per model, one case (isolated worker: a full-size model's memory must not outlive it):
  1. memory preflight (models/memory.py) on the meta-device model: params + grads + AdamW + activations vs
     the device's free memory (or --device-memory) -> when it does not fit: FSDP2 over --nproc ranks if that
     is enough (zoo/fsdp.py: steps 2 and 3 run sharded), else `unsupported` with the numbers and the
     --nproc it would need, before building.
  2. device eager: the real config materialised on the device in the run dtype (seeded init generated on
     cpu, the same numbers on every machine, or the cached safetensors), K AdamW steps on seeded batches:
     per step the loss, the total grad norm (before clipping) and the logits' std.
  3. device compiled (--compile-backend): graph breaks, and the same per-step series.
  4. verdicts, each with a tolerance from the two runs' own precisions (loss_rel of checks/parity.py's
     table, summed: each run may sit that far from exact):
     - compiled vs eager on the device;
     - --reference cpu: a cpu fp32 run of the first REF_STEPS steps from the same init and batches (when
       its own preflight fits; on a cpu device in fp32 that run IS the eager run, so it is not repeated);
     - --baseline BUNDLE: the same id at full size from another machine (its per-step series), in any
       precision: tolerance loss_rel(ours) + loss_rel(theirs).
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.checks.parity import tolerance_for
from bringup.device import Device
from bringup.hub import build as hub_build
from bringup.models import memory
from bringup.models import tiny as mz
from bringup.models.tiny import ConfigError
from bringup.precision import PRECISIONS, Precision, parse_precision
from bringup.zoo import fsdp as zoo_fsdp
from bringup.zoo.arm import Clock, compiled_arm, under_fallback_detector
from bringup.zoo.spec import UNMEASURED, ZooSpec, config_data, weights_for
from bringup.zoo.steps import FULL_LR as LR
from bringup.zoo.steps import MAX_GRAD_NORM, Feed, StepHooks, StepOutputs, no_dropout, step_fn, train_steps
from bringup.zoo.steps import fail as _fail

ENTRY = "bringup.zoo.full:run_full"
REF_STEPS = 2  # the cpu fp32 reference runs the first steps only (it can be slow)
SERIES = ("loss", "grad_norm", "logits_std")
CPU = torch.device("cpu")


@dataclass
class FullOut:
    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    logits_std: list[float] = field(default_factory=list)
    grad_norms0: dict[str, float] = field(default_factory=dict)  # step 0: each parameter's grad norm
    weights: str = ""
    seconds: float = 0.0
    first_step_s: float = 0.0


def tolerance(a: Precision, b: Precision) -> float:
    """Two runs, each within its precision's loss_rel of the exact value: they may differ by the sum."""

    return float(tolerance_for(a.compute_dtype).loss_rel + tolerance_for(b.compute_dtype).loss_rel)


def run_steps(
    params: ZooSpec | dict[str, Any],
    data: dict[str, Any],
    device: torch.device,
    prec: Precision,
    steps: int,
    backend: str | None = None,
    on_first_step: Any = None,
) -> FullOut:
    """Build the full-size model on `device` and train `steps` AdamW steps (zoo/steps.py's loop); per-step series."""

    spec = ZooSpec.of(params)
    seed = spec.seed
    model, task, how = hub_build.build_full(data, spec.model, device, prec.param_dtype, seed, weights_for(spec))
    no_dropout(model)
    make = hub_build.batches_for(model, task, spec.batch, spec.seq, seed)
    fn = step_fn(mz.call_kwargs, mz.hf_loss, mz.first_float, model, prec, device.type, backend)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    out = FullOut(weights=how)

    def at_step0(outputs: StepOutputs) -> None:
        out.grad_norms0 = {
            n: float(q.grad.detach().to("cpu", torch.float64).norm())
            for n, q in model.named_parameters()
            if q.grad is not None
        }

    def after_clip(outputs: StepOutputs, gn: torch.Tensor) -> None:
        out.loss.append(float(outputs.loss.detach().to("cpu", torch.float64)))
        out.grad_norm.append(float(gn.detach().to("cpu", torch.float64)))
        out.logits_std.append(logits_std(outputs))

    feed = Feed(make, steps, device, prec.param_dtype)
    hooks = StepHooks(first_step=on_first_step, at_step0=at_step0, after_clip=after_clip)
    scaler = prec.grad_scaler(device.type)
    out.seconds, out.first_step_s = train_steps(model, fn, opt, feed, hooks, scaler, MAX_GRAD_NORM)
    return out


def logits_std(outputs: StepOutputs) -> float:
    """The std of the logits at the positions the job defines (pads are the kernel's: StepOutputs), from float64
    moments on the device (no host copy: full-size logits are ~100M values)."""
    n, s1, s2 = (float(v) for v in outputs.moments())
    if n < 2:
        return math.nan
    return math.sqrt(max(0.0, (s2 - s1 * s1 / n) / (n - 1)))


def rel_dev(a: float, b: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(b), 1e-12)


def vector_dev(a: dict[str, float], b: dict[str, float]) -> float:
    """Relative L2 distance of two runs' per-parameter grad norms at step 0 (same weights, same batch):
    ||a - b|| / ||b|| over the parameters. An op that is 1% off moves the grads of every parameter
    behind it, a share of the whole vector; two correct runs differ by their rounding. Different
    parameter names (another model) are infinitely far."""
    if set(a) != set(b) or not b:
        return math.inf
    num = math.fsum((a[k] - b[k]) ** 2 for k in b)
    den = math.fsum(b[k] ** 2 for k in b)
    return math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)


def compare(ours: dict[str, Any], theirs: dict[str, Any], tol: float) -> tuple[float, list[str]]:
    """Max relative deviation over the series both have (common steps), and of the step-0 per-parameter
    grad norms (`vector_dev`), and the problems past `tol`."""
    worst, problems = 0.0, []
    if ours.get("grad_norms0") and theirs.get("grad_norms0"):
        d = vector_dev(ours["grad_norms0"], theirs["grad_norms0"])
        worst = d
        if d > tol:
            problems.append(f"step-0 grad norms per parameter differ by {d:.2g} (relative L2 > {tol:.2g})")
    for key in SERIES:
        a, b = ours.get(key) or [], theirs.get(key) or []
        n = min(len(a), len(b))
        for i in range(n):
            if math.isnan(a[i]) and math.isnan(b[i]) and key == "logits_std":
                continue  # neither run has logits to describe (no floating output): nothing to compare
            d = rel_dev(a[i], b[i])
            worst = max(worst, d)
            if d > tol:
                problems.append(f"{key} step {i}: {a[i]:.6g} vs {b[i]:.6g} ({d:.2g} > {tol:.2g})")
                break
    return worst, problems


def _series_of(out: FullOut) -> dict[str, Any]:
    return {"loss": out.loss, "grad_norm": out.grad_norm, "logits_std": out.logits_std, "grad_norms0": out.grad_norms0}


@dataclass(frozen=True)
class _Plan:
    """A full-size case as its preflight found it: the spec, the model's config data and task, the memory
    estimate (models/memory.py) and the device."""

    spec: ZooSpec
    params: dict[str, Any]  # the case's, as the ranks are given them
    data: dict[str, Any]
    task: str
    est: Any
    dev: Device


def run_full(case: Case, ctx: Any) -> CaseResult:
    """One model at full size (module doc): preflight, device eager (sharded when it must be), device compiled;
    the verdicts against eager, the cpu fp32 reference and a baseline bundle; then the record. A step that ends
    the case returns None."""
    clock = Clock.start(case.budget_s)
    spec = ZooSpec.from_params(case.params)
    r = _start(case, spec)
    plan = _preflight(r, case.params, ctx.device)
    runs = _device_eager(r, plan, ctx) if plan is not None else None
    if plan is None or runs is None:
        return r
    eager, comp = runs
    if spec.backend != "none" and not r.fields.get("sharded"):
        comp = _compiled(r, plan, ctx, clock)
    judged = [_vs_eager(r, spec.prec, eager, comp)]
    if spec.reference == "cpu":
        judged.append(_cpu_reference(r, plan, eager))
    if spec.baseline:
        judged.append(_vs_baseline(r, spec, eager, comp))
    return _record(r, [j for j in judged if j is not None])


def _start(case: Case, spec: ZooSpec) -> CaseResult:
    """A passing result with the case's fields; dynamo's caches cleared."""
    r = CaseResult.for_case(case, Status.PASS)
    r.fields.update(
        {
            "source": spec.source,
            "task": spec.task,
            "backend": spec.backend,
            "size": "full",
            "reference": spec.reference,
            **UNMEASURED,
        }
    )
    torch._dynamo.reset()
    return r


def _preflight(r: CaseResult, params: dict[str, Any], dev: Device) -> _Plan | None:
    """1. The memory preflight on the meta-device model; None (the case failed) when the config can't be made or
    the model fits neither the device nor --nproc ranks of it."""
    spec = ZooSpec.from_params(params)
    try:
        data = config_data(spec)
        meta, task = hub_build.meta_model(data, spec.model)
    except ConfigError as e:
        _fail(r, Status.REF_FAIL, f"config: {e}")
        return None
    except Exception as e:
        _fail(r, Status.REF_FAIL, f"config: {first_line(e)}")
        return None
    free = int(spec.device_memory_gib * memory.GIB) if spec.device_memory_gib else memory.free_memory(dev.torch_device)
    est = memory.estimate(meta, spec.prec.param_dtype, spec.prec.compute_dtype, spec.batch, spec.seq, free)
    del meta
    r.fields["params"] = est.params
    r.fields["preflight"] = est.to_json()
    nproc = spec.nproc
    if est.fits() is False and not zoo_fsdp.wants_shards(est, nproc):
        n = est.suggested_nproc()
        hint = (
            f"it needs {n} such devices with FSDP2 sharding of params, grads and AdamW state (run it with "
            f"--nproc {n}{'' if nproc == 1 else f'; --nproc {nproc} is too few'})"
            if n
            else "activations alone exceed the device: lower --batch / --seq"
        )
        _fail(r, Status.UNSUPPORTED, f"memory preflight: {est.summary()}; {hint}")
        return None
    return _Plan(spec, params, data, task, est, dev)


def _device_eager(r: CaseResult, plan: _Plan, ctx: Any) -> tuple[FullOut, FullOut | None] | None:
    """2. The device eager run (2+3 over --nproc ranks when one device is too small: zoo/fsdp.py), its series
    recorded; (eager, the sharded compiled run if any), or None when the case failed."""
    spec, dev, est = plan.spec, plan.dev, plan.est
    comp: FullOut | None = None
    if est.fits() is False:
        eager_s, comp_s = _sharded(r, plan, ctx)
        if eager_s is None:
            return None
        eager, comp = _full_out(eager_s), (_full_out(comp_s) if comp_s else None)
        r.fields["note"] = f"{spec.model} at full size, {plan.task}, FSDP2 over {spec.nproc} ranks"
    else:
        dev.reset_peak_memory()
        mem0 = dev.memory_allocated() if dev.is_cpu else 0
        try:
            eager = _eager_run(spec, plan.data, dev, spec.prec, spec.steps, r)
        except Exception as e:
            r.error = traceback.format_exc()
            _fail(r, classify(e), f"eager: {first_line(e)}")
            return None
        _record_memory(r, dev, est, mem0)
        r.fields["weights_from"] = eager.weights
        r.fields["note"] = f"{spec.model} at full size, {plan.task}, {eager.weights}"
    for k in SERIES:
        r.series[f"{k}.eager"] = list(enumerate(getattr(eager, k)))
    r.fields["grad_norms0"] = {"eager": eager.grad_norms0}
    if not all(math.isfinite(x) for x in eager.loss):
        _fail(r, Status.FAIL_NUMERIC, "eager: non-finite loss")
    return eager, comp


def _record_memory(r: CaseResult, dev: Device, est: Any, mem0: int | None) -> None:
    """The eager run's peak memory against the preflight's prediction."""
    peak = dev.peak_memory()
    if peak is None:
        return
    measured = peak - (mem0 or 0)
    r.fields["peak_mem_bytes"] = peak
    r.fields["memory"] = {
        "predicted_bytes": est.total,
        "measured_bytes": measured,
        "measured_over_predicted": round(measured / max(1, est.total), 3),
        "measured_as": "peak RSS minus RSS before building" if dev.is_cpu else "max_memory_allocated",
    }


def _compiled(r: CaseResult, plan: _Plan, ctx: Any, clock: Clock) -> FullOut | None:
    """3. Device compiled (zoo/arm.py, the tiny zoo's arm)."""
    spec = plan.spec

    def run(on_first_step: Callable[[], None]) -> FullOut:
        return run_steps(
            spec,
            plan.data,
            plan.dev.torch_device,
            spec.prec,
            spec.steps,
            backend=spec.backend,
            on_first_step=on_first_step,
        )

    return compiled_arm(r, ctx, clock, run)


def _vs_eager(r: CaseResult, prec: Precision, eager: FullOut, comp: FullOut | None) -> tuple[list[str], float] | None:
    """4. Compiled vs eager on the device: (what was compared, the largest deviation), None without a compiled
    run."""
    if comp is None:
        return None
    for k in SERIES:
        r.series[f"{k}.compiled"] = list(enumerate(getattr(comp, k)))
    r.fields["grad_norms0"]["compiled"] = comp.grad_norms0
    tol = tolerance(prec, prec)
    d, problems = compare(_series_of(comp), _series_of(eager), tol)
    r.fields["compiled_vs_eager"] = {"max_rel_dev": d, "tolerance": tol}
    if problems:
        _fail(r, Status.FAIL_NUMERIC, f"compiled: vs eager on the device: {problems[0]}")
    return ["compiled vs eager"], d


def _cpu_reference(r: CaseResult, plan: _Plan, eager: FullOut) -> tuple[list[str], float] | None:
    """4a. The cpu fp32 reference of the first REF_STEPS steps (when its own preflight fits; on a cpu device in
    fp32 the eager run is the reference); None when nothing was compared."""
    spec, fp32 = plan.spec, PRECISIONS["fp32"]
    if plan.dev.is_cpu and spec.prec.name == "fp32" and not r.fields.get("sharded"):
        r.fields["cpu_reference"] = {"status": "the device is cpu in fp32: the eager run is the reference"}
        return None
    meta = hub_build.meta_model(plan.data, spec.model)[0]
    ref_est = memory.estimate(meta, fp32.param_dtype, fp32.compute_dtype, spec.batch, spec.seq, memory.free_memory(CPU))
    if ref_est.fits() is False:
        r.fields["cpu_reference"] = {"status": f"skipped: {ref_est.summary()}"}
        return None
    try:
        ref = run_steps(spec, plan.data, CPU, fp32, min(spec.steps, REF_STEPS))
        tol = tolerance(spec.prec, fp32)
        d, problems = compare(_series_of(eager), _series_of(ref), tol)
        r.fields["cpu_reference"] = {
            "status": "ok" if not problems else "differs",
            "max_rel_dev": d,
            "tolerance": tol,
            "steps": len(ref.loss),
        }
        r.series["loss.cpu_fp32"] = list(enumerate(ref.loss))
        if problems:
            _fail(r, Status.FAIL_NUMERIC, f"eager: vs cpu fp32: {problems[0]}")
    except Exception as e:
        r.fields["cpu_reference"] = {"status": f"failed: {first_line(e)}"}
        return None
    return ["eager vs cpu fp32"], d


def _vs_baseline(r: CaseResult, spec: ZooSpec, eager: FullOut, comp: FullOut | None) -> tuple[list[str], float]:
    """4b. The baseline bundle's series (_compare_baseline): what was compared, the largest deviation."""
    assert spec.baseline is not None  # run_full calls this step only with a baseline
    done = _compare_baseline(r, spec.baseline, spec.prec, eager, comp)
    chk = r.fields.get("baseline_check") or {}
    return done, max([0.0] + [v for k, v in chk.items() if k.endswith("_max_rel_dev")])


def _record(r: CaseResult, judged: list[tuple[list[str], float]]) -> CaseResult:
    """Fallbacks, what was compared and the largest deviation (nothing judged is a ref_fail), the metrics."""
    fb = r.fields.get("fallback_ops")
    if fb:
        top = ", ".join(f"{k} x{v}" for k, v in sorted(fb.items(), key=lambda kv: -kv[1])[:5])
        _fail(r, Status.FALLBACK, f"ran through the CPU fallback: {top}")
    compared = [c for done, _ in judged for c in done]
    r.fields["compared"] = compared
    r.fields["loss_divergence"] = max([0.0] + [d for _, d in judged])
    if not compared and r.status is Status.PASS:
        _fail(
            r,
            Status.REF_FAIL,
            "reference: nothing judged this run (cpu reference skipped or failed, no compiled run, no baseline)",
        )
    for k in ("loss_divergence", "compile_s", "params", "graph_breaks", "peak_mem_bytes"):
        v = r.fields.get(k)
        r.metric(k, v if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    return r


def _full_out(s: dict[str, Any]) -> FullOut:
    return FullOut(
        loss=list(s["loss"]),
        grad_norm=list(s["grad_norm"]),
        logits_std=list(s["logits_std"]),
        grad_norms0=dict(s["grad_norms0"]),
        weights="seeded init on cpu, FSDP2-sharded",
        seconds=float(s.get("seconds", 0.0)),
    )


def _sharded(r: CaseResult, plan: _Plan, ctx: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The device runs on --nproc ranks (zoo/fsdp.py); (eager series, compiled series) or (None, None)
    with the case failed. A compile failure fails the case and leaves the eager series to be judged."""
    spec, est, nproc = plan.spec, plan.est, plan.spec.nproc
    try:
        imports = tuple(getattr(ctx, "imports", ()))
        workdir = Path(ctx.artifact_dir) / "ranks"
        out = zoo_fsdp.run_sharded(plan.params, plan.dev, spec.prec, spec.steps, spec.backend, nproc, imports, workdir)
    except Exception as e:
        r.error = getattr(e, "tb", "") or traceback.format_exc()
        _fail(r, classify(e), f"eager: FSDP2 over {nproc} ranks: {first_line(e)}")
        return None, None
    ranks = out.get("ranks") or []
    r.fields["sharded"] = {
        "nproc": nproc,
        "ranks": ranks,
        "params": est.params,
        "per_rank_predicted_bytes": est.sharded // nproc + est.activation_bytes,
    }
    r.fields["weights_from"] = "seeded init on cpu, materialised one FSDP2 unit at a time, then sharded"
    if out.get("compiled_error"):
        r.error = out["compiled_error"].get("traceback", "")
        _fail(r, Status.FAIL_COMPILE, f"compiled: FSDP2 over {nproc} ranks: {out['compiled_error']['message']}")
    return out["eager"], out.get("compiled")


def _eager_run(p: ZooSpec, data: dict[str, Any], dev: Device, prec: Precision, steps: int, r: CaseResult) -> FullOut:
    """The device eager run; off cpu under the fallback detector (which ops ran through the CPU
    fallback), as the tiny zoo's. A detector that can't start leaves fallback_ops unknown (null)."""

    if dev.is_cpu:
        return run_steps(p, data, dev.torch_device, prec, steps)
    out, rep = under_fallback_detector(r, dev, lambda: run_steps(p, data, dev.torch_device, prec, steps))
    if rep is not None:
        r.fields["fallback_ops"] = dict(rep.fallback_ops)
    return out


def _compare_baseline(
    r: CaseResult, bl: dict[str, Any], prec: Precision, eager: FullOut, comp: FullOut | None
) -> list[str]:
    out: dict[str, Any] = {"bundle": bl.get("path"), "bundle_device": bl.get("device"), "bundle_dtype": bl.get("dtype")}
    r.fields["baseline_check"] = out
    if not bl.get("found"):
        out["status"] = "missing"
        _fail(r, Status.ERROR, "baseline: the bundle has no result for this model: nothing compared")
        return []
    theirs_prec = parse_precision(str(bl.get("dtype")))
    tol = tolerance(prec, theirs_prec)
    out["tolerance"] = tol
    series = bl.get("series") or {}
    done: list[str] = []
    problems: list[str] = []
    for label, mine in (("eager", eager), ("compiled", comp)):
        theirs: dict[str, Any] = {k: series.get(f"{k}.{label}") or [] for k in SERIES}
        theirs["grad_norms0"] = (bl.get("grad_norms0") or {}).get(label) or {}
        if mine is None or not theirs["loss"]:
            continue
        d, pr = compare(_series_of(mine), theirs, tol)
        out[f"{label}_max_rel_dev"] = d
        done.append(f"{label} vs the {bl.get('device')} bundle")
        problems += [f"{label} {x}" for x in pr[:1]]
    out["status"] = "ok" if not problems else "differs"
    if not done:
        out["status"] = "incomparable: the bundle has no per-step series for this model"
        _fail(r, Status.ERROR, f"baseline: {out['status']}")
    elif problems:
        _fail(r, Status.FAIL_NUMERIC, f"baseline: vs the {bl.get('device')} bundle ({bl.get('dtype')}): {problems[0]}")
    return done
