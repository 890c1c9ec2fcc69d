"""train: eager vs compiled vs regional training on the device: time to first step, steady step,
tokens/s, MFU, compile phases, cold and warm caches, loss curves, and --nproc N ranks with FSDP2.

    bringup --device DEV train [--model qwen3-tiny] [--override KEY=VALUE ...] [--modes eager,compile,regional]
        [--steps N] [--warmup W] [--batch B] [--seq S] [--dtype fp32|bf16] [--compile-backend NAME]
        [--cache cold|warm|both] [--nproc N] [--budget SEC] [--flops-only] [--json FILE]

One case per mode (and per cache state), each in a fresh worker process. The pieces live in
bringup/train/ (loop, caches, ranks, compile metrics, loss band, summary).
"""

from __future__ import annotations

import dataclasses
import json
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.api import register_capability, specs
from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.compile_backend import check_compile_backend
from bringup.device import Device
from bringup.errors import BadInput
from bringup.files import atomic_write_text
from bringup.models import lm, tying
from bringup.options import Options
from bringup.precision import parse_precision
from bringup.train import args as face  # the torch-free face (cli)
from bringup.train import arms, artifact, distributed, loop, numerics, reference, section
from bringup.train import cache as compile_cache
from bringup.train.accounting import account
from bringup.train.args import D, TrainOptions
from bringup.train.arms import EXTRA_MODES
from bringup.train.compile_metrics import silent_eager_reason
from bringup.train.planning import check_model, first_seen_last, parse_dynamic, parse_modes, parse_seqs
from bringup.train.spec import CACHE_ARTIFACT, CACHE_COLD, CACHE_NONE, CACHE_WARM, TrainSpec
from bringup.train.summary import mfu_impossible, preset_that_fits, record_outcome, scorecard
from bringup.train.summary import summarize as _summarize

if TYPE_CHECKING:
    from rich.console import Console

    pass

if TYPE_CHECKING:
    from rich.console import Console

ENTRY, FLOPS_ENTRY = "bringup.train.suite:run_mode", "bringup.train.suite:run_flops"
# Scheduling hints only (Case.cost: the longest ready case first when workers run side by side,
# bringup/runner/schedule.py): an arm's work relative to the others', as seconds of the quick run's qwen3-tiny on
# 2 cpu cores; a cold compile dominates. No verdict and no figure reads them.
ARM_COST = {CACHE_NONE: 10.0, CACHE_COLD: 50.0, CACHE_WARM: 10.0, CACHE_ARTIFACT: 15.0}


# ---- planning (pure; raises BadInput before any work; the parsers: bringup/train/planning.py) ---------
def _flops_conflicts(opts: TrainOptions) -> list[str]:
    names = (
        "modes",
        "steps",
        "warmup",
        "batch",
        "dtype",
        "compile_backend",
        "cache",
        "nproc",
        "compile_budget",
        "lr",
        "loss_rtol",
        "save_cache_artifact",
        "load_cache_artifact",
        "seqs",
        "dynamic",
    )
    return ["--" + o.replace("_", "-") for o in names if getattr(opts, o) is not None]


