"""profile: a few steady training steps under torch.profiler on the device, a Chrome/Perfetto trace,
and a summary a person can act on: device busy / idle / host overhead per step, top ops and
kernels by self time, host<->device transfers, CPU-fallback ops, compiled regions.

    bringup --device DEV profile [--model qwen3-tiny] [--mode eager|compile|regional] [--steps N]
                                 [--warmup W] [--batch B] [--seq S] [--dtype fp32|bf16|fp16|amp-bf16|amp-fp16]
                                 [--top N] [--out DIR]

The trace (`trace.json.gz`, opens offline in ui.perfetto.dev) and `summary.json` are the case's
artifacts in the store; with --out they are copied there too. Summary numbers: `bringup/profile/analysis.py`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from rich.markup import escape
from rich.table import Table

from bringup.api import register_capability, specs
from bringup.case import Case, CaseResult, CaseStopped, Status
from bringup.checks.errors import classify, first_line
from bringup.compile_backend import check_compile_backend
from bringup.console import case_table, clip
from bringup.device import Device
from bringup.errors import BadInput
from bringup.files import check_output_dir, write_json
from bringup.models import lm
from bringup.models.lm import MODES
from bringup.options import Options
from bringup.precision import Precision, parse_precision
from bringup.profile import analysis as bp
from bringup.profile import args as face  # the torch-free face (cli)
from bringup.profile import section as profile_section
from bringup.profile.args import BUDGET_S, DEFAULTS, ProfileOptions

if TYPE_CHECKING:
    from rich.console import Console

SUMMARY_KEYS = ("top_ops", "transfers", "busy_s", "idle_s", "host_s", "trace")
# A profiled step this many times an unprofiled one: the trace mostly shows the profiler (torch.profiler
# recording every op PyTorch/XLA traces lazily: ~20x on 2 cpu cores); said in the case's note.
PROFILER_SLOWDOWN = 2.0


# ---- planning (pure; raises BadInput before any work) --------------------------------------------
def check_model(model: str, overrides: list[str]) -> None:
    """Presets and config JSONs are checked here (cheap, no weights); module:function only for an
    importable module (its code runs in the worker, not here)."""

    if lm.is_user_fn(model):
        mod = model.partition(":")[0]
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise BadInput(f"model {model}: no module named {mod!r}")
        return
    lm.load_config(model, overrides)


@dataclass(frozen=True)
class ProfileCase:
    """What one profile case runs: the model and its mode, the step counts, the shape, the precision."""

    model: str = DEFAULTS["model"]
    mode: str = DEFAULTS["mode"]
    steps: int = DEFAULTS["steps"]
    warmup: int = DEFAULTS["warmup"]
    batch: int = DEFAULTS["batch"]
    seq: int = DEFAULTS["seq"]
    dtype: str = DEFAULTS["dtype"]
    top: int = DEFAULTS["top"]
    backend: str = DEFAULTS["backend"]
    overrides: tuple[str, ...] = ()
    out: str | None = None
    budget_s: float | None = None


def make_case(pc: ProfileCase) -> Case:
    if pc.mode not in MODES:
        raise BadInput(f"unknown --mode {pc.mode!r}; use {', '.join(MODES)}")
    if pc.mode != "eager" and pc.warmup < 1:
        raise BadInput(
            f"--mode {pc.mode} needs --untraced-steps >= 1 (the first step compiles; it must not be profiled)"
        )
    params = {
        "model": pc.model,
        "overrides": list(pc.overrides),
        "mode": pc.mode,
        "backend": pc.backend,
        "steps": pc.steps,
        "warmup": pc.warmup,
        "batch": pc.batch,
        "seq": pc.seq,
        "dtype": pc.dtype,
        "top": pc.top,
        "out": pc.out,
    }
    budget = pc.budget_s or BUDGET_S["eager" if pc.mode == "eager" else "compiled"]
    return Case("profile", f"{pc.model}-{pc.mode}", params, "bringup.profile.suite:run_profile", budget, isolated=True)


def build_cases(options: Options, device: Device) -> list[Case]:
    opts = options.of(ProfileOptions)
    dtype = parse_precision(opts.dtype).name
    if opts.mode != "eager":
        check_compile_backend(opts.compile_backend)
    out = check_output_dir(opts.out, "--out")
    case = make_case(
        ProfileCase(
            model=opts.model,
            mode=opts.mode,
            steps=opts.traced_steps,
            warmup=opts.untraced_steps,
            batch=opts.batch,
            seq=opts.seq,
            dtype=dtype,
            top=opts.top,
            backend=opts.compile_backend,
            overrides=tuple(opts.override or ()),
            out=out,
            budget_s=opts.case_budget,
        )
    )
    check_model(opts.model, list(opts.override))
    return [case]


def run_cases(device: Device, quick: bool) -> list[Case]:
    """`bringup run`: a short eager profile (and with --full, a compiled one too)."""
    if quick:
        return [make_case(ProfileCase(steps=2, warmup=1, batch=2, seq=64, top=10))]
    return [make_case(ProfileCase(steps=5, warmup=2)), make_case(ProfileCase(mode="compile", steps=5, warmup=2))]


# ---- the case (runs in the worker) ---------------------------------------------------------------
def _detect_fallbacks(device: Device, step: Any) -> tuple[dict[str, int] | None, str]:
    """Run one step under the fallback detector. (None, why) when there is nothing to detect (cpu)
    or no detector in this checkout."""
    if device.is_cpu:
        return None, ""
    try:
        from bringup.checks.fallbacks import FallbackDetector  # lazy: optional
    except ImportError as e:
        return None, f"fallback detector unavailable: {e}"
    det = FallbackDetector(device)
    with det:
        step()
    rep = det.report()
    return dict(rep.fallback_ops), ""


def _copy_out(src: Path, out_dir: Path) -> Path:
    """Copy into out_dir atomically (temp file + rename): never a half-written file there."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / src.name
    tmp = out_dir / f".{src.name}.{os.getpid()}.tmp"
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    return dst


