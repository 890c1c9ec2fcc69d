"""flex: a FlexAttention conformance and performance matrix with a compile-time budget.

    bringup flex [--matrix auto|quick|default|FILE] [--budget SEC] [--backward auto|on|off]
                 [--dtype bf16|fp16|fp32|amp-bf16|amp-fp16] [--mods a,b,...] [--compile-backend NAME] [--workers N]
                 [--json FILE]

Each case compiles flex_attention with one mod at one shape on the device (compile + first call under
--budget), checks it against a float64 dense reference on cpu, times it, and gets one status. The
summary is the seeds' sentence: "89/96 passed; 7 budget (all batch 4, seq 8192)".

--backward auto: backward on every case, except on device types where torch itself has no
FlexAttention backward (cpu, mps as of torch 2.13: `_validate_device` raises NotImplementedError).
There the matrix runs forward-only and one extra case, the backward probe (the smallest shape, with
backward), reports the gap as `unsupported` instead of every case failing for the same reason.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from rich import box
from rich.markup import escape
from rich.table import Table

from bringup.api import register_capability, specs
from bringup.case import Case, CaseResult, Status
from bringup.compile_backend import check_compile_backend
from bringup.console import STATUS_STYLE, styled
from bringup.device import Device
from bringup.errors import BadInput
from bringup.flex import args as face  # the torch-free face (cli)
from bringup.flex import section, summary
from bringup.flex.args import DEFAULT_BUDGET_S, FlexOptions
from bringup.flex.case import run_case as _run
from bringup.flex.matrix import (
    MatrixError,
    case_label,
    default_matrix,
    load_matrix_file,
    normalize_mod_spec,
    quick_matrix,
)
from bringup.flex.mods import ModError, build_mod, is_user_mod
from bringup.flex.spec import FlexSpec, SpecError
from bringup.options import Options
from bringup.precision import parse_precision

if TYPE_CHECKING:
    from rich.console import Console

RUN_ALLOWANCE_S = 900.0  # the rest of a case (timing, the cpu reference) on top of the compile budget
# Device types whose FlexAttention has no backward in torch (torch/nn/attention/flex_attention.py,
# _validate_device, torch 2.13). If torch adds one, the auto backward probe starts passing: use --backward on.
NO_FLEX_BACKWARD = frozenset({"cpu", "mps"})
ENTRY = "bringup.flex.suite:run_case"


def _budget(raw: Any) -> float:
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise BadInput(f"--budget: expected a positive number of seconds, got {raw!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise BadInput(f"--budget: expected a positive number of seconds, got {raw!r}")
    return v


def _dtype_arg(raw: str | None) -> str | None:
    if raw is None:
        return None
    name = parse_precision(raw).name  # BadInput for unknown names
    if name not in ("fp32", "bf16", "fp16", "amp-bf16", "amp-fp16"):
        raise BadInput(f"--dtype {raw}: FlexAttention cases run in fp32, bf16 or fp16 (or amp-bf16, amp-fp16)")
    return name


def _backward_arg(raw: str | None) -> str | None:
    if raw is None:
        return None
    v = raw.strip().lower()
    if v not in ("auto", "on", "off"):
        raise BadInput(f"--backward: expected auto, on or off, got {raw!r}")
    return v


def _check_backend(name: str) -> None:
    check_compile_backend(name)


def _matrix(choice: str, device: Device) -> Any:
    if choice == "auto":
        choice = "quick" if device.is_cpu else "default"
    if choice == "quick":
        return quick_matrix()
    if choice == "default":
        return default_matrix()
    try:
        return load_matrix_file(choice)
    except MatrixError as e:
        raise BadInput(str(e)) from None


def _check_user_mods(specs: list[tuple[str, Any]]) -> None:
    """Import and call each user mod factory once on cpu (at its first case's shape): a broken user
    mod is bad input (exit 2), not 96 identical errors."""

    for spec, shape in specs:
        try:
            build_mod(spec, shape, torch.device("cpu"))
        except ModError as e:
            raise BadInput(str(e)) from None
        except BaseException as e:
            raise BadInput(f"user mod {spec!r}: calling it failed: {type(e).__name__}: {e}".splitlines()[0]) from None


def plan(
    matrix: Any,
    device: Device,
    budget_s: float = DEFAULT_BUDGET_S,
    dtype: str | None = None,
    backward: str | None = None,
    backend: str = "inductor",
    hidden: dict[str, Any] | None = None,
) -> list[Case]:
    """Matrix -> Cases for this device (pure). `hidden`: FlexSpec's hidden fields (recompile_limit, dynamo_reset)."""
    cases: list[Case] = []
    gap = False  # some case wanted auto backward on a device without it
    default_dtype = "fp32" if device.is_cpu else "bf16"
    for spec in matrix.cases:
        dt = dtype or spec.dtype or default_dtype
        bw = backward or spec.backward or "auto"
        on = bw == "on" or (bw == "auto" and device.type not in NO_FLEX_BACKWARD)
        gap |= bw == "auto" and not on
        cases.append(_case(spec, dt, on, budget_s, backend, hidden or {}, probe=False))
    if gap:
        smallest = min(matrix.cases, key=lambda s: (s.batch * s.q_heads * s.seq * s.seq * s.head_dim, s.seq))
        dt = dtype or smallest.dtype or default_dtype
        cases.append(_case(smallest, dt, True, budget_s, backend, hidden or {}, probe=True))
    seen: set[str] = set()
    out = []
    for c in cases:
        if c.case_id not in seen:
            seen.add(c.case_id)
            out.append(c)
    return out


def _case(
    spec: Any, dtype: str, backward: bool, budget_s: float, backend: str, hidden: dict[str, Any], probe: bool
) -> Case:
    """One Case from a matrix entry: its params are the FlexSpec's own serialization."""
    try:
        fs = FlexSpec(
            spec.mod,
            spec.batch,
            spec.seq,
            spec.q_heads,
            spec.kv_heads,
            spec.head_dim,
            dtype,
            backward,
            budget_s,
            backend,
            probe=probe,
            **hidden,
        )
    except SpecError as e:
        raise BadInput(str(e)) from None
    name = f"{case_label(spec.mod, spec.batch, spec.seq, spec.q_heads, spec.kv_heads, spec.head_dim)} {dtype}"
    name += " fwd+bwd" if backward else ""
    name += " [backward probe]" if probe else ""
    return Case("flex", name, fs.params(), ENTRY, budget_s + RUN_ALLOWANCE_S)


def build_cases(options: Options, device: Device) -> list[Case]:
    opts = options.of(FlexOptions)

    budget = _budget(opts.compile_budget)
    dtype = _dtype_arg(opts.dtype)
    backward = _backward_arg(opts.backward)
    if opts.recompile_limit is not None and opts.recompile_limit < 1:
        raise BadInput("--recompile-limit must be >= 1")
    matrix = _matrix(opts.matrix, device)
    if opts.mods.strip():
        mods = []
        for m in opts.mods.split(","):
            if not m.strip():
                continue
            try:
                mods.append(normalize_mod_spec(m))
            except (ModError, MatrixError) as e:
                raise BadInput(f"--mods: {e}") from None
        matrix = matrix.with_mods(mods)
    if not matrix.cases:
        raise BadInput(f"flex: matrix {matrix.name!r} has no cases with these options")
    first: dict[str, Any] = {}
    for c in matrix.cases:
        if is_user_mod(c.mod):
            first.setdefault(c.mod, c.shape)
    _check_user_mods(list(first.items()))
    _check_backend(opts.compile_backend)
    hidden: dict[str, Any] = {}
    if opts.recompile_limit is not None:
        hidden["recompile_limit"] = opts.recompile_limit
    if opts.no_dynamo_reset:
        hidden["dynamo_reset"] = False
    return plan(matrix, device, budget, dtype, backward, opts.compile_backend, hidden)


def run_cases(device: Device, quick: bool) -> list[Case]:
    return plan(quick_matrix() if quick else default_matrix(), device)


def run_case(case: Case, ctx: Any) -> CaseResult:
    return _run(case, ctx)


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    cols = [("compile s", "compile_s"), ("fwd ms", "fwd_ms"), ("bwd ms", "bwd_ms"), ("TFLOP/s", "tflops")]
    if getattr(console, "width", 80) >= 110:  # on a narrow console these live in the JSON only
        cols += [("sparse %", "sparsity"), ("max abs err", "max_abs_err")]
    cols = [(h, k) for h, k in cols if any(k in r.metrics for r in results)]
    vary_dtype = len({r.params.get("dtype") for r in results}) > 1

    def label(r: CaseResult) -> str:
        text = f"{summary.field_value(r, 'mod')} {summary.shape_label(r, vary_dtype, False)}"
        return text + (" +bwd" if r.params.get("backward") else "") + (" probe" if r.params.get("probe") else "")

    t = Table(title="flex", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("case", no_wrap=True)
    t.add_column("status", no_wrap=True, min_width=11)
    for h, _ in cols:
        t.add_column(h, justify="right", no_wrap=True)
    for r in results:
        vals = [f"{r.metrics[k].value:.3g}" if k in r.metrics else "-" for _, k in cols]
        t.add_row(escape(label(r)), styled(r.status), *vals)
    console.print(t)
    for r in results:
        if r.status is not Status.PASS and r.reason:
            console.print(f"  {escape(label(r))}: {styled(r.status)} {escape(r.reason)}")
    hm = summary.heatmap(results)
    if hm["mods"] and len(hm["shapes"]) > 1:
        g = Table(title="flex: status by mod x shape", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        g.add_column("mod", no_wrap=True)
        for s in hm["shapes"]:
            g.add_column(escape(s), justify="center")
        for mod, row in zip(hm["mods"], hm["status"], strict=True):
            cells = ["" if st is None else f"[{STATUS_STYLE.get(Status(st), 'red')}]{st}[/]" for st in row]
            g.add_row(escape(mod), *cells)
        console.print(g)
    line = summary.sentence(results)
    console.print(f"[bold]flex: {escape(line)}[/]")
    counted = [r for r in results if r.status is not Status.REF_FAIL]
    return {
        "sentence": line,
        "passed": sum(r.status is Status.PASS for r in counted),
        "counted": len(counted),
        "groups": summary.groups(results),
        "heatmap": hm,
    }


register_capability(
    face,
    build_cases,
    run_cases,
    summarize,
    title="FlexAttention matrix",
    section=section.render,
    metrics=specs("compile_s", "fwd_ms", "bwd_ms", "tflops", "sparsity", "max_abs_err", "max_abs_over_peak"),
)