def build_cases(options: Options, device: Device) -> list[Case]:
    opts = options.of(TrainOptions)
    seqs = parse_seqs(opts.seqs, opts.seq)
    model, seq = opts.model or D.model, (max(seqs) if seqs else opts.seq or D.seq)
    if opts.flops_only:
        if bad := _flops_conflicts(opts):
            raise BadInput(f"--flops-only trains nothing: drop {', '.join(bad)}")
        check_model(model, list(opts.override), seq)
        params = {"flops_only": True, "model": model, "overrides": list(opts.override), "seq": seq}
        return [Case("train", f"flops-{model}", params, FLOPS_ENTRY, 600.0)]
    steps = opts.steps or D.steps
    dynamics = parse_dynamic(opts.dynamic)
    # with a schedule the warm-up covers the first meeting of every length (its compiles), when steps allow
    warmup = opts.warmup if opts.warmup is not None else min(max(D.warmup, first_seen_last(seqs)), steps - 1)
    if steps < 2 or warmup >= steps:
        raise BadInput(
            f"--steps ({steps}) must be more than --warmup ({warmup}): step 1 is the compile, and "
            "the steady step needs at least one step after the warm-up"
        )
    load = opts.load_cache_artifact
    default_modes: tuple[str, ...] = ("eager", "compile", "regional")
    if opts.cache == "all":
        default_modes += EXTRA_MODES
    if load:
        default_modes = ("eager", artifact.read(load).header.get("mode", "compile"))
    modes = parse_modes(opts.modes) if opts.modes is not None else default_modes
    backend = opts.compile_backend or device.default_compile_backend
    if opts.compile_backend is not None and any(m != "eager" for m in modes):
        check_compile_backend(backend)
    nproc = opts.nproc or 1
    if nproc > 1 and not device.is_cpu and nproc > device.count():
        raise BadInput(f"--nproc {nproc}: only {device.count()} {device.type} device(s) here")
    check_model(model, list(opts.override), seq)
    base = TrainSpec(
        model=model,
        overrides=tuple(opts.override),
        steps=steps,
        warmup=warmup,
        batch=opts.batch or D.batch,
        seq=seq,
        dtype=parse_precision(opts.dtype or D.dtype).name,
        backend=backend,
        nproc=nproc,
        lr=opts.lr or D.lr,
        compile_budget_s=opts.compile_budget,
        loss_rtol=opts.loss_rtol,
        seqs=seqs,
    )
    save = opts.save_cache_artifact
    return plan_arms(
        base,
        arms_for(opts, modes, base, device, dynamics),
        opts.case_budget,
        artifact=str(Path(load).expanduser().resolve()) if load else "",
        save_artifact=str(Path(save).expanduser().resolve()) if save else "",
        dynamics=dynamics,
    )


def arms_for(
    opts: TrainOptions, modes: tuple[str, ...], base: TrainSpec, device: Device, dynamics: tuple[str, ...] = ("auto",)
) -> list[tuple[str, str]]:
    """The (mode, cache) arms to run, in an order the local executor can run; BadInput for combinations
    that cannot work (checked before any work)."""
    load, save = opts.load_cache_artifact, opts.save_cache_artifact
    compiled = [m for m in modes if m != "eager"]
    if load:
        if opts.cache is not None:
            raise BadInput("--load-cache-artifact runs the compiled modes from the artifact: drop --cache")
        for m in compiled:  # one line naming the difference when the file was made for another stack
            for d in dynamics:
                artifact.check(load, base.with_(mode=m, dynamic=d), device.type)
        caches: tuple[str, ...] = (CACHE_ARTIFACT,)
    else:
        caches = {
            CACHE_WARM: (CACHE_WARM,),
            "both": (CACHE_COLD, CACHE_WARM),
            CACHE_ARTIFACT: (CACHE_COLD, CACHE_ARTIFACT),
        }.get(opts.cache, (CACHE_COLD,))  # type: ignore[arg-type]  # --cache not given (None): cold
    if opts.cache == "all":
        chosen = [a for a in arms.ALL_ARMS if a[0] in modes]
    else:
        chosen = [("eager", CACHE_NONE)] if "eager" in modes else []
        chosen += [(m, c) for c in caches for m in compiled if not (m == "aot" and c == CACHE_WARM)]
    if base.nproc > 1:
        bad = sorted({m for m, c in chosen if m in arms.EXTRA_MODES} | {c for _, c in chosen if c == CACHE_ARTIFACT})
        if bad:
            raise BadInput(f"--nproc {base.nproc}: {', '.join(bad)} run on one rank only")
    if save:
        colds = sum(c == CACHE_COLD for _, c in chosen) * len(dynamics)  # cold cases: one per dynamic setting
        if colds != 1:
            raise BadInput(
                f"--save-cache-artifact needs exactly one compiled mode compiled cold (this run has "
                f"{colds}): e.g. --modes eager,compile"
            )
        parent = Path(save).expanduser().resolve().parent
        if not parent.is_dir():
            raise BadInput(f"--save-cache-artifact {save}: no directory {parent}")
    return chosen


