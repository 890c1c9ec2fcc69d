"""ops: op coverage of the device from PyTorch's own OpInfo database.

For each OpInfo in `torch.testing._internal.common_methods_invocations.op_db` (needs `expecttest`) and
each dtype, one case: the first N reference inputs (sample inputs first, then
extremal ones) run on cpu (the reference) and on the device, under
the fallback detector, as PyTorch's `test_compare_cpu` does. Per (op, dtype):

    pass          every sample matched cpu, natively
    fallback      matched cpu, but some of the op's work ran only through the backend's CPU fallback
    fail_numeric  a result differs from cpu beyond the tolerance below (or in dtype / shape)
    unsupported   the device raised NotImplementedError or "not implemented for ..." (a gap)
    crash         the device raised anything else where cpu did not, or the worker died (signal named)
    ref_fail      cpu itself could not run the op in that dtype: says nothing about the device

Cases reuse warm worker processes (op_db is imported once per worker), each with its own budget.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from bringup.api import Suite, register_suite, specs
from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.device import Device
from bringup.errors import BadInput, user_regex
from bringup.ops import section as ops_section
from bringup.ops.args import (  # the torch-free face (cli)
    DEFAULT_BUDGET_S,
    DEFAULT_DTYPES,
    DEFAULT_SAMPLES,
    HELP,
    ORDER,
    add_arguments,
)

ENTRY = "bringup.ops.suite:run_op"
# `bringup run --quick`: a handful of everyday ops, float32, 2 samples each (~1 min on 2 cpu cores).
QUICK_OPS = (
    "add", "mul", "div.no_rounding_mode", "matmul", "sin", "exp", "sum", "mean", "softmax",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.layer_norm", "cat", "index_select",
)  # fmt: skip
QUICK_SAMPLES = 2


# The rule (per floating output tensor; docs/ops.md). Three results of the same sample: `got` (the
# device, in the dtype), `ref` (cpu, same dtype: a trusted run at the same precision) and `ref64` (cpu
# on the same inputs upcast to float64). Per element, e_dev = |got - ref64|, e_cpu = |ref - ref64|,
# u = the dtype's ulp at |ref64|:
#   e_dev <= M x max(e_cpu, floor) + K x u
# where floor = 0 when cpu is within 1 ulp everywhere (a pointwise-like op: each element has its own
# error scale, so an output near zero keeps its own few-ulp bound), else the largest e_cpu of the
# tensor (reductions / matmuls with cancellation: the error scale is set by the inputs, not by the
# output element, and another summation order moves it to other elements). And per tensor (real
# dtypes), the systematic part, which per-element bounds cannot see when 1% is ~1-3 bf16 ulps:
#   |bias(got) - bias(ref)| or |bias(got)| <= B x eps + 4 x its standard error,
#   bias(x) = <x - ref64, ref64> / <ref64, ref64>
# No float64 result (float64 inputs, ops without float64 on cpu): got vs ref, |got - ref| <=
# K x u + M x SAME_DTYPE_FLOOR x eps x RMS(ref) (the reduction-order noise of a different algorithm).
@dataclass(frozen=True)
class OpTolerance:
    ulps: float  # K: a device's own rounding / algorithm, in ulps of the dtype at |ref64|
    multiplier: float  # M: the device may be this many times as far from float64 as cpu is
    bias_eps: float  # B: systematic error allowed beyond cpu's, in eps of the dtype
    reason: str


TOLERANCES: dict[torch.dtype, OpTolerance] = {
    torch.float32: OpTolerance(
        16, 2.0, 1.0,
        "fp32 eps 1.2e-7: device math libraries are 1-4 ulps off correctly rounded (CUDA's expf 2, "
        "tanhf 2, erfinvf 5), another summation order a few more; 16 ulps (2e-6 relative) keeps that and "
        "still catches a 1e-5 error, let alone 1%.",
    ),
    torch.float16: OpTolerance(
        2, 2.0, 0.5,
        "fp16 eps 9.8e-4: devices compute 16-bit ops in fp32 and round once (<= 0.5 ulp + fp32 noise), "
        "or round a few intermediate steps (decompositions): 2 ulps per element; a 1% error is ~10 ulps.",
    ),
    torch.bfloat16: OpTolerance(
        2, 2.0, 0.5,
        "bf16 eps 7.8e-3 (ulp 0.4-0.8% of the value): 2 ulps per element as fp16; a 1% error is 1.3-2.6 "
        "ulps, so it is caught by its direction: |bias| beyond cpu's by eps/2 (0.39%) + 4 standard errors.",
    ),
}  # fmt: skip
TOLERANCES[torch.complex64] = TOLERANCES[torch.float32]
TOLERANCES[torch.complex32] = TOLERANCES[torch.float16]
SAME_DTYPE_FLOOR = 64.0  # no float64 result: tensor-wide allowance, in eps x RMS(ref)
# float64 and complex128 have no higher-precision reference here: judged against cpu alone.
TOLERANCES[torch.float64] = OpTolerance(16, 2.0, 1.0, "float64: no higher precision to compare with")
TOLERANCES[torch.complex128] = TOLERANCES[torch.float64]
_UPCAST = {torch.float32: torch.float64, torch.float16: torch.float64, torch.bfloat16: torch.float64,
           torch.complex64: torch.complex128, torch.complex32: torch.complex128}  # fmt: skip
# Worst first: the case's status is the worst of its samples'.
_SEVERITY = (Status.CRASH, Status.OOM, Status.FAIL_NUMERIC, Status.UNSUPPORTED, Status.FALLBACK, Status.PASS)


# ---- planning (no device work) -------------------------------------------------------------------
def parse_dtypes(text: str) -> list[str]:
    """'float32,bf16,int64' -> canonical torch names; BadInput for anything else."""
    from bringup.device import parse_dtype

    out: list[str] = []
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        try:
            dt = parse_dtype(name)
        except BadInput:
            dt = getattr(torch, name.lower(), None)
            if not isinstance(dt, torch.dtype):
                raise BadInput(
                    f"unknown dtype {name!r} in --dtypes; e.g. float32, bfloat16, float16, int64, bool"
                ) from None
        canon = str(dt).removeprefix("torch.")
        if canon not in out:
            out.append(canon)
    if not out:
        raise BadInput("--dtypes is empty")
    return out


@cache
def op_db() -> tuple[Any, ...]:
    """PyTorch's OpInfo list. Importing it has side effects we undo: it parses sys.argv (given a
    clean one) and freezes torch.backends flags (unfrozen again, so later cases can set them)."""
    argv = sys.argv
    sys.argv = argv[:1]
    try:
        from torch.testing._internal.common_methods_invocations import op_db as db
    except ImportError as e:
        raise BadInput(f"bringup ops needs PyTorch's OpInfo database, which needs the expecttest package: {e}") from e
    finally:
        sys.argv = argv
        setattr(torch.backends, "__allow_nonbracketed_mutation_flag", True)
    return tuple(db)


def op_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else str(op.name)


def find_op(name: str) -> Any:
    for op in op_db():
        if op_name(op) == name:
            return op
    raise KeyError(name)


def _cases(names: Iterable[str], dtypes: list[str], samples: int, budget: float) -> list[Case]:
    cases = []
    for name in names:
        for dt in dtypes:
            params = {"op": name, "dtype": dt, "samples": samples}
            cases.append(Case("ops", f"{name}:{dt}", params, ENTRY, budget))
    return cases


def build_cases(args: argparse.Namespace, device: Device) -> list[Case]:
    if args.samples <= 0:
        raise BadInput(f"--samples must be a positive integer, got {args.samples}")
    if not args.budget > 0:
        raise BadInput(f"--budget must be positive, got {args.budget:g}")
    dtypes = parse_dtypes(args.dtypes)
    pattern = None if args.filter is None else user_regex(args.filter, "--filter")
    names = [op_name(op) for op in op_db()]
    if pattern is not None:
        names = [n for n in names if pattern.search(n)]
        if not names:
            raise BadInput(f"--filter {args.filter!r} matches no OpInfo (of {len(op_db())}); e.g. '^(add|sin)$'")
    return _cases(names, dtypes, args.samples, args.budget)


def run_cases(device: Device, quick: bool) -> list[Case]:
    if quick:
        return _cases(QUICK_OPS, ["float32"], QUICK_SAMPLES, DEFAULT_BUDGET_S)
    return _cases([op_name(op) for op in op_db()], parse_dtypes(DEFAULT_DTYPES), DEFAULT_SAMPLES, DEFAULT_BUDGET_S)


# ---- the case (in the worker) ----------------------------------------------------------------------
def _same_layout(t: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """`t` on `dev` with its whole storage, strides and offset: a view keeps seeing the same memory
    (as_strided on a partial view, non-contiguous inputs), as it does on cpu."""
    if t.layout != torch.strided or t.is_conj() or t.is_neg() or t.device == dev:
        return t.to(dev)
    n = t.untyped_storage().nbytes() // max(1, t.element_size())
    if n == 0:
        return t.to(dev)
    base = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,)).to(dev)
    return base.as_strided(t.size(), t.stride(), t.storage_offset())


def _tensor_devices(sample: Any) -> list[str]:
    """Device types of a sample's tensors, in SampleInput.transform's traversal order."""
    seen: list[str] = []

    def note(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            seen.append(t.device.type)
        return t

    sample.transform(note)
    return seen


def device_masks(op: Any, dtype: torch.dtype, n: int) -> list[list[bool] | None]:
    """Which tensors of each sample belong on the device under test. OpInfo sample functions put
    most tensors on the device they are given, but keep some on cpu on purpose (tensor_split's
    indices, ...): generating the same samples for the 'meta' device tells them apart. None for a
    sample where that is not possible (then every tensor moves)."""
    try:
        torch.manual_seed(0)
        metas = list(itertools.islice(op.reference_inputs("meta", dtype, requires_grad=False), n))
    except Exception:
        return [None] * n
    return [[d == "meta" for d in _tensor_devices(s)] for s in metas] + [None] * (n - len(metas))


def _to(sample: Any, dev: torch.device, mask: list[bool] | None = None) -> Any:
    """The sample with its tensors on `dev` (those `mask` says; all when None), and a `device=`
    kwarg of factory ops pointed there."""
    count = len(_tensor_devices(sample))
    use = mask if mask is not None and len(mask) == count else [True] * count
    it = iter(use)

    def move(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            return _same_layout(t, dev) if next(it) else t
        return t

    moved = sample.transform(move)
    if "device" in moved.kwargs:
        moved.kwargs = {**moved.kwargs, "device": dev}
    return moved


def _call(op: Any, sample: Any) -> Any:
    return sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))


def _run_seeded(op: Any, sample: Any, seed: int) -> Any:
    torch.manual_seed(seed)
    return _call(op, sample)


def ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of `dtype` at |x| (float64 tensor; subnormal spacing below the smallest normal)."""
    fi = torch.finfo(dtype)
    mag = x.abs().to(torch.float64).clamp_min(fi.tiny)
    return torch.exp2(torch.floor(torch.log2(mag))) * fi.eps