@dataclass
class _Stepper:
    """One training step on the next batch (the batch's host->device copy is part of a step); keeps the
    last loss. `model` is the eager model until the mode is applied."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    prec: Precision
    scaler: Any
    batches: Iterator[torch.Tensor]
    device: torch.device
    loss: Any = None

    def __call__(self) -> None:
        tokens = next(self.batches).to(self.device)
        self.loss = lm.train_step(self.model, self.opt, tokens, self.prec, self.scaler)


def run_profile(case: Case, ctx: Any) -> CaseResult:
    """Build, the untraced steps (the first compiles), one plain timed step, the traced steps; then the
    summary, its artifacts and the case's metrics."""
    p = case.params
    try:
        step, fallback_ops, fb_note = _build(case, ctx.device)
        plain_s, cap, loss = _run(case, ctx, step)
    except CaseStopped as stop:
        return stop.result
    summary = _summary(p, bp.summarize_capture(cap, int(p["top"]), fallback_ops), plain_s, fb_note)
    summary |= {
        "model": p["model"],
        "mode": p["mode"],
        "device": ctx.device.name,
        "batch": p["batch"],
        "seq": p["seq"],
        "dtype": p["dtype"],
        "loss": loss,
    }
    return _record(case, ctx, summary, cap.trace_path, fallback_ops)


def _build(case: Case, dev: Device) -> tuple[_Stepper, dict[str, int] | None, str]:
    """The model, its optimizer and batches; the fallback detector's eager step; then the mode."""
    p = case.params
    prec = parse_precision(p["dtype"])  # amp-*: fp32 weights, the steps under autocast
    steps, warmup = int(p["steps"]), int(p["warmup"])
    try:
        model = lm.build_model(p["model"], p["overrides"], dev.torch_device, prec.param_dtype)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        scaler = prec.grad_scaler(dev.type)
        # + detector step + an unprofiled timed step + profiler warm-up
        n_batches = warmup + (0 if dev.is_cpu else 1) + 1 + 1 + steps
        batches = lm.synthetic_batches(lm.vocab_size(model), int(p["batch"]), int(p["seq"]), n_batches)
        step = _Stepper(model, opt, prec, scaler, iter(batches), dev.torch_device)
        # The fallback detector watches one EAGER step, before any compile: its own overhead must not
        # show in the timeline, and a compiled graph must not be traced under it.
        fallback_ops, fb_note = _detect_fallbacks(dev, step)
        step.model = lm.apply_mode(model, p["mode"], p["backend"])
    except BadInput as e:
        raise CaseStopped(CaseResult.for_case(case, Status.ERROR, str(e))) from e
    except Exception as e:
        raise CaseStopped(CaseResult.for_case(case, classify(e), first_line(e))) from e
    return step, fallback_ops, fb_note