def plan_arms(
    base: TrainSpec,
    chosen: list[tuple[str, str]],
    case_budget: float = 3600.0,
    artifact: str = "",
    save_artifact: str = "",
    dynamics: tuple[str, ...] = ("auto",),
) -> list[Case]:
    """One case per arm, and per dynamic-shape setting for a compiled arm (eager has none)."""
    specs = []
    for mode, cache in chosen:
        for d in dynamics if mode != "eager" else ("auto",):
            s = base.with_(mode=mode, cache=cache, dynamic=d)
            if cache == CACHE_ARTIFACT and artifact:
                s = s.with_(artifact=artifact)
            if cache == CACHE_COLD and save_artifact:
                s = s.with_(save_artifact=save_artifact)
            specs.append(s)
    return arm_cases(specs, case_budget)


def plan(base: TrainSpec, modes: tuple[str, ...], caches: tuple[str, ...], case_budget: float = 3600.0) -> list[Case]:
    """Eager first (the loss reference), then every compiled mode cold, then warm (warm reruns on the
    cache its cold case left, so it must come after it: the local executor runs cases in order)."""
    specs = [base.with_(mode="eager", cache=CACHE_NONE)] if "eager" in modes else []
    for cache in caches:
        specs += [base.with_(mode=m, cache=cache) for m in modes if m != "eager"]
    return arm_cases(specs, case_budget)


def arm_cases(specs: list[TrainSpec], case_budget: float) -> list[Case]:
    """One isolated case per arm, linked (`linked`)."""
    return linked([_case(s, case_budget) for s in specs])


def linked(cases: list[Case]) -> list[Case]:
    """The train cases with what each waits for when workers run side by side (Case.after), over the whole
    list (arms planned in separate calls included: xla's warm arm): a compiled arm its eager case (the loss
    reference it reads at its end), a warm or artifact arm its cold case (the cache, the artifact). Without
    them each still runs, at a cost (an eager run of its own, a priming compile): the order is the runner's."""
    specs = [TrainSpec.from_params(c.params) for c in cases]
    out = []
    for s, c in zip(specs, cases, strict=True):
        after = [
            d.case_id
            for t, d in zip(specs, cases, strict=True)
            if (s.compiled and t.mode == "eager" and t.reference_key == s.reference_key)
            or (s.cache in (CACHE_WARM, CACHE_ARTIFACT) and t.cache == CACHE_COLD and t.cache_key == s.cache_key)
        ]
        out.append(dataclasses.replace(c, after=tuple(after)))
    return out


def _case(s: TrainSpec, case_budget: float) -> Case:
    return Case("train", s.name, s.params(), ENTRY, case_budget, isolated=True, cost=ARM_COST.get(s.cache, 10.0))


def apply_artifact_flags(cases: list[Case], save: str | None, load: str | None, device: Device) -> list[Case]:
    """`bringup run --save-cache-artifact / --load-cache-artifact`: the train cases get the same meaning as
    in `bringup train`. save: the full-compile cold case (else the first compiled cold case) also writes
    the artifact. load: the cold case of the file's mode becomes that mode's artifact arm (empty cache
    dirs + the file); a file that fits none of the run's train cases is one line (BadInput)."""
    specs = [(c, TrainSpec.from_params(c.params)) for c in cases if c.suite == "train" and c.entry == ENTRY]
    cold = [(c, s) for c, s in specs if s.cache == CACHE_COLD]
    changed: dict[str, TrainSpec] = {}
    if save:
        if not cold:
            raise BadInput("--save-cache-artifact: this run has no compiled train case")
        parent = Path(save).expanduser().resolve().parent
        if not parent.is_dir():
            raise BadInput(f"--save-cache-artifact {save}: no directory {parent}")
        c, s = next(((c, s) for c, s in cold if s.mode == "compile"), cold[0])
        changed[c.case_id] = s.with_(save_artifact=str(Path(save).expanduser().resolve()))
    if load:
        mode = artifact.read(load).header.get("mode")
        match = [(c, s) for c, s in cold if s.mode == mode]
        if not match:
            raise BadInput(
                f"--load-cache-artifact {load}: made for mode {mode!r}, which this run's train cases "
                "do not compile cold"
            )
        c, s = match[0]
        artifact.check(load, s, device.type)
        base = changed.get(c.case_id, s)
        changed[c.case_id] = base.with_(cache=CACHE_ARTIFACT, artifact=str(Path(load).expanduser().resolve()))
    out = []
    for c in cases:
        s2 = changed.get(c.case_id)
        out.append(c if s2 is None else dataclasses.replace(_case(s2, c.budget_s), after=c.after))
    return out


