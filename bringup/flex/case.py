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

from bringup.case import Case, CaseResult, CaseStopped, Status
from bringup.checks.errors import chain, classify, first_line
from bringup.checks.module_rule import one_rounding
from bringup.checks.parity import ParityReport
from bringup.device import Device
from bringup.device.timing import timed_repeats
from bringup.flex.dither import dithered_attention
from bringup.flex.mods import AttnShape, DenseRef, FlexMod, ModError, build_mod, default_scale, reference_for
from bringup.flex.reference import Attention, Slice, dense_attention, gather_kv, gather_q, ref_slices, trusted_attention
from bringup.flex.reweight import reweight_coefs
from bringup.flex.spec import FlexSpec
from bringup.flex.tolerance import MODULE_RULE_DTYPES, attn_reason, check_attention, failed_checks
from bringup.precision import Precision, parse_precision

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


@dataclass(frozen=True)
class _Flex:
    """What every step of one case reads: the case, its spec, the device, the precision."""

    case: Case
    p: FlexSpec
    device: Device
    prec: Precision

    @property
    def dev(self) -> torch.device:
        return self.device.torch_device

    @property
    def shape(self) -> AttnShape:
        return self.p.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.prec.compute_dtype

    @property
    def backward(self) -> bool:
        return bool(self.p.backward)

    def result(self, status: Status, reason: str = "", exc: BaseException | None = None) -> CaseResult:
        r = CaseResult.for_case(self.case, status, reason)
        if exc is not None and status in (Status.ERROR, Status.FAIL_COMPILE):
            r.error = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return r


@dataclass(frozen=True)
class _SetUp:
    """The case on the device: its mod, inputs (cpu and device) and block mask."""

    cpu: dict[str, torch.Tensor]
    x: dict[str, torch.Tensor]
    mod: FlexMod
    block_mask: Any
    mask_s: float

    @property
    def sparsity(self) -> float:
        return float(self.block_mask.sparsity()) if self.block_mask is not None else 0.0


@dataclass(frozen=True)
class _Run:
    """The compiled runs: outputs of the first call, timings, and what dynamo did."""

    got: dict[str, torch.Tensor]
    compile_s: float
    fwd_times: list[float]
    bwd_times: list[float]
    tally: CompileTally
    calls: int
    diff: dict[str, dict[str, int]]
    eager_why: str


@dataclass(frozen=True)
class _Reference:
    """The float64 dense reference on cpu, the trusted run at the case precision, the dithered runs."""

    slices: list[Slice]
    dense: DenseRef
    origin: str
    scale: float
    ref: dict[str, torch.Tensor]
    trusted: dict[str, torch.Tensor] | None
    dithered: list[dict[str, torch.Tensor]]
    n_dithered: int


@dataclass
class _Forward:
    """The compiled flex_attention on the case's device inputs; counts its calls."""

    compiled: Callable[..., Any]
    c: _Flex
    s: _SetUp
    calls: int = 0

    def __call__(self) -> torch.Tensor:
        self.calls += 1
        x, shape = self.s.x, self.c.shape
        gqa = shape.q_heads != shape.kv_heads
        with self.c.prec.autocast(self.c.dev.type):
            return self.compiled(
                x["q"], x["k"], x["v"], score_mod=self.s.mod.score_mod, block_mask=self.s.block_mask, enable_gqa=gqa
            )


def run_case(case: Case, ctx: Any) -> CaseResult:
    """Set up, compile and time on the device, the reference on cpu, then the verdict and its record."""
    p = FlexSpec.from_params(case.params)  # validated when planned; stored cases read the same way
    # amp-bf16 / amp-fp16: bf16 / fp16 inputs, run under autocast
    c = _Flex(case, p, ctx.device, parse_precision(p.dtype))
    if refused := flex_refuses(c.dev):  # before the block mask: building one on such a device says nothing
        return c.result(Status.UNSUPPORTED, refused)
    try:
        s = _set_up(c)
        run = _compile_and_time(c, s, ctx)
        ref = _reference(c, s.cpu)
    except CaseStopped as stop:
        return stop.result
    check, nonfinite = _judge(c, s.cpu, run.got, ref)
    r = _record(c, s, run, ref, check, nonfinite)
    del run
    c.device.empty_cache()
    return r


