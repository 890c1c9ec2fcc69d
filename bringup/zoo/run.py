"""zoo, in the worker: one tiny model, trained for K steps on the device, eager and compiled, against a float64
CPU reference (the module docstring of zoo/suite.py has the whole case). Model preparation (`build_model`), the
trusted runs' noise (`measure_noise`) and the case (`run_model`); the training loop is zoo/steps.py's, the
verdicts zoo/judge.py's.
"""

from __future__ import annotations

import dataclasses
import math
import traceback
from collections.abc import Callable
from typing import Any

import torch

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.checks.losscurve import compare_curves
from bringup.checks.masked_rows import UniformRows
from bringup.checks.module_replay import Dither, copy_module
from bringup.checks.module_rule import one_rounding
from bringup.checks.parity import TWIN_DITHER, Noise, dither_noise, exact_zeros, parity
from bringup.checks.parity import trusted_noise as sample_noise
from bringup.device import Device
from bringup.errors import BadInput
from bringup.models import batches, tying
from bringup.models.tiny import ConfigError
from bringup.precision import Precision
from bringup.zoo import modules as zoo_modules
from bringup.zoo.arm import Clock, compiled_arm, under_fallback_detector
from bringup.zoo.build import build_model, param_count, shapes_of
from bringup.zoo.judge import TrustedNoise, compare_bundle, judge, judge_pads
from bringup.zoo.spec import UNMEASURED, ZooSpec
from bringup.zoo.steps import RunHow, RunOut, as_precision, fail, finite_curve, train_run

__all__ = [
    "RunHow",
    "as_precision",
    "build_model",
    "measure_noise",
    "run_model",
    "train_run",
]  # localize/cli.py: one import

LOGIT_SAMPLES = 16
CPU = torch.device("cpu")


def logits_digest(t: torch.Tensor | None) -> dict[str, Any] | None:
    """Output statistics + a few fixed-position values: what a bundle keeps of the logits."""
    if t is None:
        return None
    x = t.detach().to("cpu", torch.float64).flatten()
    if x.numel() == 0:
        return None
    # float64 positions: float32 rounds the last index past the end above 2**24 elements (16M logits)
    idx = torch.linspace(0, x.numel() - 1, min(LOGIT_SAMPLES, x.numel()), dtype=torch.float64).round().long()
    fin = x[torch.isfinite(x)]
    n = fin.numel()
    return {
        "shape": list(t.shape),
        "mean": float(fin.mean()) if n else math.nan,
        "std": float(fin.std()) if n > 1 else 0.0,
        "abs_max": float(fin.abs().max()) if n else math.nan,
        "sample": [float(v) for v in x[idx]],
    }


@dataclasses.dataclass
class Prepared:
    """A case's model, its initial state, its K step batches and the float64 reference run on them."""

    built: Any
    init: dict[str, torch.Tensor]
    batches: list[dict[str, Any]]
    ref: RunOut
    left_pad: bool = True
    note: str = ""
    # the reference's pad logits under the uniform convention (checks/masked_rows.py), computed when first asked;
    # None: no SDPA row of the reference was fully masked (the model's own code decides its pads)
    uniform: Callable[[], torch.Tensor | None] | None = None
    zeros: frozenset[str] = frozenset()  # the reference's tensors zero in exact arithmetic (exact_zeros)


LEFT_PAD_NOTE = "left padding dropped: the float64 reference turns NaN on a left-padded row (fully masked pad queries)"