def run_cases(device: Device, quick: bool) -> list[Case]:
    """`bringup run`: quick = qwen3-tiny, all modes, a few small steps (about 2 min on 2 cpu cores with
    cold compiles); full = the largest qwen3 preset that fits the device, bf16, all modes, cold + warm."""
    modes = ("eager", "compile", "regional")
    backend = device.default_compile_backend
    if quick:
        base = TrainSpec(steps=6, warmup=2, batch=2, seq=128, backend=backend)
        cases = plan(base, modes, (CACHE_COLD,))
        if device.adapter.compile_cache_env(Path(".")):  # the family's own persistent compile cache (xla's):
            cases += plan(base, ("compile",), (CACHE_WARM,))  # its warm arm, after its cold case
        return linked(cases)
    base = TrainSpec(
        model=preset_that_fits(device, batch=2, seq=2048),
        steps=20,
        warmup=5,
        batch=2,
        seq=2048,
        dtype=low_precision(device),
        compile_budget_s=1800.0,
        backend=backend,
    )
    return plan(base, modes, (CACHE_COLD, CACHE_WARM), case_budget=7200.0)


def low_precision(device: Device) -> str:
    """`bringup run`'s low-precision training: amp-bf16 (how accelerators train: autocast over fp32 master
    weights) on an accelerator; on cpu pure bf16, as before (cpu autocast is not what anyone trains in)."""
    return "bf16" if device.is_cpu else "amp-bf16"


# ---- the cases (run in the worker) ---------------------------------------------------------------
@dataclasses.dataclass
class _Caches:
    """A compiled case's caches: their dirs, what the mode is given (an artifact's loader or saver), what
    was loaded, and the saver's finish (writes the artifact once the case passed)."""

    dirs: Any = None
    mode_kw: dict[str, Any] = dataclasses.field(default_factory=dict)
    loaded: dict[str, Any] = dataclasses.field(default_factory=dict)
    finish: Callable[[], Any] | None = None


def run_mode(case: Case, ctx: Any) -> CaseResult:
    """One mode: caches, train, then the verdict (crash/compile/budget first, then numbers)."""
    spec = TrainSpec.from_params(case.params)
    r = CaseResult.for_case(case, Status.PASS)
    caches = _prepare_caches(case, spec, r, ctx) if spec.compiled else _Caches()
    if isinstance(caches, CaseResult):
        return caches
    kernels_before = _kernel_files() if spec.compiled else None  # what the job then builds, counted after
    phase = lambda: ctx.phase("compile" if spec.compiled else "first_step", spec.compile_budget_s)
    try:
        if spec.nproc > 1:
            out = distributed.launch(spec, ctx.device, ctx.imports, ctx.artifact_dir / "ranks", first_step=phase)
        else:
            out = loop.train(spec, ctx.device, first_step=phase, mode_kw=caches.mode_kw)
    except loop.StageError as e:
        return _failed(case, e.exc, e.stage, e.stage == "first_step" and spec.compiled, ctx.device)
    load_s = float(caches.loaded.get("load_s", 0.0))
    record_outcome(r, spec, out, ctx.device, load_s=load_s, run_dir=ctx.run_dir)
    verdicts = _verdicts(r, spec, out, ctx)
    r.status, r.reason = verdict(verdicts, r.fields.get("tying_finding", ""))
    if spec.mode == "eager" and r.status in (Status.PASS, Status.FALLBACK):
        _save_reference(spec, ctx, out.losses)  # the compiled cases' loss reference: a checked eager run
    if spec.compiled:
        after = _kernel_files()
        built = len(after - kernels_before) if after is not None and kernels_before is not None else None
        verdicts_after = account(r, spec, out.final, caches.loaded, built, ctx.device.adapter.compile_cache_counts())
        if verdicts_after:
            r.status, r.reason = verdict(verdicts + verdicts_after, r.fields.get("tying_finding", ""))
    _record_caches(r, spec, caches)
    return r