def _run(case: Case, ctx: Any, step: _Stepper) -> tuple[float, Any, float]:
    """The untraced steps (the first one compiles, under the compile budget), one step without the
    profiler (what its own overhead is measured against), then the traced steps: (plain step s, capture,
    the last loss)."""
    p, dev = case.params, ctx.device
    compiling = p["mode"] != "eager"
    try:
        for i in range(int(p["warmup"])):
            if i == 0 and compiling:
                with ctx.phase("compile", budget_s=case.budget_s - 120):
                    step()
                    dev.synchronize()
            else:
                step()
        compiling = False
        timer = dev.timer()
        timer.start()
        step()
        plain_s = timer.stop(step.loss, step.model)
        cap = bp.capture(
            step,
            dev.type,
            int(p["steps"]),
            ctx.artifact("trace.json.gz"),
            sync=dev.synchronize,
            activities=dev.adapter.profiler_activities(),
        )
        loss = float(step.loss.float().cpu())
    except Exception as e:
        raise CaseStopped(CaseResult.for_case(case, classify(e, compiling), first_line(e))) from e
    return plain_s, cap, loss


def _summary(p: dict[str, Any], summary: dict[str, Any], plain_s: float, fb_note: str) -> dict[str, Any]:
    """The capture's summary with the unprofiled step, and a note when the profiler slowed the steps."""
    summary["unprofiled_step_s"] = plain_s
    slow = summary["step_s"] / plain_s if summary.get("step_s") and plain_s > 0 else None
    over = (
        f"torch.profiler slowed each step {slow:.1f}x ({summary['step_s']:.3g} s vs {plain_s:.3g} s unprofiled): "
        "the trace's times are mostly the profiler's own"
        if slow and slow > PROFILER_SLOWDOWN
        else ""
    )
    summary["note"] = "; ".join(x for x in (summary["note"], fb_note, over) if x)
    return summary


_FIELDS = (
    *SUMMARY_KEYS,
    "step_s",
    "ops_s",
    "steps",
    "top_kernels",
    "compiled_regions",
    "compiled_s",
    "device_memcpy",
    "fallback_ops",
    "activities",
    "note",
    "device",
)


def _record(
    case: Case, ctx: Any, summary: dict[str, Any], trace: Path, fallback_ops: dict[str, int] | None
) -> CaseResult:
    """summary.json and the trace as artifacts (copied to --out too); the metrics; the fallback ops as
    the reason."""
    summary_path = write_json(ctx.artifact("summary.json"), summary)
    artifacts = {"trace": str(trace), "summary": str(summary_path)}
    if out := case.params.get("out"):
        artifacts["trace_out"] = str(_copy_out(trace, Path(out)))
        artifacts["summary_out"] = str(_copy_out(summary_path, Path(out)))
    reason = ""
    if fallback_ops:
        top = sorted(fallback_ops, key=lambda k: (-fallback_ops[k], k))[:3]
        more = f", +{len(fallback_ops) - len(top)} more" if len(fallback_ops) > len(top) else ""
        reason = f"{len(fallback_ops)} op(s) ran through the CPU fallback: {', '.join(top)}{more}"
    r = CaseResult.for_case(case, Status.PASS, reason, artifacts=artifacts)
    for k in ("step_s", "busy_s", "idle_s", "host_s", "ops_s", "compiled_s", "unprofiled_step_s"):
        r.metric(k, summary[k], "s")
    r.metric("loss", summary["loss"])
    r.fields = {k: summary[k] for k in _FIELDS}
    return r


