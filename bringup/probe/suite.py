"""probe: which training features does the device support? One case per feature, each run for real
on the device against a float64 cpu reference:

    dtype.bfloat16 / dtype.float16          tensors, elementwise, reduction and matmul in that dtype
    fp8.float8_e4m3fn / fp8.float8_e5m2      fp8 tensors (conversion round trip, bit-exact vs cpu)
    scaled_mm.float8_e4m3fn / .float8_e5m2   fp8 matmul with scales that do not cancel, each scale's
                                             effect checked (tensor-wise and row-wise scales)
    autocast.bfloat16 / autocast.float16     torch.autocast(device) casts a linear to that dtype
    sdpa.default / sdpa.<BACKEND>            scaled_dot_product_attention, and each SDPBackend forced
    compile.<backend>                        torch.compile(fullgraph=True) of a tiny function, run
                                             under the fallback detector (aot_eager, inductor and the
                                             device family's own backend: openxla on xla)
    execution.eager                          eager (ops run as issued) or lazy, measured: a dropped GEMM
                                             vs a kept one (probe/runtime.py)
    distributed.default / .dtensor / .fsdp2  2 local ranks with the device's own torch.distributed
                                             backend (its adapter's): an all_reduce, a DTensor matmul and
                                             sum, an FSDP2 training step, each vs float64
    torchao.float8_training / .mxfp8_training  TorchAO low-precision training through the real torchao
                                             package vs float64, with proof the conversion happened

Status: pass = supported; fallback = works, but only through the backend's CPU fallback;
unsupported = the device/library said so (the error line is kept); fail_numeric = runs but wrong;
fail_compile / silent_eager for compile; error = anything else (traceback kept). `unsupported`
comes only from errors that say "not implemented / not supported here" (bringup/checks/errors.py).
"""

from __future__ import annotations

import importlib.util
import math
import traceback
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from bringup.api import register_capability, specs
from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import chain, classify, first_line, is_unsupported
from bringup.checks.fallbacks import FallbackDetector, profiled_fallbacks
from bringup.checks.parity import parity, rel_rmse
from bringup.compile_backend import check_compile_backend
from bringup.console import case_table
from bringup.device import Device
from bringup.errors import BadInput, user_regex
from bringup.options import Options
from bringup.probe import args as face  # the torch-free face (cli)
from bringup.probe import section as probe_section
from bringup.probe.args import BUDGET_S, COMPILE_BUDGET_S, DEFAULT_COMPILE_BACKENDS, ProbeOptions

if TYPE_CHECKING:
    from rich.console import Console

ENTRY = "bringup.probe.suite:run_feature"
FP8 = ("float8_e4m3fn", "float8_e5m2")
# The aten op each forced SDPA backend runs; MATH runs none of them (it decomposes).
SDPA_OPS: dict[str, tuple[str, ...]] = {
    "FLASH_ATTENTION": ("aten::_scaled_dot_product_flash_attention",
                        "aten::_scaled_dot_product_flash_attention_for_cpu"),
    "EFFICIENT_ATTENTION": ("aten::_scaled_dot_product_efficient_attention",),
    "CUDNN_ATTENTION": ("aten::_scaled_dot_product_cudnn_attention",),
    "OVERRIDEABLE": ("aten::_scaled_dot_product_fused_attention_overrideable",),
}  # fmt: skip
# torchao low-precision training: only fp8-capable matmuls make sense; the error line says why not.
TORCHAO_FEATURES = ("float8_training", "mxfp8_training")


def _sdpa_backends() -> list[str]:
    try:
        from torch.nn.attention import SDPBackend
    except ImportError:
        return []
    return [n for n in SDPBackend.__members__ if n != "ERROR"]