def _dense(t: torch.Tensor) -> torch.Tensor:
    return t if t.layout == torch.strided else t.to_dense()


class Uncomparable(Exception):
    """An output that cannot be compared (a layout that will not densify): `unsupported`, never `pass`."""


def judge_tensor(got: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor | None) -> str:
    """'' when the device result `got` is within the rule (module TOLERANCES) of float64 `ref64`
    given how far cpu's `ref` (same dtype) is; else why not. Same dtype and shape already checked."""
    dtype = ref.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        if torch.equal(got, ref):
            return ""
        bad = int((got != ref).sum())
        return f"{bad}/{ref.numel()} values differ from cpu (exact dtype {dtype})"
    tol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    real = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}.get(
        dtype, dtype
    )
    g = got.to(torch.complex128 if dtype.is_complex else torch.float64).flatten()
    c = ref.to(g.dtype).flatten()
    r = ref64.to(g.dtype).flatten() if ref64 is not None else c
    # NaN / inf: where cpu (same dtype) or float64 has them, with the same value (an overflow or a NaN
    # at this precision is cpu's too; a device that stays finite where float64 is finite is fine)
    bad_g = ~torch.isfinite(g)
    same = (g == c) | (torch.isnan(g) & torch.isnan(c)) | (g == r) | (torch.isnan(g) & torch.isnan(r))
    if bool((bad_g & ~same).any()):
        return (f"NaN/inf where cpu and float64 have none or others ({int(bad_g.sum())} non-finite vs cpu "
                f"{int((~torch.isfinite(c)).sum())})")  # fmt: skip
    lost = torch.isfinite(g) & ~torch.isfinite(c) & ~torch.isfinite(r)
    if bool(lost.any()):
        return f"{int(lost.sum())} finite value(s) where cpu and float64 give NaN/inf"
    keep = torch.isfinite(g) & torch.isfinite(c) & torch.isfinite(r)
    g, c, r = g[keep], c[keep], r[keep]
    if not g.numel():
        return ""
    u = ulp(r.abs(), real)
    e_dev = (g - r).abs()
    if ref64 is not None:
        e_cpu = (c - r).abs()
        floor = 0.0 if bool((e_cpu <= u).all()) else float(e_cpu.max())
        allowed = tol.multiplier * e_cpu.clamp_min(floor) + tol.ulps * u
    else:
        rms = float(c.abs().pow(2).mean().sqrt())
        allowed = tol.ulps * u + tol.multiplier * SAME_DTYPE_FLOOR * torch.finfo(real).eps * rms
    over = e_dev > allowed
    if bool(over.any()):
        i = int(torch.argmax(e_dev - allowed))
        what = "float64" if ref64 is not None else "cpu"
        val = complex if dtype.is_complex else float
        return (
            f"{int(over.sum())}/{g.numel()} values off: e.g. {val(g[i]):.6g} vs {what} {val(r[i]):.6g} "
            f"(error {float(e_dev[i]):.3g}, allowed {float(allowed[i]):.3g} = {tol.multiplier:g} x cpu's error "
            f"+ {tol.ulps:g} ulps)"
        )
    if ref64 is None or dtype.is_complex or g.numel() < 2:
        return ""
    rr = float(torch.dot(r, r))
    if rr == 0.0:
        return ""
    b_dev, b_cpu = float(torch.dot(g - r, r)) / rr, float(torch.dot(c - r, r)) / rr
    # standard error of the difference of two projections of independent per-element noise: cpu's
    # (its measured error) and the device's (at least a correct rounding: variance ulp^2 / 12)
    # (one-sided like checks/parity: a device less biased than cpu, e.g. more accurate, is never flagged)
    var = (c - r) ** 2 + u * u / 12
    se = math.sqrt(float(torch.dot(r * r, var))) / rr
    bound = tol.bias_eps * torch.finfo(real).eps + 4.0 * se
    if abs(b_dev - b_cpu) > bound and abs(b_dev) > bound:
        return (
            f"systematic error {b_dev:+.3g} of the value (cpu {b_cpu:+.3g}; allowed {bound:.3g} = "
            f"{tol.bias_eps:g} eps + 4 standard errors) over {g.numel()} values"
        )
    return ""