def _prepare_caches(case: Case, spec: TrainSpec, r: CaseResult, ctx: Any) -> _Caches | CaseResult:
    """A compiled case's cache dirs: primed (warm, artifact: by a cold compile when no cold case passed),
    an artifact loaded into fresh dirs, or (cold) a saver for the artifact; the failed result if that fails."""
    c = _Caches()
    dirs, needs_priming = compile_cache.prepare(spec, ctx.run_dir, ctx.device)
    if spec.cache == CACHE_WARM:
        r.fields["warm_from"] = "primed by this case (no passed cold case)" if needs_priming else "cold case"
    made = dirs.root / compile_cache.ARTIFACT if spec.cache == CACHE_ARTIFACT and needs_priming else None
    work = ctx.artifact_dir
    if needs_priming and (err := compile_cache.prime(spec, ctx.device.name, ctx.imports, work, save_to=made)):
        unsupported = err.startswith("NotImplementedError: ")
        exc = NotImplementedError(err.removeprefix("NotImplementedError: ")) if unsupported else RuntimeError(err)
        return _failed(case, exc, "priming the cache (a cold compile)", True, ctx.device)
    if spec.cache == CACHE_ARTIFACT:
        src = made or compile_cache.artifact_source(spec, ctx.run_dir)
        own = "primed by this case (no passed cold case)" if made else "cold case"
        r.fields["artifact_from"] = f"user file {spec.artifact}" if spec.artifact else own
        dirs = compile_cache.fresh(spec, ctx.run_dir, ctx.device)  # a new job: empty cache dirs, then the artifact
        try:
            c.mode_kw, c.loaded = compile_cache.load(spec, src, ctx.device.type)  # type: ignore[arg-type]  # src is None only when primed
        except Exception as e:
            return _failed(case, e, "loading the cache artifact", True, ctx.device)
        r.fields["artifact"] = c.loaded
    if spec.cache == CACHE_COLD:  # every cold case leaves an artifact for the artifact arm (and the user)
        paths = [dirs.root / compile_cache.ARTIFACT] + ([Path(spec.save_artifact)] if spec.save_artifact else [])
        c.mode_kw, c.finish = compile_cache.saver(spec, ctx.device.type, paths)
    r.fields["cache_dir"] = str(dirs.root)
    c.dirs = dirs
    return c


def _verdicts(r: CaseResult, spec: TrainSpec, out: Any, ctx: Any) -> list[tuple[Status, str]]:
    """What the run says against itself (MFU, finite losses, fallbacks) and against its reference (eager:
    the reference's own checks; compiled: silent eager and the loss curve vs the checked eager run)."""
    verdicts: list[tuple[Status, str]] = []
    if why := mfu_impossible(r):
        verdicts.append((Status.ERROR, why))
    if (bad := numerics.first_nonfinite(out.losses)) is not None:
        verdicts.append((Status.FAIL_NUMERIC, f"loss is not finite at step {bad}"))
    if spec.mode == "eager":
        verdicts += _eager_verdicts(r, spec, ctx)
    else:
        if why := silent_eager_reason(out.final, spec.mode):
            verdicts.append((Status.SILENT_EAGER, why))
        ref, source = _eager_reference(spec, ctx)
        r.fields["loss_reference"] = source
        if ref is None:  # nothing to compare the curve with: the case judged nothing numerically
            verdicts.append((Status.REF_FAIL, f"no valid loss reference: {source.removeprefix('none: ')}"))
        else:
            rep = numerics.compare(out.losses, ref, numerics.band_for(spec.dtype, spec.loss_rtol))
            r.metric("loss_divergence", rep.max_rel_dev)
            r.fields["loss_check"] = rep.summary(spec.mode)
            if not rep.ok:
                verdicts.append((Status.FAIL_NUMERIC, rep.summary(spec.mode)))
    if out.fallback_ops:
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(out.fallback_ops.items(), key=lambda kv: -kv[1])[:5])
        verdicts.append((Status.FALLBACK, f"{len(out.fallback_ops)} op(s) ran via the CPU fallback: {ops}"))
    return verdicts