# ---- the terminal summary ------------------------------------------------------------------------
def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1e3:.2f} ms"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def print_profile(r: CaseResult, console: Console) -> None:
    f = r.fields
    step = f.get("step_s")
    console.print(
        f"[bold]profile {escape(r.name)}[/]: {f.get('steps')} steps, {_ms(step)} per step "
        f"(activities: {', '.join(f.get('activities') or [])})"
    )
    if f.get("busy_s") is None:
        console.print(
            f"  device busy n/a · device idle n/a · host overhead n/a (no device events in the trace); "
            f"host inside torch ops {_ms(f.get('ops_s'))} per step"
        )
    else:

        def pct(v: float) -> str:
            return f"{100 * v / step:.0f}%" if step else "-"

        console.print(
            f"  device busy {_ms(f['busy_s'])} ({pct(f['busy_s'])}) · device idle {_ms(f['idle_s'])} "
            f"({pct(f['idle_s'])}) · host overhead {_ms(f['host_s'])} ({pct(f['host_s'])})"
        )
    ops = f.get("top_ops") or []
    marks = any(o.get("fallback") for o in ops)
    t = Table(title="top ops by self time (per step)", title_justify="left")
    for c in ("op", "calls", "self", "% step", *(["fallback"] if marks else [])):
        t.add_column(c, justify="left" if c in ("op", "fallback") else "right")
    for o in ops:
        row = [escape(clip(o["name"], 70)), str(o["calls"]), _ms(o["self_s"]), f"{o['pct']:.1f}"]
        t.add_row(*row, *(["[yellow]CPU fallback[/]" if o.get("fallback") else ""] if marks else []))
    console.print(t)
    if f.get("top_kernels"):
        k = Table(title="top device kernels (per step)", title_justify="left")
        for c in ("kernel", "kind", "calls", "time", "% busy"):
            k.add_column(c, justify="left" if c in ("kernel", "kind") else "right")
        for o in f["top_kernels"]:
            k.add_row(escape(clip(o["name"], 70)), o["kind"], str(o["calls"]), _ms(o["time_s"]), f"{o['pct_busy']:.1f}")
        console.print(k)
    tr = f.get("transfers")
    if tr is None:
        console.print("  transfers: n/a (the profiler recorded no tensor devices)")
    elif f.get("device") == "cpu":
        console.print("  transfers: none (on cpu there is no host<->device boundary)")
    else:
        parts = [
            f"{d.upper()} {v['count']} × {_bytes(v['bytes'])} in {_ms(v['time_s'])} ({v['time_from']})"
            for d, v in tr.items()
        ]
        console.print(f"  transfers per step: {' · '.join(parts)}")
    if f.get("fallback_ops"):
        ops = ", ".join(f"{k} ×{v}" for k, v in sorted(f["fallback_ops"].items()))
        console.print(f"  [yellow]CPU-fallback ops[/]: {escape(ops)}")
    if f.get("compiled_regions"):
        regs = ", ".join(
            f"{escape(clip(c['name'], 40))} ×{c['calls']} {_ms(c['time_s'])}" for c in f["compiled_regions"]
        )
        console.print(f"  compiled regions ({_ms(f.get('compiled_s'))} of the step): {regs}")
    if f.get("note"):
        console.print(f"  note: {escape(f['note'])}")
    console.print(f"  trace: {f.get('trace')} (open in ui.perfetto.dev)", highlight=False)


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    console.print(case_table("profile", results, ["step_s", "busy_s", "idle_s", "host_s"]))
    for r in results:
        if r.status is Status.PASS and r.fields:
            print_profile(r, console)
    profiled = [r for r in results if r.fields]
    first = profiled[0].fields if profiled else {}
    extras: dict[str, Any] = {k: first.get(k) for k in SUMMARY_KEYS}
    if len(results) > 1:
        extras["profiles"] = [{"name": r.name, "status": r.status.value, **r.fields} for r in results]
    return extras


register_capability(
    face,
    build_cases,
    run_cases,
    summarize,
    title="Profile",
    section=profile_section.render,
    metrics=specs("step_s", "busy_s", "idle_s", "host_s", "ops_s", "compiled_s"),
)