def features(compile_backends: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(feature name, params) for every probe, in order."""
    out: list[tuple[str, dict[str, Any]]] = []
    out += [(f"dtype.{d}", {"kind": "dtype", "dtype": d}) for d in ("bfloat16", "float16")]
    out += [(f"fp8.{d}", {"kind": "fp8", "dtype": d}) for d in FP8]
    out += [(f"scaled_mm.{d}", {"kind": "scaled_mm", "dtype": d}) for d in FP8]
    out += [(f"autocast.{d}", {"kind": "autocast", "dtype": d}) for d in ("bfloat16", "float16")]
    out += [("sdpa.default", {"kind": "sdpa", "backend": None})]
    out += [(f"sdpa.{b}", {"kind": "sdpa", "backend": b}) for b in _sdpa_backends()]
    out += [(f"compile.{b}", {"kind": "compile", "backend": b}) for b in compile_backends]
    out += [("execution.eager", {"kind": "execution"})]
    out += [
        ("distributed.default", {"kind": "distributed"}),
        ("distributed.dtensor", {"kind": "dtensor"}),
        ("distributed.fsdp2", {"kind": "fsdp2"}),
    ]
    if importlib.util.find_spec("torchao") is not None:
        out += [(f"torchao.{f}", {"kind": "torchao", "feature": f}) for f in TORCHAO_FEATURES]
    return out


def _cases(feats: list[tuple[str, dict[str, Any]]], budget_s: float | None = None) -> list[Case]:
    cases = []
    for name, params in feats:
        params = {"feature": name, **params}
        budget = budget_s or (COMPILE_BUDGET_S if params["kind"] == "compile" else BUDGET_S)
        # a process group (or a compile cache) must not leak into the next case
        isolated = params["kind"] in ("distributed", "dtensor", "fsdp2", "torchao", "execution")
        cases.append(Case("probe", name, params, ENTRY, budget, isolated=isolated))
    return cases


def default_backends(device: Device) -> list[str]:
    """The compile backends probed by default: aot_eager, inductor and the device family's own."""
    out = DEFAULT_COMPILE_BACKENDS.split(",")
    return out + [device.default_compile_backend] if device.default_compile_backend not in out else out


def build_cases(options: Options, device: Device) -> list[Case]:
    opts = options.of(ProbeOptions)
    given = opts.compile_backends
    backends = [b.strip() for b in given.split(",") if b.strip()] if given is not None else default_backends(device)
    for b in backends:
        check_compile_backend(b, "torch.compile backend")
    feats = features(backends)
    if opts.filter:
        pat = user_regex(opts.filter, "--filter")
        feats = [f for f in feats if pat.search(f[0])]
        if not feats:
            raise BadInput(
                f"--filter {opts.filter!r} matches no feature; features: {', '.join(n for n, _ in features([]))}"
            )
    return _cases(feats, opts.case_budget)


def run_cases(device: Device, quick: bool) -> list[Case]:
    return _cases(features(default_backends(device)))


# ---- the probes (in the worker) --------------------------------------------------------------------
def _rand(*shape: int, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


def _rounded(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x as the device will hold it in `dtype`, back in float64 (so the reference is fair)."""
    return x.to(dtype).to(torch.float64)


def _judge(
    case: Case,
    got: dict[str, torch.Tensor],
    ref: dict[str, torch.Tensor],
    dtype: torch.dtype,
    baseline: dict[str, torch.Tensor] | None = None,
) -> CaseResult:
    rep = parity(got, ref, dtype, baseline=baseline)
    r = CaseResult.for_case(case, Status.PASS if rep.ok else Status.FAIL_NUMERIC, "" if rep.ok else rep.summary())
    r.metric("max_rel_err", rep.max_rel_err)
    return r


def probe_dtype(case: Case, dev: torch.device) -> CaseResult:
    dt = getattr(torch, case.params["dtype"])
    a, b = _rounded(_rand(64, 64, seed=1), dt), _rounded(_rand(64, 64, seed=2), dt)
    ref = {"add": a + b, "mul": a * b, "sum": a.sum(0), "matmul": a @ b}
    da, db = a.to(dev, dt), b.to(dev, dt)
    got = {"add": da + db, "mul": da * db, "sum": da.sum(0), "matmul": da @ db}
    return _judge(case, {k: v.cpu() for k, v in got.items()}, ref, dt)


def probe_fp8(case: Case, dev: torch.device) -> CaseResult:
    dt = getattr(torch, case.params["dtype"], None)
    if dt is None:
        return CaseResult.for_case(case, Status.UNSUPPORTED, f"torch {torch.__version__} has no {case.params['dtype']}")
    x = _rand(512, seed=3, scale=4.0).to(torch.float32)
    ref = x.to(dt).to(torch.float32)
    got = x.to(dev).to(dt)
    back = got.to(torch.float32).cpu()
    bad = int((back != ref).sum())  # conversions are exactly specified: bit-exact or wrong
    if got.dtype != dt or bad:
        return CaseResult.for_case(case, Status.FAIL_NUMERIC, f"{bad}/{x.numel()} values differ from cpu's conversion")
    return CaseResult.for_case(case, Status.PASS)


# (scale_a, scale_b) per call: products that differ from each other and from 1, and from the swapped
# pair's where it matters (row-wise), so a kernel that ignores a scale, uses one for both, or swaps them
# is off by >= 2x somewhere. Row-wise: scale_a one per row of A (m x 1), scale_b one per column of B.
SCALED_MM_TENSORWISE = ((0.5, 4.0), (0.5, 1.0), (1.0, 4.0), (3.0, 0.25))


def _scaled_mm_calls(m: int, n: int) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    calls = [(f"tensorwise a={a:g} b={b:g}", torch.tensor(a), torch.tensor(b)) for a, b in SCALED_MM_TENSORWISE]
    g = torch.Generator().manual_seed(6)
    ra = 0.25 + 2.0 * torch.rand(m, 1, generator=g)  # 0.25..2.25 per row: no two rows alike
    rb = 0.5 + 4.0 * torch.rand(1, n, generator=g)
    calls.append(("rowwise", ra, rb))
    return calls


def probe_scaled_mm(case: Case, dev: torch.device) -> CaseResult:
    fn = getattr(torch, "_scaled_mm", None)
    dt = getattr(torch, case.params["dtype"], None)
    if fn is None or dt is None:
        return CaseResult.for_case(case, Status.UNSUPPORTED, f"torch {torch.__version__} has no _scaled_mm / {dt}")
    # a in the probed format, b in e4m3 (e5m2 x e5m2 is not a supported pairing anywhere)
    m, k, n = 32, 64, 48  # multiples of 16, as fp8 GEMM libraries require
    fa = _rand(m, k, seed=4).to(dt)
    fb = _rand(n, k, seed=5).to(torch.float8_e4m3fn)
    prod = fa.to(torch.float64) @ fb.to(torch.float64).t()
    got: dict[str, torch.Tensor] = {}
    ref: dict[str, torch.Tensor] = {}
    base: dict[str, torch.Tensor] = {}
    skipped: list[str] = []
    da, db = fa.to(dev), fb.to(dev).t()
    for name, sa, sb in _scaled_mm_calls(m, n):
        try:
            out = fn(da, db, scale_a=sa.to(dev), scale_b=sb.to(dev), out_dtype=torch.bfloat16)
        except Exception as e:
            if name == "rowwise" and is_unsupported(e):
                skipped.append(f"row-wise scales: {first_line(e)}")
                continue
            raise
        got[name] = out.cpu()
        ref[name] = prod * sa.to(torch.float64) * sb.to(torch.float64)
        try:  # cpu's own _scaled_mm: the trusted run at this precision (bf16 output rounding)
            base[name] = fn(fa, fb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        except Exception:
            base[name] = ref[name].to(torch.bfloat16)
    r = _judge(case, got, ref, torch.bfloat16, baseline=base)
    r.fields["scaled_mm_calls"] = sorted(got)
    if skipped:
        r.fields["scaled_mm_skipped"] = skipped
        if r.status is Status.PASS:
            r.reason = "; ".join(skipped)[:300]
    return r


def probe_autocast(case: Case, dev: torch.device) -> CaseResult:
    dt = getattr(torch, case.params["dtype"])
    x, w = _rand(16, 32, seed=6), _rand(8, 32, seed=7)
    ref = _rounded(x, dt) @ _rounded(w, dt).t()
    with torch.autocast(dev.type, dtype=dt):
        y = torch.nn.functional.linear(x.to(dev, torch.float32), w.to(dev, torch.float32))
    if y.dtype != dt:
        return CaseResult.for_case(case, Status.UNSUPPORTED, f"autocast({dev.type}, {dt}) left linear in {y.dtype}")
    return _judge(case, {"linear": y.cpu()}, {"linear": ref}, dt)


def _sdpa_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


def probe_sdpa(case: Case, dev: torch.device) -> CaseResult:
    dt = torch.bfloat16
    q, k, v = (_rounded(_rand(2, 4, 64, 32, seed=s), dt) for s in (8, 9, 10))
    ref = _sdpa_ref(q, k, v)
    qd, kd, vd = (t.to(dev, dt) for t in (q, k, v))
    backend = case.params["backend"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if backend is None:
                out = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
            else:
                from torch.nn.attention import SDPBackend, sdpa_kernel

                with sdpa_kernel([getattr(SDPBackend, backend)]):
                    out = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
        except RuntimeError as e:
            why = [str(w.message).splitlines()[0] for w in caught if str(w.message).strip()]
            if is_unsupported(e):
                return CaseResult.for_case(
                    case, Status.UNSUPPORTED, (why[0] if why else first_line(e))[:300], error=first_line(e, 2000)
                )
            raise
    return _judge(case, {"out": out.cpu()}, {"out": ref}, dt)


def _tiny(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ y).sum(-1) + x.mean()


def probe_compile(case: Case, dev: torch.device, ctx: Any) -> CaseResult:
    from torch._dynamo.utils import counters

    backend = case.params["backend"]
    if backend == "inductor" and not ctx.device.has_inductor_codegen:
        return CaseResult.for_case(
            case,
            Status.UNSUPPORTED,
            f"inductor has no code generator for device type "
            f"{dev.type!r} (none registered with register_backend_for_device)",
        )
    x, y = _rand(16, 32, seed=11), _rand(32, 8, seed=12)
    ref = _tiny(x, y)
    torch._dynamo.reset()
    counters.clear()
    fn = torch.compile(_tiny, backend=backend, fullgraph=True)
    try:
        with ctx.phase("compile", budget_s=COMPILE_BUDGET_S - 30):
            got = fn(x.to(dev, torch.float32), y.to(dev, torch.float32))
    except Exception as e:
        return CaseResult.for_case(case, classify(e, compiling=True), _last_line(e), error=_tb(e))
    graphs = int(counters["stats"]["unique_graphs"])
    if graphs < 1:
        return CaseResult.for_case(case, Status.SILENT_EAGER, f"torch.compile(backend={backend!r}) compiled no graph")
    # the compiled function again, watched for the device's CPU fallback (the profiler alone: under a
    # dispatch mode dynamo would skip the frame): a graph whose ops run on the fallback (aot_eager on a
    # young backend) has not compiled for the device
    args = (x.to(dev, torch.float32), y.to(dev, torch.float32))
    out: list[torch.Tensor] = []
    fell = profiled_fallbacks(lambda: out.append(fn(*args)), ctx.device)
    got = out[-1]
    r = _judge(case, {"out": got.cpu()}, {"out": ref}, torch.float32, baseline={"out": _tiny(x.float(), y.float())})
    r.metric("graphs", graphs)
    r.fields["fallback_ops"] = sorted(fell or {})
    if int(counters["stats"]["unique_graphs"]) != graphs:
        r.status, r.reason = Status.SILENT_EAGER, "the compiled function recompiled when run again"
    elif r.status is Status.PASS and fell:
        top = ", ".join(f"{k} x{v}" for k, v in sorted(fell.items()))
        r.status, r.reason = Status.FALLBACK, f"the compiled graph ran ops on the CPU fallback: {top}"[:300]
    return r


def _torchao_model(dims: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(dims, dims, bias=False), torch.nn.ReLU(), torch.nn.Linear(dims, dims, bias=False)
    ).to(torch.bfloat16)


def _converted(model: torch.nn.Module) -> list[str]:
    """Linear layers whose class or weight class is no longer the plain one: proof a conversion happened."""
    out = []
    for name, mod in model.named_modules():
        if not isinstance(mod, torch.nn.Linear):
            continue
        w = getattr(mod, "weight", None)
        if type(mod) is not torch.nn.Linear or (w is not None and type(w) not in (torch.nn.Parameter, torch.Tensor)):
            out.append(f"{name}: {type(mod).__name__}({type(w).__name__})")
    return out


def _torchao_step(model: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    y = model(x)
    y.float().pow(2).mean().backward()
    res = {"out": y.detach().float().cpu()}
    res |= {f"grad.{n}": p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return res


def _torchao_convert(feature: str, model: torch.nn.Module) -> None:
    if feature == "float8_training":
        from torchao.float8 import convert_to_float8_training

        convert_to_float8_training(model)
    else:
        _convert_mxfp8(model)


def probe_torchao(case: Case, dev: torch.device) -> CaseResult:
    """torchao's low-precision training on the device, through the real package: the converted model's
    output and weight grads vs float64 (the same bf16 weights and input), bounded by how far the same
    conversion run on cpu is (the trusted run at this precision); the conversion must have happened."""
    feature = case.params["feature"]
    dims = 256  # fp8 / MX kernels need dims that are multiples of 16 / 32
    x = _rand(64, dims, seed=13).to(torch.bfloat16)
    model = _torchao_model(dims)
    ref_model = _torchao_model(dims).to(torch.float64)
    ref = _torchao_step(ref_model, x.to(torch.float64))
    model = model.to(dev)
    _torchao_convert(feature, model)
    converted = _converted(model)
    if not converted:
        return CaseResult.for_case(
            case,
            Status.FAIL_NUMERIC,
            f"torchao {feature}: no Linear was converted "
            "(module and weight types unchanged): nothing low-precision ran",
        )
    try:
        got = _torchao_step(model, x.to(dev))
    except Exception as e:
        if feature == "mxfp8_training" and not _has_triton() and any("triton" in str(c) for c in _chain(e)):
            # torchao's MXFP8 training kernels are triton kernels: none for this device / build
            return CaseResult.for_case(
                case,
                Status.UNSUPPORTED,
                f"torchao MXFP8 training runs triton kernels and triton is not available here ({_last_line(e)})",
                error=_tb(e),
            )
        raise
    errs = {k: rel_rmse(got[k], ref[k]) if k in got else math.inf for k in ref}
    worst = max(errs, key=lambda k: errs[k])
    if errs[worst] > FP8_GROSS or set(got) != set(ref):
        r = CaseResult.for_case(
            case,
            Status.FAIL_NUMERIC,
            f"{worst}: rel_rmse {errs[worst]:.3g} vs float64 (bound {FP8_GROSS:g}: fp8's own rounding stays under it)",
        )
    elif dev.type != "cpu" and (base := _torchao_cpu(feature, dims, x)) is not None:
        r = _judge(case, got, ref, torch.bfloat16, baseline=base)  # as far from float64 as cpu's run, x3
    else:  # cpu: this run is the trusted one; only the format's bound applies
        r = CaseResult.for_case(case, Status.PASS)
    r.fields["converted"] = converted
    r.metric("rel_rmse_vs_float64", errs[worst])
    return r


# fp8 rounding: e4m3 (forward) keeps 3 mantissa bits, e5m2 (grads) 2: a matmul of fp8-rounded operands
# lands ~4% (forward) / ~12% (weight grads) from float64; 25% (e5m2's eps) is a gross error.
FP8_GROSS = 0.25


def _torchao_cpu(feature: str, dims: int, x: torch.Tensor) -> dict[str, torch.Tensor] | None:
    """The same conversion and step on cpu: the trusted run at this precision (None if cpu can't)."""
    try:
        model = _torchao_model(dims)
        _torchao_convert(feature, model)
        return _torchao_step(model, x)
    except Exception:
        return None


def _convert_mxfp8(model: torch.nn.Module) -> None:
    """MXFP8 training with the device's real kernels (not the emulated recipe): torchao >= 0.15 has
    MXFP8TrainingOpConfig; older releases had MXLinearConfig."""
    from torchao.quantization import quantize_

    try:
        from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig

        quantize_(model, MXFP8TrainingOpConfig())
        return
    except ImportError:
        pass
    from torchao.prototype.mx_formats import MXLinearConfig

    quantize_(model, MXLinearConfig())


def _has_triton() -> bool:
    try:
        from torch.utils._triton import has_triton

        return bool(has_triton())
    except Exception:
        return False


def _chain(e: BaseException) -> list[BaseException]:
    return chain(e)


def _last_line(e: BaseException) -> str:
    """The most specific line: the innermost exception that says something."""
    chain = _chain(e)
    for c in reversed(chain):
        if str(c).strip():
            line = first_line(c)
            return line if c is chain[-1] else f"{type(chain[-1]).__name__} in {line}"[:300]
    return first_line(chain[-1])


def _tb(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))[-8000:]


_PROBES: dict[str, Callable[[Case, torch.device], CaseResult]] = {
    "dtype": probe_dtype,
    "fp8": probe_fp8,
    "scaled_mm": probe_scaled_mm,
    "autocast": probe_autocast,
    "sdpa": probe_sdpa,
    "torchao": probe_torchao,
}


def run_feature(case: Case, ctx: Any) -> CaseResult:
    dev: Device = ctx.device
    kind = case.params["kind"]
    fields = {"feature": case.params["feature"]}
    try:
        if kind == "compile":
            r = probe_compile(case, dev.torch_device, ctx)
            r.fields |= fields
            return r
        if kind in ("distributed", "dtensor", "fsdp2", "execution"):  # ranks are processes: no detector
            from bringup.probe import runtime as probe_runtime  # lazy: planning imports no torch.distributed

            if kind == "execution":
                r = probe_runtime.probe_execution(case, dev)
            else:
                r = probe_runtime.probe_distributed(case, dev, tuple(getattr(ctx, "imports", ())))
            r.fields |= fields
            return r
        with FallbackDetector(dev) as det:
            r = _PROBES[kind](case, dev.torch_device)
    except ImportError as e:
        return CaseResult.for_case(case, Status.UNSUPPORTED, first_line(e), error=_tb(e), fields=fields)
    except Exception as e:
        return CaseResult.for_case(case, classify(e), _last_line(e), error=_tb(e), fields=fields)
    rep = det.report()
    r.fields |= fields | {"fallback_ops": sorted(rep.fallback_ops)}
    if kind == "sdpa" and r.status in (Status.PASS, Status.FALLBACK):
        r = _check_sdpa_backend(case, r, set(rep.ops))
    if r.status is Status.PASS and rep.fallback_ops:
        r.status, r.reason = Status.FALLBACK, rep.summary()
    return r


def _check_sdpa_backend(case: Case, r: CaseResult, ran: set[str]) -> CaseResult:
    """(An sdpa case.) A forced backend must have run its own kernel: some devices ignore sdpa_kernel() and take
    the math path, which would make every backend look supported."""
    backend = case.params.get("backend")
    if backend is None:
        return r
    fused = {op for ops in SDPA_OPS.values() for op in ops}
    used = sorted(ran & fused)
    r.fields["sdpa_kernels"] = used
    expected = SDPA_OPS.get(backend)
    if (expected is not None and not ran & set(expected)) or (backend == "MATH" and used):
        what = ", ".join(used) or "the math path"
        r.status, r.reason = Status.UNSUPPORTED, f"sdpa_kernel({backend}) ran {what}: the backend was not used"
    return r


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    console.print(case_table("probe", results, ["max_rel_err"]))
    if importlib.util.find_spec("torchao") is None:
        console.print("torchao is not installed: float8 / MXFP8 training were not probed")
    supported = {r.name: r.status.value for r in results}
    return {"features": supported}


register_capability(
    face,
    build_cases,
    run_cases,
    summarize,
    title="Feature probe",
    section=probe_section.render,
    scorecard=probe_section.scorecard,
    verdict_word="supported",
    metrics=specs("max_rel_err", "graphs", "rel_rmse"),
)