def compare(got: Any, ref: Any, ref64: Any = None, structure_only: bool = False) -> str:
    """'' when `got` (device) matches `ref` (cpu, same dtype) and float64 `ref64` (None: no float64
    result) by the rule above, else why not (one line). Raises Uncomparable for an output layout that
    cannot be densified."""
    g_leaves, g_spec = tree_flatten(got)
    r_leaves, r_spec = tree_flatten(ref)
    if g_spec != r_spec:
        return f"output structure differs: {g_spec} vs {r_spec}"
    r64_leaves: list[Any] = [None] * len(r_leaves)
    if ref64 is not None:
        l64, s64 = tree_flatten(ref64)
        if s64 == r_spec:
            r64_leaves = l64
    for i, (g, r, r64) in enumerate(zip(g_leaves, r_leaves, r64_leaves, strict=True)):
        where = f"output {i}: " if len(r_leaves) > 1 else ""
        if isinstance(r, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return f"{where}expected a tensor, got {type(g).__name__}"
            if g.layout != r.layout:
                return f"{where}layout {g.layout} != cpu {r.layout}"
            try:
                g, r = _dense(g.detach().cpu()), _dense(r.detach())
            except Exception as e:
                raise Uncomparable(f"{where}output layout {r.layout} cannot be compared: {first_line(e)}") from e
            if g.dtype != r.dtype or g.shape != r.shape:
                return f"{where}{g.dtype} {tuple(g.shape)} != cpu {r.dtype} {tuple(r.shape)}"
            if structure_only:
                continue
            t64 = None
            if isinstance(r64, torch.Tensor) and r64.dtype == _UPCAST.get(r.dtype) and r64.shape == r.shape:
                try:
                    t64 = _dense(r64.detach())
                except Exception:
                    t64 = None
            why = judge_tensor(g, r, t64)
            if why:
                return where + why[:300]
        elif not structure_only and g != r and not (isinstance(r, float) and r != r and g != g):
            if isinstance(r, float) and isinstance(g, float):
                r64v = r64 if isinstance(r64, float) else None
                why = judge_tensor(torch.tensor([g]), torch.tensor([r]), None if r64v is None else torch.tensor([r64v]))
                if not why:
                    continue
            return f"{where}{g!r} != cpu {r!r}"
    return ""


def _upcast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`t` (cpu) in float64 with its storage layout kept (views stay views of the whole storage)."""
    if t.layout != torch.strided or t.is_conj() or t.is_neg():
        return t.to(dtype)
    n = t.untyped_storage().nbytes() // max(1, t.element_size())
    if n == 0:
        return t.to(dtype)
    base = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,)).to(dtype)
    return base.as_strided(t.size(), t.stride(), t.storage_offset())


def _run_float64(op: Any, sample: Any, dtype: torch.dtype) -> Any:
    """The op on the sample's `dtype` tensors upcast to float64 (complex128), on cpu; None if that
    does not run (the op has no float64 kernel, mixed-dtype rules)."""
    up = _UPCAST.get(dtype)
    if up is None:
        return None

    def cast(t: Any) -> Any:
        return _upcast(t, up) if isinstance(t, torch.Tensor) and t.dtype == dtype else t

    try:
        return _run_seeded(op, sample.transform(cast), 0)
    except Exception:
        return None


def _is_random(op: Any, sample: Any, ref: Any) -> bool:
    """An op whose cpu result changes with the seed (bernoulli, dropout, randn_like, ...), or whose
    output OpInfo declares nondeterministic (empty_like, ...): only its structure can be compared."""
    if getattr(op, "has_nondeterministic_output", False):
        return True
    try:
        again = _run_seeded(op, sample, 1)
    except Exception:
        return False
    return not _identical(again, ref)


def _identical(a: Any, b: Any) -> bool:
    la, sa = tree_flatten(a)
    lb, sb = tree_flatten(b)
    if sa != sb:
        return False
    for x, y in zip(la, lb, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            try:
                x, y = _dense(x.detach()), _dense(y.detach())
            except Exception:
                return False
            if x.dtype != y.dtype or x.shape != y.shape:
                return False
            if x.is_complex() or x.is_floating_point():
                wide = torch.complex128 if x.is_complex() else torch.float64
                x, y = x.to(wide), y.to(wide)
            if not torch.equal(x.isnan(), y.isnan()):
                return False
            if not torch.equal(x[~x.isnan()], y[~y.isnan()]):
                return False
        elif x != y and not (x != x and y != y):
            return False
    return True


def run_op(case: Case, ctx: Any) -> CaseResult:
    from bringup.checks.fallbacks import FallbackDetector

    name, dtype_s, n = case.params["op"], case.params["dtype"], int(case.params["samples"])
    dtype = getattr(torch, dtype_s)
    dev: Device = ctx.device
    try:
        op = find_op(name)
    except KeyError:
        return CaseResult.for_case(case, Status.REF_FAIL, f"no OpInfo named {name!r} in this torch")
    fields: dict[str, Any] = {"op": name, "dtype": dtype_s}
    if dtype not in op.supported_dtypes("cpu"):
        return CaseResult.for_case(case, Status.REF_FAIL, f"OpInfo {name} does not support {dtype_s} on cpu",
                                   fields=fields)  # fmt: skip
    torch.manual_seed(0)
    try:
        samples = list(itertools.islice(op.reference_inputs("cpu", dtype, requires_grad=False), n))
    except Exception as e:
        return CaseResult.for_case(case, Status.REF_FAIL, f"cpu sample inputs: {first_line(e)}", fields=fields)
    # cpu reference for each sample; samples cpu can't run are dropped (counted)
    refs: list[tuple[int, Any, Any, bool]] = []
    refs64: dict[int, Any] = {}
    ref_errors: list[str] = []
    for i, s in enumerate(samples):
        try:
            ref = _run_seeded(op, s, 0)
        except Exception as e:
            ref_errors.append(f"sample {i}: {first_line(e)}")
            continue
        rnd = _is_random(op, s, ref)
        refs.append((i, s, ref, rnd))
        if not rnd:
            refs64[i] = _run_float64(op, s, dtype)
    fields |= {"samples_run": len(refs), "samples_ref_fail": len(ref_errors)}
    if not refs:
        why = ref_errors[0] if ref_errors else "OpInfo produced no sample inputs"
        return CaseResult.for_case(case, Status.REF_FAIL, f"cpu reference failed: {why}", fields=fields)

    masks = device_masks(op, dtype, len(samples))
    moved = [(i, _to(s, dev.torch_device, masks[i]), ref, rnd) for i, s, ref, rnd in refs]
    outcomes: list[tuple[int, Status, str]] = []
    outs: list[tuple[int, Any, Any, bool]] = []
    with FallbackDetector(dev) as det:
        for i, s, ref, rnd in moved:
            try:
                got = _run_seeded(op, s, 0)
            except Exception as e:
                st = classify(e)
                outcomes.append((i, st if st in (Status.UNSUPPORTED, Status.OOM) else Status.CRASH,
                                 f"sample {i}: {first_line(e)}"))  # fmt: skip
                continue
            outs.append((i, got, ref, rnd))
    rep = det.report()
    for i, got, ref, rnd in outs:
        try:
            why = compare(got, ref, refs64.get(i), structure_only=rnd)
        except Uncomparable as e:
            outcomes.append((i, Status.UNSUPPORTED, f"sample {i}: {e}"))
            continue
        outcomes.append((i, Status.FAIL_NUMERIC, f"sample {i}: {why}") if why else (i, Status.PASS, ""))
    fell_back = sorted(rep.fallback_ops)
    fields |= {
        "random": any(r for *_, r in refs),
        "float64_reference": sum(v is not None for v in refs64.values()),
        "fallback_ops": fell_back,
        "native_ops": rep.native_ops,
        # the backend's own count (xla: torch_xla.debug.metrics), host reads out; None: it keeps none
        "backend_fallbacks": rep.backend_fallbacks,
        "bytes_to_host": sum(s.bytes_to_host for s in rep.ops.values()),
        "bytes_to_device": sum(s.bytes_to_device for s in rep.ops.values()),
    }
    worst = min(outcomes, key=lambda o: _SEVERITY.index(o[1]))
    status, reason = worst[1], worst[2]
    if status is Status.PASS and fell_back:
        status, reason = Status.FALLBACK, rep.summary()
    r = CaseResult.for_case(case, status, reason, fields=fields)
    r.metric("samples", len(refs))
    r.metric("fallback_calls", rep.fallback_calls)
    return r


# ---- summary --------------------------------------------------------------------------------------
def summarize(results: list[CaseResult], console: Any) -> dict[str, Any]:
    from rich.markup import escape
    from rich.table import Table

    from bringup.console import STATUS_STYLE, styled

    dtypes: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    reasons: dict[str, str] = {}
    kernels: Counter[str] = Counter()
    for r in results:
        op, dt = r.params.get("op", r.name), r.params.get("dtype", "")
        if dt not in dtypes:
            dtypes.append(dt)
        matrix.setdefault(op, {})[dt] = r.status.value
        if r.status is not Status.PASS and r.reason and op not in reasons:
            reasons[op] = r.reason
        for k in r.fields.get("fallback_ops", []) or []:
            kernels[k] += 1
    by_dtype = {dt: dict(Counter(row[dt] for row in matrix.values() if dt in row)) for dt in dtypes}
    shown = [op for op in matrix if len(matrix) <= 40 or any(s != "pass" for s in matrix[op].values())]
    t = Table(title=f"ops: {len(matrix)} OpInfos x {len(dtypes)} dtype(s)", title_justify="left")
    t.add_column("op")
    for dt in dtypes:
        t.add_column(dt)
    t.add_column("first problem", overflow="fold", max_width=70)
    limit = 80
    for op in shown[:limit]:
        cells = [styled(Status(matrix[op][dt])) if dt in matrix[op] else "-" for dt in dtypes]
        t.add_row(op, *cells, escape(reasons.get(op, "")))
    console.print(t)
    if len(shown) > limit:
        console.print(f"... {len(shown) - limit} more op(s) with a non-pass status: see the JSON")
    for dt in dtypes:
        counts = by_dtype[dt]
        parts = ", ".join(f"[{STATUS_STYLE.get(Status(s), 'red')}]{n} {s}[/]" for s, n in sorted(counts.items()))
        considered = sum(n for s, n in counts.items() if s != Status.REF_FAIL.value)
        rate = f" -> {counts.get('pass', 0) / considered:.0%} pass natively" if considered else ""
        console.print(f"{dt}: {parts}{rate} (ref_fail excluded)")
    if kernels:
        top = ", ".join(f"{k} ({n})" for k, n in kernels.most_common(10))
        console.print(f"most common CPU fallbacks (cases): {escape(top)}")
    return {
        "by_dtype": by_dtype,
        "matrix": matrix,
        "fallback_ops": dict(kernels.most_common()),
    }


def scorecard(results: list[CaseResult]) -> list[tuple[str, str]]:
    """Op coverage in one line: how many (op, dtype) cases ran natively, through the fallback, not at all."""
    c = Counter(r.status.value for r in results if r.status is not Status.REF_FAIL)
    if not c:
        return []
    text = ", ".join(f"{n} {s}" for s, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
    fell = sorted({op for r in results for op in (r.fields.get("fallback_ops") or [])})
    return [("ops (OpInfo cases)", text + (f"; fallback ops: {', '.join(fell[:4])}" if fell else ""))]


register_suite(
    Suite(
        name="ops",
        help=HELP,
        add_arguments=add_arguments,
        build_cases=build_cases,
        run_cases=run_cases,
        summarize=summarize,
        order=ORDER,
        title="Op coverage",
        section=ops_section.render,
        scorecard=scorecard,
        metrics=specs("samples", "fallback_calls", "max_abs_err"),
    )
)