def _set_up(c: _Flex) -> _SetUp:
    """Seeded inputs, the mod and the block mask on the device (mask_s: the block mask's build time)."""
    shape = c.shape
    cpu = _inputs(shape, c.dtype, c.backward)
    try:
        mod = build_mod(c.p.mod, shape, c.dev)
        x = {k: v.to(c.dev) for k, v in cpu.items()}
        if c.backward:
            for k in ("q", "k", "v"):
                x[k].requires_grad_(True)
        t0 = time.perf_counter()
        block_mask = None
        if mod.mask_mod is not None:
            bh = (None, None) if mod.mask_broadcast else (shape.batch, shape.q_heads)
            block_mask = create_block_mask(mod.mask_mod, bh[0], bh[1], shape.seq, shape.seq, device=c.dev)
        c.device.synchronize()
        mask_s = time.perf_counter() - t0
    except ModError as e:
        raise CaseStopped(c.result(Status.ERROR, str(e), e)) from e
    except Exception as e:
        st = classify_flex(e, compiling=False)
        raise CaseStopped(c.result(st, f"set-up: {first_line(e)}", e)) from e
    return _SetUp(cpu, x, mod, block_mask, mask_s)


def _compile_and_time(c: _Flex, s: _SetUp, ctx: Any) -> _Run:
    """Compile + first call under the compile budget, then the timed runs, under the case's recompile limit."""
    if c.p.dynamo_reset:
        torch._dynamo.reset()
    limit = c.p.recompile_limit
    tally = CompileTally()
    with torch._dynamo.config.patch(recompile_limit=int(limit) if limit else torch._dynamo.config.recompile_limit):
        compiled = torch.compile(flex_attention, backend=counting_backend(c.p.backend, tally), dynamic=False)
        fwd = _Forward(compiled, c, s)
        before = _counters()
        out, compile_s = _first_call(c, s, fwd, ctx)
        diff = _diff(before, _counters())
        first_eager = tally.calls == 0
        got = {"out": out.detach()}
        if c.backward:
            got |= {g: s.x[k].grad.detach().clone() for g, k in (("dq", "q"), ("dk", "k"), ("dv", "v"))}  # type: ignore[union-attr]  # backward ran: q, k, v have grads
        fwd_times, bwd_times = _timed_runs(c, s, fwd)
        eager_why = ""
        if first_eager or tally.calls < fwd.calls:
            what = "the compiled call" if first_eager else f"{fwd.calls - tally.calls} of {fwd.calls} compiled calls"
            eager_why = _eager_reason(diff, what, _cache_entries(flex_attention), torch._dynamo.config.recompile_limit)
    return _Run(got, compile_s, fwd_times, bwd_times, tally, fwd.calls, diff, eager_why)


def _first_call(c: _Flex, s: _SetUp, fwd: _Forward, ctx: Any) -> tuple[torch.Tensor, float]:
    """The first call (and its backward), which compiles: its output and how long it took."""
    try:
        with ctx.phase("compile", budget_s=float(c.p.compile_budget_s)):
            t0 = time.perf_counter()
            out = fwd()
            if c.backward:
                out.backward(s.x["do"])
            c.device.synchronize()
            return out, time.perf_counter() - t0
    except Exception as e:
        st = classify_flex(e, compiling=True)
        raise CaseStopped(c.result(st, first_line(e), e)) from e


def _timed_runs(c: _Flex, s: _SetUp, fwd: _Forward) -> tuple[list[float], list[float]]:
    """The forward's times, then (backward cases) the backward's, each without the forward."""
    x = s.x
    try:
        fwd_times = _timed(fwd, c.device)
        bwd_times: list[float] = []
        if c.backward:
            timer = c.device.timer()
            for _ in range(max(3, min(10, len(fwd_times)))):
                for k in ("q", "k", "v"):
                    x[k].grad = None
                o = fwd()
                c.device.materialize(o)  # the forward is not part of the backward's time
                timer.start()
                o.backward(x["do"])
                bwd_times.append(timer.stop(x["q"].grad, x["k"].grad, x["v"].grad))
    except Exception as e:
        raise CaseStopped(c.result(classify_flex(e, compiling=False), f"timed runs: {first_line(e)}", e)) from e
    return fwd_times, bwd_times


def _reference(c: _Flex, cpu: dict[str, torch.Tensor]) -> _Reference:
    """The float64 dense reference, the trusted run at the case precision (cpu; reference.trusted_attention
    says how it rounds) and, in bf16 / fp16, the module rule's "rounding everything once" (flex/dither.py)."""
    shape, dtype = c.shape, c.dtype
    slices = ref_slices(shape)
    try:
        dense, origin = reference_for(c.p.mod, shape)
        scale = default_scale(shape.head_dim)
        at = Attention(cpu["q"], cpu["k"], cpu["v"], dense, scale, slices, cpu.get("do"))
        ref = dense_attention(at)
        trusted = None
        if dtype != torch.float64:
            trusted = trusted_attention(at, dtype)
        dithered: list[dict[str, torch.Tensor]] = []
        n_dithered = 0
        if dtype in MODULE_RULE_DTYPES:
            dithered, n_dithered = dithered_attention(at, one_rounding(dtype), ref)
    except Exception as e:
        r = c.result(Status.REF_FAIL, f"reference: {first_line(e)}")
        r.error = traceback.format_exc()
        raise CaseStopped(r) from e
    return _Reference(slices, dense, origin, scale, ref, trusted, dithered, n_dithered)


