"""One FlexAttention case, in the worker: build the mod and inputs on the device, compile and run
flex_attention under the compile budget, detect a silent eager fallback, time it, and judge it
against the float64 dense reference on cpu.

Silent eager: the case compiles through a thin wrapper around the backend that counts the graphs it
compiles and the calls that run a compiled graph. A call during which no compiled graph ran was run
eagerly by dynamo (recompile limit hit, frame skipped, errors suppressed): `silent_eager`. Dynamo is
reset before every case (and its recompile limit left at the default), so a pooled worker never hits
the limit by accident; the hidden `--recompile-limit` / `--no-dynamo-reset` options exist to show it.
"""

from __future__ import annotations

import math
import re
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import chain, classify, first_line
from bringup.checks.module_rule import one_rounding
from bringup.device import Device
from bringup.device.timing import timed_repeats
from bringup.flex.dither import dithered_attention
from bringup.flex.mods import AttnShape, ModError, build_mod, default_scale, reference_for
from bringup.flex.reference import dense_attention, gather_kv, gather_q, ref_slices, trusted_attention
from bringup.flex.reweight import reweight_coefs
from bringup.flex.spec import FlexSpec
from bringup.flex.tolerance import MODULE_RULE_DTYPES, attn_reason, check_attention, failed_checks
from bringup.precision import parse_precision

SEED = 0
# torch's _validate_device: "FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices."
_DEVICE_NOT_SUPPORTED = re.compile(r"FlexAttention is only supported on|only supported on .*devices", re.I)


def classify_flex(exc: BaseException, compiling: bool) -> Status:
    """errors.classify, plus: FlexAttention refusing the device type (a ValueError) is `unsupported`."""
    if any(isinstance(e, ValueError) and _DEVICE_NOT_SUPPORTED.search(str(e)) for e in chain(exc)):
        return Status.UNSUPPORTED
    return classify(exc, compiling)


def flex_refuses(dev: torch.device) -> str:
    """FlexAttention's own device check, asked with an empty tensor on `dev`: its refusal ('' when it
    accepts the device type, or when this torch has no such check)."""
    try:
        from torch.nn.attention.flex_attention import _validate_device  # lazy: optional
    except ImportError:
        return ""
    t = torch.empty(1, 1, 1, 8, device=dev)
    try:
        _validate_device(t, t, t)
    except ValueError as e:
        return first_line(e)
    return ""


@dataclass
class CompileTally:
    graphs: int = 0  # graphs the backend compiled
    calls: int = 0  # calls that ran a compiled graph


def counting_backend(name: str, tally: CompileTally) -> Callable[..., Any]:
    """The named dynamo backend, wrapped to count compiled graphs and the calls that run them."""
    from torch._dynamo.backends.registry import lookup_backend  # lazy: private torch API, loaded only when used

    inner = lookup_backend(name)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Callable[..., Any]:
        tally.graphs += 1
        compiled = inner(gm, example_inputs, **kwargs)

        def run(*args: Any) -> Any:
            tally.calls += 1
            return compiled(*args)

        run.__dict__.update(getattr(compiled, "__dict__", {}))  # keep calling-convention markers
        return run

    return backend


def _counters() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters  # lazy: private torch API, loaded only when used

    return {k: dict(v) for k, v in counters.items()}