def prepare(spec: ZooSpec, built: Any = None) -> Prepared:
    """Build (unless given), draw the step batches and run the float64 reference. A reference that a left-padded
    row turns non-finite is run again with right padding only (`left_pad` False, said in `note`): eager attention
    casts its scores to fp32 for the softmax, float64's mask minimum becomes -inf there, and a left-padded row's pad
    queries (every key masked) turn NaN. Raises what building or the reference raises."""
    prec = spec.prec
    for left_pad in (True, False):
        built = built if built is not None else build_model(spec, left_pad)
        init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
        batches = [built.make_batch(i) for i in range(spec.steps)]
        seen = UniformRows(replace=False)  # counts the reference's fully masked SDPA rows, changes nothing
        how = RunHow(round_to=prec.param_dtype, step_context=lambda s=seen: s)
        built, ref = _float64_run(built, init, batches, how)
        if finite_curve(ref.curve) or not left_pad or not _left_padded(batches[0]):
            uniform = _lazy(uniform_pads, built, init, batches[0], prec) if ref.pads is not None and seen.rows else None
            note = "; ".join(n for n in ("" if left_pad else LEFT_PAD_NOTE, _casts_note(built)) if n)
            return Prepared(
                built, init, batches, ref, left_pad, note, uniform, measure_zeros(built, init, batches[0], ref, prec)
            )
        built = None
    raise AssertionError("unreachable")


CASTS_NOTE = "float64 reference with every fp32 cast kept at float64: the model's code mixes fp32 casts with weights"


def _casts_note(built: Any) -> str:
    return CASTS_NOTE if getattr(built, "float64_casts", False) else ""


def _float64_run(
    built: Any, init: dict[str, torch.Tensor], batches: list[dict[str, Any]], how: RunHow
) -> tuple[Any, RunOut]:
    """The float64 reference run; when it raises, once more with every cast to fp32 kept at float64
    (steps.Float64Casts: a model whose code casts to fp32 and mixes the result with its float64 weights cannot run
    in float64 as written). The model it ran (flagged when the second did) and its result; the first error when
    both raise."""
    cpu = torch.device("cpu")
    try:
        return built, train_run(built, init, batches, cpu, torch.float64, how)
    except Exception as first:
        if getattr(built, "float64_casts", True):  # already kept at float64, or not a zoo model
            raise
        again = dataclasses.replace(built, float64_casts=True)
        try:
            return again, train_run(again, init, batches, cpu, torch.float64, how)
        except Exception:
            raise first from None


def measure_zeros(
    built: Any, init: dict[str, torch.Tensor], batch0: dict[str, Any], ref: RunOut, prec: Precision
) -> frozenset[str]:
    """Which of step 0's tensors are zero in exact arithmetic: the float64 step again with every op result
    perturbed by parity.TWIN_DITHER (a twin), against the reference (checks/parity.py: exact_zeros)."""

    gen = torch.Generator().manual_seed(4242)
    run = dataclasses.replace(built, model=copy_module(built.model))
    twin = train_run(
        run,
        init,
        [batch0],
        torch.device("cpu"),
        torch.float64,
        RunHow(round_to=prec.param_dtype, step_context=lambda: Dither(TWIN_DITHER, gen, every_dtype=True)),
    )
    return exact_zeros(ref.tensors, twin.tensors)


