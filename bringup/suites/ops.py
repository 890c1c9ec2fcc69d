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
import sys
from collections import Counter
from collections.abc import Iterable
from functools import cache
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.device import Device
from bringup.errors import BadInput, user_regex

HELP = "OpInfo op coverage: every op x dtype on the device vs cpu (pass/fallback/fail_numeric/unsupported)"

ENTRY = "bringup.suites.ops:run_op"
DEFAULT_DTYPES = "float32,bfloat16"
DEFAULT_SAMPLES = 4
DEFAULT_BUDGET_S = 120.0
# `bringup run --quick`: a handful of everyday ops, float32, 2 samples each (~1 min on 2 cpu cores).
QUICK_OPS = (
    "add", "mul", "div.no_rounding_mode", "matmul", "sin", "exp", "sum", "mean", "softmax",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.layer_norm", "cat", "index_select",
)  # fmt: skip
QUICK_SAMPLES = 2

# Device result vs cpu result, same dtype: (rtol, atol). PyTorch's test_compare_cpu (test/test_ops.py)
# holds CUDA to cpu with atol=rtol=1e-3 (device math libraries use other algorithms and fast
# approximations); we use that for 32/64-bit floats. In 16-bit floats a device may legitimately take
# another algorithm (on a PrivateUse1 device PyTorch runs layer_norm / group_norm as decompositions
# that round every step to bf16, where cpu has fused fp32-accumulating kernels): ~2-3 ulps on outputs
# of magnitude ~1 is that noise, so bf16 gets assert_close's rtol (1.6e-2) and atol 1e-2, fp16
# 2e-3 / 3e-3 (~3 fp16 ulps). More than that is reported (group_norm's bf16 decomposition loses
# 1.3e-2 near zero after cancellation: a real accuracy gap of that path). Ints and bools: exact.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-3, 1e-3),
    torch.float32: (1e-3, 1e-3),
    torch.complex128: (1e-3, 1e-3),
    torch.complex64: (1e-3, 1e-3),
    torch.float16: (2e-3, 3e-3),
    torch.complex32: (2e-3, 3e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
# Worst first: the case's status is the worst of its samples'.
_SEVERITY = (Status.CRASH, Status.OOM, Status.FAIL_NUMERIC, Status.UNSUPPORTED, Status.FALLBACK, Status.PASS)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--filter", default=None, metavar="REGEX",
                   help="only OpInfos whose name (with variant, e.g. div.floor_rounding) matches REGEX "
                   "(re.search; anchor with ^...$)")  # fmt: skip
    p.add_argument("--dtypes", default=DEFAULT_DTYPES, help=f"comma list of dtypes (default {DEFAULT_DTYPES})")
    p.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                   help=f"inputs per (op, dtype) from OpInfo reference_inputs (default {DEFAULT_SAMPLES})")  # fmt: skip
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                   help=f"wall budget per (op, dtype) case, seconds (default {DEFAULT_BUDGET_S:g})")  # fmt: skip


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


def compare(got: Any, ref: Any, structure_only: bool = False) -> str:
    """'' when `got` (device) matches `ref` (cpu), else why not (one line)."""
    g_leaves, g_spec = tree_flatten(got)
    r_leaves, r_spec = tree_flatten(ref)
    if g_spec != r_spec:
        return f"output structure differs: {g_spec} vs {r_spec}"
    for i, (g, r) in enumerate(zip(g_leaves, r_leaves, strict=True)):
        where = f"output {i}: " if len(r_leaves) > 1 else ""
        if isinstance(r, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return f"{where}expected a tensor, got {type(g).__name__}"
            if r.layout != torch.strided or g.layout != torch.strided:
                continue  # sparse / other layouts: not compared
            g = g.detach().cpu()
            r = r.detach()
            if g.dtype != r.dtype or g.shape != r.shape:
                return f"{where}{g.dtype} {tuple(g.shape)} != cpu {r.dtype} {tuple(r.shape)}"
            if structure_only:
                continue
            rtol, atol = TOLERANCES.get(r.dtype, (0.0, 0.0))
            try:
                torch.testing.assert_close(g, r, rtol=rtol, atol=atol, equal_nan=True, check_device=False,
                                           check_stride=False)  # fmt: skip
            except AssertionError as e:
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                return where + "; ".join(lines[:3])[:300]
        elif not structure_only and g != r and not (isinstance(r, float) and r != r and g != g):
            if isinstance(r, float) and isinstance(g, float):
                rtol, atol = TOLERANCES[torch.float64]
                if abs(g - r) <= atol + rtol * abs(r):
                    continue
            return f"{where}{g!r} != cpu {r!r}"
    return ""


def _is_random(op: Any, sample: Any, ref: Any) -> bool:
    """An op whose cpu result changes with the seed (bernoulli, dropout, randn_like, ...), or whose
    output OpInfo declares nondeterministic (empty_like, ...): only its structure can be compared."""
    if getattr(op, "has_nondeterministic_output", False):
        return True
    try:
        again = _run_seeded(op, sample, 1)
    except Exception:
        return False
    return bool(compare(again, ref))


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
    ref_errors: list[str] = []
    for i, s in enumerate(samples):
        try:
            ref = _run_seeded(op, s, 0)
        except Exception as e:
            ref_errors.append(f"sample {i}: {first_line(e)}")
            continue
        refs.append((i, s, ref, _is_random(op, s, ref)))
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
        why = compare(got, ref, structure_only=rnd)
        outcomes.append((i, Status.FAIL_NUMERIC, f"sample {i}: {why}") if why else (i, Status.PASS, ""))
    fell_back = sorted(rep.fallback_ops)
    fields |= {
        "random": any(r for *_, r in refs),
        "fallback_ops": fell_back,
        "native_ops": rep.native_ops,
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

    from bringup.report.terminal import STATUS_STYLE, styled

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