def _judge(
    c: _Flex, cpu: dict[str, torch.Tensor], got: dict[str, torch.Tensor], rf: _Reference
) -> tuple[ParityReport, int]:
    """The device's outputs (and gradients) against the reference, slice by slice; and how many of the
    output's values are not finite."""
    shape, slices, ref = c.shape, rf.slices, rf.ref
    full_out = got["out"].to("cpu")
    nonfinite = int((~torch.isfinite(full_out)).sum())
    mine = {"out": gather_q(shape, slices, full_out)}
    if c.backward:
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
    trusted, dtype = rf.trusted, c.dtype
    if dtype in MODULE_RULE_DTYPES and trusted is not None and not nonfinite and mine["out"].shape == ref["out"].shape:
        errors = {"device": mine["out"].double() - ref["out"], "trusted": trusted["out"] - ref["out"]}
        at = Attention(cpu["q"], cpu["k"], cpu["v"], rf.dense, rf.scale, slices)
        reweights = reweight_coefs(at, ref["out"], errors)
    return check_attention(mine, ref, dtype, trusted, rf.dithered, inputs, reweights), nonfinite


def _verdict(eager_why: str, nonfinite: int, check: ParityReport) -> tuple[Status, str]:
    if eager_why:
        why = eager_why
        if not check.ok:
            why += f"; numerics also off: {attn_reason(check)}"
        return Status.SILENT_EAGER, why
    if nonfinite:
        return Status.FAIL_NUMERIC, f"{nonfinite} non-finite values in the output"
    if not check.ok:
        return Status.FAIL_NUMERIC, attn_reason(check)
    return Status.PASS, ""


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _record(c: _Flex, s: _SetUp, run: _Run, rf: _Reference, check: ParityReport, nonfinite: int) -> CaseResult:
    """The verdict, the case's metrics and the fields that say how it was judged."""
    r = c.result(*_verdict(run.eager_why, nonfinite, check))
    fwd_s = statistics.median(run.fwd_times)
    flops = attention_flops(c.shape, 1.0 - s.sparsity / 100.0)
    r.metric("compile_s", run.compile_s, "s")
    r.metric("fwd_ms", _median_ms(run.fwd_times), "ms")
    r.metric("tflops", flops / fwd_s / 1e12 if fwd_s > 0 else None, "TFLOP/s")
    if run.bwd_times:
        bwd_s = statistics.median(run.bwd_times)
        r.metric("bwd_ms", bwd_s * 1e3, "ms")
        r.metric("bwd_tflops", 2.5 * flops / bwd_s / 1e12 if bwd_s > 0 else None, "TFLOP/s")
    r.metric("sparsity", s.sparsity, "%")
    r.metric("mask_s", s.mask_s, "s")
    r.metric("max_abs_err", _finite(check.max_abs_err))
    # max |err| / max |ref| (recorded as `max_rel_err` before 2026-12: the catalogue's max_rel_err is a rel_rmse)
    r.metric("max_abs_over_peak", _finite(check.max_abs_over_peak))
    r.metric("rel_rmse", _finite(check.rel_rmse))
    r.fields.update(_fields(c, s, run, rf, check))
    return r


def _fields(c: _Flex, s: _SetUp, run: _Run, rf: _Reference, check: ParityReport) -> dict[str, Any]:
    shape, n = c.shape, len(rf.slices)
    inductor = run.diff.get("inductor", {})
    cache = "hit" if inductor.get("fxgraph_cache_hit") else "miss" if inductor.get("fxgraph_cache_miss") else "n/a"
    return {
        "mod_settings": dict(s.mod.settings),
        "reference": rf.origin,
        "ref_slices": n,
        "pairs_compared": f"{shape.batch} batch x {shape.q_heads} q heads ({n} kv-head groups): all",
        "compiled_graphs": run.tally.graphs,
        "compiled_calls": run.tally.calls,
        "calls": run.calls,
        "compile_cache": cache,
        "tolerance": {t.name: t.bound for t in check.tensors},
        "rule": "module" if c.dtype in MODULE_RULE_DTYPES and rf.trusted is not None else "parity",
        "failed_checks": failed_checks(check),
        "closest": attn_reason(check) if check.ok else "",
        "dithered_slices": f"{rf.n_dithered}/{n}" if rf.n_dithered else None,
    }