def _lazy(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """fn(*args), computed on the first call and kept."""
    kept: list[Any] = []

    def get() -> Any:
        if not kept:
            kept.append(fn(*args))
        return kept[0]

    return get


def uniform_pads(built: Any, init: dict[str, torch.Tensor], batch0: dict[str, Any], prec: Precision) -> Any:
    """Step 0's float64 logits at the pads with every fully masked SDPA row uniform (checks/masked_rows.py): what a
    device of that convention computes there; None when no SDPA call had such a row (the model's code decides)."""
    mode = UniformRows()
    run = dataclasses.replace(built, model=copy_module(built.model))
    out = train_run(
        run,
        init,
        [batch0],
        torch.device("cpu"),
        torch.float64,
        RunHow(round_to=prec.param_dtype, step_context=lambda: mode),
    )
    return out.pads if mode.rows else None


def _left_padded(batch: dict[str, Any]) -> bool:

    for b in batches.micro(batch) or [batch]:
        m = b.get("attention_mask")
        if isinstance(m, torch.Tensor) and bool((m[:, 0] == 0).any()):
            return True
    return False


def describe_inputs(batch: dict[str, Any], inputs: str) -> dict[str, Any]:
    """What step 0 fed the model (a pass says what was covered): bringup/models/batches.py describe()."""

    return batches.describe(batch, inputs)


def _series(curve: list[float]) -> list[tuple[int, float]]:
    return [(i, v) for i, v in enumerate(curve)]


def run_model(case: Case, ctx: Any) -> CaseResult:
    """One model: build, reference, trusted baseline, device eager, device compiled; then the verdict and the
    record (fallbacks, the baseline bundle, metrics). A step that ends the case returns None."""
    clock = Clock.start(case.budget_s)
    spec = ZooSpec.from_params(case.params)
    dev: Device = ctx.device
    r = _start(case, spec)
    built = _build(r, spec)
    prep = _reference(r, spec, built) if built is not None else None
    if prep is None:
        return r
    trusted = _trusted(r, spec, prep, dev)
    if trusted is None:
        return r
    eager, mc = _eager(r, spec, prep, trusted, dev)
    if spec.backend != "none":
        _compiled(r, ctx, clock, _Arm(spec, prep, trusted, eager, mc))
    return _record(r, spec, dev)


@dataclasses.dataclass(frozen=True)
class _Trusted:
    """The trusted baseline (cpu eager in the run's precision; None when it raised), what correct runs at that
    precision look like, and the module check (whether it runs; the trusted run's recording on cpu)."""

    base: RunOut | None
    noise: TrustedNoise
    use_mc: bool
    mc: Any


@dataclasses.dataclass(frozen=True)
class _Arm:
    """What the compiled arm is judged with: the case, its reference, the trusted runs and the eager run."""

    spec: ZooSpec
    prep: Prepared
    trusted: _Trusted
    eager: RunOut | None
    mc: Any


def _start(case: Case, spec: ZooSpec) -> CaseResult:
    """A passing result with the case's fields; dynamo's caches cleared and the case's seed set."""
    r = CaseResult.for_case(case, Status.PASS)
    r.fields.update({"source": spec.source, "task": spec.task, "backend": spec.backend, **UNMEASURED})
    torch._dynamo.reset()
    torch.manual_seed(spec.seed)
    return r


def _build(r: CaseResult, spec: ZooSpec) -> Any:
    """The tiny model (ref_fail "config" when it can't be made: None)."""
    try:
        built = build_model(spec)
    except (ConfigError, BadInput) as e:
        fail(r, Status.REF_FAIL, f"config: {e}")
        return None
    except Exception as e:
        fail(r, Status.REF_FAIL, f"config: {first_line(e)}")
        return None
    r.fields["params"] = param_count(built.model)
    r.fields["note"] = built.note
    return built


def _reference(r: CaseResult, spec: ZooSpec, built: Any) -> Prepared | None:
    """a. The float64 reference (prepare) and what step 0 fed the model; None when it failed or is not finite."""
    try:
        prep = prepare(spec, built)
    except Exception as e:
        r.error = traceback.format_exc()
        fail(r, Status.REF_FAIL, f"reference: {first_line(e)}")
        return None
    if prep.note:
        r.fields["inputs_note"] = prep.note
    if fed := describe_inputs(prep.batches[0], spec.inputs):
        r.fields["inputs_fed"] = {**fed, "widths": shapes_of(prep.built.model)}
    if not finite_curve(prep.ref.curve):
        fail(r, Status.REF_FAIL, "reference: non-finite loss in float64")
        return None
    r.series["loss.ref"] = _series(prep.ref.curve)
    r.fields["logits"] = {"ref": logits_digest(prep.ref.tensors.get("logits"))}
    return prep


def _trusted(r: CaseResult, spec: ZooSpec, prep: Prepared, dev: Device) -> _Trusted | None:
    """b. The trusted baseline: cpu eager in the run dtype (on cpu also the device's eager run: recorded), itself
    near float64 or the case is ill-conditioned (None); then the trusted runs' noise."""
    use_mc = zoo_modules.enabled(spec.module_check, dev)
    if not use_mc and spec.module_check is None:
        r.fields["module_check_note"] = zoo_modules.LAZY_NOTE
    mc = zoo_modules.new_check(prep.built.model, spec.prec, CPU) if use_mc and dev.is_cpu else None
    base: RunOut | None = None
    try:
        base = train_run(prep.built, prep.init, prep.batches, CPU, spec.prec, RunHow(module_check=mc))
        r.series["loss.cpu_eager"] = _series(base.curve)
    except Exception as e:
        r.fields["baseline_error"] = first_line(e)
    if base is None:
        noise = TrustedNoise(zeros=prep.zeros)
    elif (why := _ill_conditioned(r, spec, prep, base)) is not None:
        fail(r, Status.REF_FAIL, why)
        return None
    else:
        noise = trusted_noise(spec, prep)
        r.fields["noise_seeds"] = noise.seeds
        if noise.errors:
            r.fields["noise_errors"] = noise.errors
        torch.manual_seed(spec.seed)
    if prep.zeros:
        r.fields["exact_zeros"] = sorted(prep.zeros)
    return _Trusted(base, noise, use_mc, mc)


def _ill_conditioned(r: CaseResult, spec: ZooSpec, prep: Prepared, base: RunOut) -> str | None:
    """Why the comparison says nothing at this precision, if it does not: the trusted run must itself be near
    float64; if even cpu eager in this dtype is grossly off (a discontinuous model: LSH buckets, near-tied
    routing), or drifts off over the steps (BatchNorm over 2 samples at a high learning rate: training itself
    diverges), it is ill-conditioned."""
    ref = prep.ref
    gross = parity(base.tensors, ref.tensors, spec.prec, trusted=True, zeros=prep.zeros)
    r.fields["cpu_eager_max_rel_err"] = gross.max_rel_err
    if not gross.ok:
        return (
            f"reference: cpu eager in {spec.dtype} is itself off float64 "
            f"({gross.summary()}): ill-conditioned at this precision"
        )
    drift = compare_curves(base.curve, ref.curve, spec.prec, trusted=True)
    if not drift.ok:
        return (
            f"reference: cpu eager in {spec.dtype} drifts off float64 over "
            f"{len(ref.curve)} steps ({drift.summary()}): ill-conditioned training at this "
            "precision"
        )
    return None


def _eager(r: CaseResult, spec: ZooSpec, prep: Prepared, trusted: _Trusted, dev: Device) -> tuple[RunOut | None, Any]:
    """c. Device eager, judged (on cpu, eager in the run dtype IS the trusted baseline: judged for gross errors
    only); (the run or None when it raised, the module check the compiled arm is judged with)."""
    dev.reset_peak_memory()
    base, mc = trusted.base, trusted.mc
    eager: RunOut | None = None
    try:
        if dev.is_cpu and base is not None:
            eager = base
        else:
            mc = zoo_modules.new_check(prep.built.model, spec.prec, dev.torch_device) if trusted.use_mc else None
            eager = _device_run(prep.built, prep.init, prep.batches, dev, spec.prec, r, module_check=mc)
    except Exception as e:
        r.error = traceback.format_exc()
        fail(r, classify(e), f"eager: {first_line(e)}")
    if eager is not None:
        r.series["loss.eager"] = _series(eager.curve)
        r.fields["logits"]["eager"] = logits_digest(eager.tensors.get("logits"))
        self_trusted = dev.is_cpu and eager is base
        judge(
            r, "eager", eager, prep.ref, None if self_trusted else base, spec.prec, trusted.noise, trusted=self_trusted
        )
        judge_pads(r, "eager", eager, prep.ref, prep.uniform)
        if mc is not None and mc.recorded and not self_trusted:
            zoo_modules.judge(r, "eager", mc.judge_eager())
    return eager, mc


def _compiled(r: CaseResult, ctx: Any, clock: Clock, a: _Arm) -> None:
    """d. Device compiled (zoo/arm.py), judged against the trusted run (the eager run where there is none)."""
    prep, spec, dev = a.prep, a.spec, ctx.device

    def run(on_first_step: Callable[[], None]) -> RunOut:
        return train_run(
            prep.built,
            prep.init,
            prep.batches,
            dev.torch_device,
            spec.prec,
            RunHow(backend=spec.backend, on_first_step=on_first_step),
        )

    comp = compiled_arm(r, ctx, clock, run)
    if comp is None:
        return
    r.series["loss.compiled"] = _series(comp.curve)
    r.fields["logits"]["compiled"] = logits_digest(comp.tensors.get("logits"))
    base = a.trusted.base
    judge(
        r,
        "compiled",
        comp,
        prep.ref,
        base if base is not None else a.eager,
        spec.prec,
        a.trusted.noise if base is not None else TrustedNoise(zeros=prep.zeros),
    )
    judge_pads(r, "compiled", comp, prep.ref, prep.uniform)
    if a.trusted.use_mc:
        zoo_modules.judge_compiled(r, a.mc, spec.backend, ctx, clock.left())


def _record(r: CaseResult, spec: ZooSpec, dev: Device) -> CaseResult:
    """e. Fallbacks, memory, the baseline bundle, a device finding beside the verdict, the metrics."""
    r.fields["peak_mem_bytes"] = dev.peak_memory()
    fb = r.fields.get("fallback_ops")
    if fb:
        top = ", ".join(f"{k} x{v}" for k, v in sorted(fb.items(), key=lambda kv: -kv[1])[:5])
        fail(r, Status.FALLBACK, f"ran through the CPU fallback: {top}")
    if spec.baseline:
        compare_bundle(r, spec.baseline, spec.prec)
    if finding := r.fields.get("tying_finding"):  # a device finding beside the verdict, not instead of it
        r.reason = f"{r.reason}; {finding}" if r.reason else finding
    for k in ("max_rel_err", "loss_divergence", "compile_s", "params", "graph_breaks", "peak_mem_bytes"):
        v = r.fields.get(k)  # the fields keep them for the terminal table; metrics are what reports read
        r.metric(k, v if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    return r


def _device_run(
    built: Any,
    init: dict[str, torch.Tensor],
    batches: list[dict[str, Any]],
    dev: Device,
    dtype: Precision,
    r: CaseResult,
    module_check: Any = None,
) -> RunOut:
    """Device eager run; off cpu, under the fallback detector (which ops ran through the CPU fallback).
    A detector that can't start (another profiler active, ...) leaves fallback_ops unknown (null)."""

    # Ties the move to the device splits are a finding of their own (models/tying.py): named on the case,
    # and the model re-tied, so parity judges the model as meant (train_run's own .to is then a no-op).
    if broken := tying.move(built.model, dev.torch_device, dtype.param_dtype):
        r.fields["tying_broken"] = broken
        r.fields["tying_finding"] = tying.describe(broken, dev.name)
    r.metric("broken_ties", len(broken))
    out, rep = under_fallback_detector(
        r, dev, lambda: train_run(built, init, batches, dev.torch_device, dtype, RunHow(module_check=module_check))
    )
    if rep is not None:
        r.fields["fallback_ops"] = dict(rep.fallback_ops)
        if rep.fallback_ops:  # each op's dtypes and first call's shapes: its triage signature and repro
            r.fields["fallback_dtypes"] = rep.fallback_dtypes
            r.fields["fallback_examples"] = rep.fallback_examples
    return out


def trusted_noise(spec: ZooSpec, prep: Prepared) -> TrustedNoise:
    """What correct runs at the case's precision look like, per tensor: the trusted run under `spec.noise_seeds`
    more seeds (measure_noise) and the case's own float64 step rounded elsewhere (add_dither)."""
    casts = getattr(prep.built, "float64_casts", False)
    noise = measure_noise(spec, spec.prec, spec.steps, spec.noise_seeds, prep.left_pad, prep.zeros, casts)
    add_dither(noise, prep.built, prep.init, prep.batches[0], prep.ref, spec.prec)
    return noise


DITHER_DRAWS = 2  # the module check's "rounding everything once" takes the larger of 2 draws too


def add_dither(
    noise: TrustedNoise,
    built: Any,
    init: dict[str, torch.Tensor],
    batch0: dict[str, Any],
    ref: RunOut,
    prec: Precision,
    draws: int = DITHER_DRAWS,
) -> None:
    """The case's float64 step 0 again, every op result (forward and backward) rounded once at random at the
    run's precision (checks/module_replay.py: Dither), `draws` times: per tensor, the error a correct device
    that rounds at other points than cpu eager may have (checks/parity.py: Noise.dither), kept in `noise`."""

    d = one_rounding(prec.compute_dtype)
    # on a copy: a float64 run leaves the model in float64, and a module check recorded before (the trusted run's,
    # on cpu) replays the live modules
    built = dataclasses.replace(built, model=copy_module(built.model))
    runs = []
    for k in range(draws):
        gen = torch.Generator().manual_seed(k + 1)
        out = train_run(
            built,
            init,
            [batch0],
            torch.device("cpu"),
            torch.float64,
            RunHow(round_to=prec.param_dtype, step_context=lambda g=gen: Dither(d, g)),
        )
        runs.append(out.tensors)
    for name, errs in dither_noise(runs, ref.tensors, prec, noise.zeros).items():
        noise.tensors[name] = dataclasses.replace(noise.tensors.get(name) or Noise(), dither=errs)


def measure_noise(
    params: ZooSpec | dict[str, Any],
    prec: Precision,
    steps: int,
    n: int,
    left_pad: bool = True,
    zeros: frozenset[str] = frozenset(),
    float64_casts: bool = False,
) -> TrustedNoise:
    """Build the same model under `n` other seeds (other init, other batches) and run the float64
    reference and the trusted run at `prec` on each: per tensor, how far correct runs at this
    precision are from float64 (checks/parity.py: trusted_noise). A seed whose trusted run is itself
    grossly off (or fails) is left out and named in `errors`. `float64_casts`: the case's reference keeps
    fp32 casts at float64 (prepare), so these do too."""

    cpu = torch.device("cpu")
    out = TrustedNoise(zeros=zeros)  # zero in exact arithmetic is the model's structure: alike under every seed
    samples = []
    spec = ZooSpec.of(params)
    seed0 = spec.seed
    for k in range(1, n + 1):
        s = seed0 + 7919 * k  # far from the small seeds users pick
        try:
            built = build_model(dataclasses.replace(spec, seed=s), left_pad)
            if float64_casts:
                built = dataclasses.replace(built, float64_casts=True)
            init = {k2: v.detach().clone() for k2, v in built.model.state_dict().items()}
            batches = [built.make_batch(i) for i in range(steps)]
            ref = train_run(built, init, batches, cpu, torch.float64, RunHow(round_to=prec.param_dtype))
            base = train_run(built, init, batches, cpu, prec)
        except Exception as e:
            out.errors.append(f"seed {s}: {first_line(e)}")
            continue
        if not (finite_curve(ref.curve) and parity(base.tensors, ref.tensors, prec, trusted=True, zeros=zeros).ok):
            out.errors.append(f"seed {s}: the trusted run is itself off float64 (left out)")
            continue
        samples.append((base.tensors, ref.tensors))
        out.curves.append((base.curve, ref.curve))
        out.seeds.append(s)
    out.tensors = sample_noise(samples, prec, zeros)
    return out