def _record_caches(r: CaseResult, spec: TrainSpec, c: _Caches) -> None:
    """A passed case writes its artifact and marks its cold cache passed; the caches' sizes."""
    if c.finish is not None and r.status is Status.PASS:
        r.fields["artifact_saved_bytes"] = c.finish()
        if spec.save_artifact:
            r.fields["artifact_saved_to"] = spec.save_artifact
    if c.dirs is not None and spec.cache == CACHE_COLD and r.status is Status.PASS:
        c.dirs.mark_passed()
    if c.dirs is not None:
        r.metric("cache_bytes", c.dirs.size_bytes(), "B")
        r.fields["cache_layer_bytes"] = c.dirs.layer_bytes()


def _kernel_files() -> set[str] | None:
    """The compiled kernel files in this job's inductor cache dir (None: that dir cannot be read)."""
    try:
        return artifact.kernel_files()
    except (OSError, ImportError, AttributeError):  # unreadable, or a torch whose inductor lays it out otherwise
        return None


# A numeric failure outranks the rest; then what a check raised (error, oom, unsupported ...); `ref_fail`
# (nothing judged) only when nothing else was seen.
_LAST = (Status.SILENT_EAGER, Status.FALLBACK, Status.REF_FAIL)


def verdict(found: list[tuple[Status, str]], finding: str = "") -> tuple[Status, str]:
    """One case's status and reason from what its checks found: fail_numeric first, then any other status
    a check gave, then silent_eager, fallback, ref_fail; every reason joined. A device finding that is
    no verdict of its own (broken tying, models/tying.py) leads the reason."""
    given = [s for s, _ in found]
    order = [Status.FAIL_NUMERIC, *[s for s in given if s not in _LAST], *_LAST]
    status = next((st for st in order if st in given), Status.PASS)
    reasons = [why for _, why in found]
    return status, "; ".join([finding, *reasons] if finding else reasons)


def _eager_verdicts(r: CaseResult, spec: TrainSpec, ctx: Any) -> list[tuple[Status, str]]:
    """The eager case's first steps against the cpu reference (train/reference.py)."""
    try:
        chk = reference.check_eager(spec, ctx.device)
    except Exception as e:  # the device run of the check raised (the timed run did not): say where
        return [(classify(e), f"eager reference check: {first_line(e)}")]
    return _record_check(r, chk, ctx.device)


def _record_check(r: CaseResult, chk: Any, device: Device) -> list[tuple[Status, str]]:
    r.fields["eager_check"] = chk.fields()
    r.metric("broken_ties", len(chk.broken_ties))
    if chk.broken_ties:
        r.fields["tying_broken"] = chk.broken_ties
        r.fields["tying_finding"] = tying.describe(chk.broken_ties, device.name)
    if chk.max_rel_err is not None:
        r.metric("eager_max_rel_err", chk.max_rel_err)
    if chk.ok is None:
        return [(Status.REF_FAIL, chk.summary)]
    if not chk.ok:
        return [(Status.FAIL_NUMERIC, f"eager vs {chk.reference}: {chk.summary}")]
    return []