def _diff(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for k, v in after.items():
        d = {kk: vv - before.get(k, {}).get(kk, 0) for kk, vv in v.items() if vv != before.get(k, {}).get(kk, 0)}
        if d:
            out[k] = d
    return out


def _cache_entries(fn: Callable[..., Any]) -> int | None:
    """How many compiled variants dynamo holds for fn's code object (None if torch can't say)."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list  # lazy: optional

        return len(_debug_get_cache_entry_list(fn.__code__))
    except Exception:
        return None


def _eager_reason(diff: dict[str, dict[str, int]], what: str, entries: int | None, limit: int) -> str:
    hit = any("recompile limit" in k.lower() or "recompile_limit" in k for k in diff.get("unimplemented", {}))
    if hit or (entries is not None and entries >= limit):
        held = f"; {entries} compiled variant(s) of flex_attention already cached" if entries is not None else ""
        return f"{what} ran eager: dynamo hit its recompile limit ({limit}){held}"
    return f"{what} ran eager: dynamo ran no compiled graph for it (fallback)"


def _median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def _timed(
    fn: Callable[[], Any], device: Device, min_iters: int = 3, max_iters: int = 20, max_s: float = 2.0
) -> list[float]:
    """Each call's output is handed to the timer: computed before its clock stops, on any device."""
    return timed_repeats(fn, device.timer(), min_iters, max_iters, max_s)


def attention_flops(shape: AttnShape, density: float) -> float:
    """Forward FLOPs of attention: two matmuls of B*Hq*S*S*D multiply-adds, times the block density
    (FlexAttention's benchmark counts the same way; backward = 2.5x forward)."""
    return 4.0 * shape.batch * shape.q_heads * shape.seq * shape.seq * shape.head_dim * density


def _inputs(shape: AttnShape, dtype: torch.dtype, backward: bool) -> dict[str, torch.Tensor]:
    """Seeded cpu inputs, already rounded to the case dtype (the reference widens these to float64)."""
    g = torch.Generator().manual_seed(SEED)
    B, Hq, Hkv, S, D = shape.batch, shape.q_heads, shape.kv_heads, shape.seq, shape.head_dim
    out = {
        "q": torch.randn(B, Hq, S, D, generator=g).to(dtype),
        "k": torch.randn(B, Hkv, S, D, generator=g).to(dtype),
        "v": torch.randn(B, Hkv, S, D, generator=g).to(dtype),
    }
    if backward:
        out["do"] = torch.randn(B, Hq, S, D, generator=g).to(dtype)
    return out


def run_case(case: Case, ctx: Any) -> CaseResult:
    p = FlexSpec.from_params(case.params)  # validated when planned; stored cases read the same way
    device: Device = ctx.device
    dev = device.torch_device
    shape = p.shape
    prec = parse_precision(p.dtype)  # amp-bf16 / amp-fp16: bf16 / fp16 inputs, run under autocast
    dtype = prec.compute_dtype
    backward = p.backward

    def result(status: Status, reason: str = "", exc: BaseException | None = None) -> CaseResult:
        r = CaseResult.for_case(case, status, reason)
        if exc is not None and status in (Status.ERROR, Status.FAIL_COMPILE):
            r.error = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return r

    # ---- set-up on the device: mod, inputs, block mask ----------------------------------------------
    if refused := flex_refuses(dev):  # before the block mask: building one on such a device says nothing
        return result(Status.UNSUPPORTED, refused)
    cpu = _inputs(shape, dtype, backward)
    try:
        mod = build_mod(p.mod, shape, dev)
        x = {k: v.to(dev) for k, v in cpu.items()}
        if backward:
            for k in ("q", "k", "v"):
                x[k].requires_grad_(True)
        t0 = time.perf_counter()
        block_mask = None
        if mod.mask_mod is not None:
            bh = (None, None) if mod.mask_broadcast else (shape.batch, shape.q_heads)
            block_mask = create_block_mask(mod.mask_mod, bh[0], bh[1], shape.seq, shape.seq, device=dev)
        device.synchronize()
        mask_s = time.perf_counter() - t0
    except ModError as e:
        return result(Status.ERROR, str(e), e)
    except Exception as e:
        st = classify_flex(e, compiling=False)
        return result(st, f"set-up: {first_line(e)}", e)
    sparsity = float(block_mask.sparsity()) if block_mask is not None else 0.0
    density = 1.0 - sparsity / 100.0

    # ---- compile + first call, under the compile budget ---------------------------------------------
    if p.dynamo_reset:
        torch._dynamo.reset()
    limit = p.recompile_limit
    tally = CompileTally()
    gqa = shape.q_heads != shape.kv_heads
    with torch._dynamo.config.patch(recompile_limit=int(limit) if limit else torch._dynamo.config.recompile_limit):
        compiled = torch.compile(flex_attention, backend=counting_backend(p.backend, tally), dynamic=False)
        calls = 0

        def fwd() -> torch.Tensor:
            nonlocal calls
            calls += 1
            with prec.autocast(dev.type):
                return compiled(x["q"], x["k"], x["v"], score_mod=mod.score_mod, block_mask=block_mask, enable_gqa=gqa)

        before = _counters()
        try:
            with ctx.phase("compile", budget_s=float(p.compile_budget_s)):
                t0 = time.perf_counter()
                out = fwd()
                if backward:
                    out.backward(x["do"])
                device.synchronize()
                compile_s = time.perf_counter() - t0
        except Exception as e:
            st = classify_flex(e, compiling=True)
            return result(st, first_line(e), e)
        diff = _diff(before, _counters())
        first_eager = tally.calls == 0
        got = {"out": out.detach()}
        if backward:
            got |= {
                "dq": x["q"].grad.detach().clone(),
                "dk": x["k"].grad.detach().clone(),
                "dv": x["v"].grad.detach().clone(),
            }

        # ---- timing ---------------------------------------------------------------------------------
        try:
            fwd_times = _timed(fwd, device)
            bwd_times: list[float] = []
            if backward:
                timer = device.timer()
                for _ in range(max(3, min(10, len(fwd_times)))):
                    for k in ("q", "k", "v"):
                        x[k].grad = None
                    o = fwd()
                    device.materialize(o)  # the forward is not part of the backward's time
                    timer.start()
                    o.backward(x["do"])
                    bwd_times.append(timer.stop(x["q"].grad, x["k"].grad, x["v"].grad))
        except Exception as e:
            return result(classify_flex(e, compiling=False), f"timed runs: {first_line(e)}", e)
        later_eager = tally.calls < calls
        eager_why = ""
        if first_eager or later_eager:
            what = "the compiled call" if first_eager else f"{calls - tally.calls} of {calls} compiled calls"
            eager_why = _eager_reason(diff, what, _cache_entries(flex_attention), torch._dynamo.config.recompile_limit)

    # ---- numerics vs the float64 dense reference ----------------------------------------------------
    slices = ref_slices(shape)
    try:
        dense, origin = reference_for(p.mod, shape)
        scale = default_scale(shape.head_dim)
        ref = dense_attention(cpu["q"], cpu["k"], cpu["v"], dense, scale, slices, cpu.get("do"))
        # the trusted run at the case precision (cpu; reference.trusted_attention says how it rounds)
        trusted = None
        if dtype != torch.float64:
            trusted = trusted_attention(cpu["q"], cpu["k"], cpu["v"], dense, scale, slices, cpu.get("do"), dtype)
        # bf16 / fp16: the module rule's "rounding everything once" (flex/dither.py)
        dithered: list[dict[str, torch.Tensor]] = []
        n_dithered = 0
        if dtype in MODULE_RULE_DTYPES:
            dithered, n_dithered = dithered_attention(
                cpu["q"], cpu["k"], cpu["v"], dense, scale, slices, cpu.get("do"), one_rounding(dtype), ref
            )
    except Exception as e:
        r = result(Status.REF_FAIL, f"reference: {first_line(e)}")
        r.error = traceback.format_exc()
        return r
    full_out = got["out"].to("cpu")
    nonfinite = int((~torch.isfinite(full_out)).sum())
    mine = {"out": gather_q(shape, slices, full_out)}
    if backward:
        mine |= {
            "dq": gather_q(shape, slices, got["dq"].cpu()),
            "dk": gather_kv(slices, got["dk"].cpu()),
            "dv": gather_kv(slices, got["dv"].cpu()),
        }
    inputs = {
        "q": gather_q(shape, slices, cpu["q"]),
        "k": gather_kv(slices, cpu["k"]),
        "v": gather_kv(slices, cpu["v"]),
    }
    reweights: list[Any] = []  # the output's reweighting check (flex/reweight.py), bf16 / fp16
    if dtype in MODULE_RULE_DTYPES and trusted is not None and not nonfinite and mine["out"].shape == ref["out"].shape:
        errors = {"device": mine["out"].double() - ref["out"], "trusted": trusted["out"] - ref["out"]}
        reweights = reweight_coefs(cpu["q"], cpu["k"], cpu["v"], dense, scale, slices, ref["out"], errors)
    check = check_attention(mine, ref, dtype, trusted, dithered, inputs, reweights)

    # ---- verdict ------------------------------------------------------------------------------------
    if eager_why:
        status, why = Status.SILENT_EAGER, eager_why
        if not check.ok:
            why += f"; numerics also off: {attn_reason(check)}"
    elif nonfinite:
        status, why = Status.FAIL_NUMERIC, f"{nonfinite} non-finite values in the output"
    elif not check.ok:
        status, why = Status.FAIL_NUMERIC, attn_reason(check)
    else:
        status, why = Status.PASS, ""
    r = result(status, why)
    fwd_s = statistics.median(fwd_times)
    flops = attention_flops(shape, density)
    r.metric("compile_s", compile_s, "s")
    r.metric("fwd_ms", _median_ms(fwd_times), "ms")
    r.metric("tflops", flops / fwd_s / 1e12 if fwd_s > 0 else None, "TFLOP/s")
    if bwd_times:
        bwd_s = statistics.median(bwd_times)
        r.metric("bwd_ms", bwd_s * 1e3, "ms")
        r.metric("bwd_tflops", 2.5 * flops / bwd_s / 1e12 if bwd_s > 0 else None, "TFLOP/s")
    r.metric("sparsity", sparsity, "%")
    r.metric("mask_s", mask_s, "s")
    r.metric("max_abs_err", check.max_abs_err if math.isfinite(check.max_abs_err) else None)
    # max |err| / max |ref| (recorded as `max_rel_err` before 2026-12: the catalogue's max_rel_err is a rel_rmse)
    r.metric("max_abs_over_peak", check.max_abs_over_peak if math.isfinite(check.max_abs_over_peak) else None)
    r.metric("rel_rmse", check.rel_rmse if math.isfinite(check.rel_rmse) else None)
    inductor = diff.get("inductor", {})
    cache = "hit" if inductor.get("fxgraph_cache_hit") else "miss" if inductor.get("fxgraph_cache_miss") else "n/a"
    r.fields.update(
        {
            "mod_settings": dict(mod.settings),
            "reference": origin,
            "ref_slices": len(slices),
            "pairs_compared": f"{shape.batch} batch x {shape.q_heads} q heads ({len(slices)} kv-head groups): all",
            "compiled_graphs": tally.graphs,
            "compiled_calls": tally.calls,
            "calls": calls,
            "compile_cache": cache,
            "tolerance": {c.name: c.bound for c in check.tensors},
            "rule": "module" if dtype in MODULE_RULE_DTYPES and trusted is not None else "parity",
            "failed_checks": failed_checks(check),
            "closest": attn_reason(check) if check.ok else "",
            "dithered_slices": f"{n_dithered}/{len(slices)}" if n_dithered else None,
        }
    )
    del got, out
    device.empty_cache()
    return r