def _failed(case: Case, exc: BaseException, stage: str, compiling: bool, device: Device | None = None) -> CaseResult:
    status = getattr(exc, "status", None) or classify(exc, compiling=compiling)
    why = str(exc) if hasattr(exc, "status") else first_line(exc)  # a RankError: already "rank R: Type: msg"
    target = next((ln.strip() for ln in str(exc).splitlines() if ln.strip().startswith("target:")), "")
    why += f" ({target})" if target else ""  # inductor lowering errors name the op on a later line
    if (
        compiling
        and device is not None
        and status is Status.FAIL_COMPILE
        and case.params.get("backend") == "inductor"
        and not device.has_inductor_codegen
    ):
        status, why = Status.UNSUPPORTED, f"inductor has no code generator registered for {device.type!r}: {why}"
    r = CaseResult.for_case(case, status, f"{stage}: {why}")
    r.error = "".join(traceback.format_exception(exc))
    r.fields["failed_stage"] = stage
    return r


def _reference_path(spec: TrainSpec, ctx: Any) -> Any:
    return ctx.run_dir / "train-ref" / f"{spec.reference_key}.json"


def _save_reference(spec: TrainSpec, ctx: Any, losses: list[float]) -> None:
    p = _reference_path(spec, ctx)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(p, json.dumps({"loss": losses, "spec": spec.params()}))


def _eager_reference(spec: TrainSpec, ctx: Any) -> tuple[list[float] | None, str]:
    """The compiled mode's loss reference: the curve of this run's eager case, saved only when that case
    passed its cpu reference check; if there is none (eager not asked for, still running, or failed)
    and there is one rank, an eager run in this process after the measurement, checked against the
    cpu reference the same way. (None, "none: why") when no valid reference exists."""
    p = _reference_path(spec, ctx)
    if p.exists():
        return list(json.loads(p.read_text())["loss"]), "eager case (checked against the cpu reference)"
    if spec.nproc > 1:
        return None, "none: no eager case of this run passed its cpu check (with --nproc, run eager too)"
    import torch._dynamo  # lazy: private torch API, loaded only when used

    torch._dynamo.reset()  # drop compiled graphs (and the model they hold) before a second model
    eager = spec.with_(mode="eager", cache=CACHE_NONE)
    try:
        out = loop.train(eager, ctx.device, check_fallbacks=False)
    except loop.StageError as e:
        return None, f"none: the eager run failed ({e.stage}: {first_line(e.exc)})"
    try:
        chk = reference.check_eager(eager, ctx.device)
    except Exception as e:
        return None, f"none: the eager run's cpu check raised {first_line(e)}"
    if chk.ok is None:
        return None, f"none: {chk.summary}"
    if not chk.ok:
        return None, f"none: the eager run in this case is off the cpu reference ({chk.summary})"
    return out.losses, "eager run in this case (checked against the cpu reference)"


def run_flops(case: Case, ctx: Any) -> CaseResult:
    """--flops-only: params and TorchTitan's FLOPs/token from the model built on the meta device."""
    p = case.params
    meta = lm.build_model(p["model"], p["overrides"], device="meta")
    params, emb = lm.param_counts(meta)
    cfg = meta.config
    r = CaseResult.for_case(case, Status.PASS)
    r.metric("params", params)
    r.metric("embedding_params", emb)
    r.metric("flops_per_token", lm.flops_per_token(meta, int(p["seq"])), "FLOP")
    r.fields["config"] = {
        k: getattr(cfg, k, None)
        for k in (
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "vocab_size",
            "tie_word_embeddings",
        )
    }
    return r


def _scorecard(results: list[CaseResult]) -> list[tuple[str, str]]:
    return scorecard(results)


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    return _summarize(results, console)


register_capability(
    face,
    build_cases,
    run_cases,
    summarize,
    title="Training: eager vs compiled",
    section=section.render,
    scorecard=lambda rs: _scorecard(list(rs)),
    metrics=specs(
        "ttfs_s",
        "step_s",
        "tokens_per_s",
        "tokens_per_s_per_device",
        "mfu",
        "peak_mem_bytes",
        "graph_breaks",
        "recompiles",
        "compile_s",
        "loss_divergence",
    ),
)
