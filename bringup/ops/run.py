"""ops' case, in the worker: one OpInfo x dtype. Its first N reference inputs run on cpu (the
reference; again in float64 where the op has it; under another seed to spot random ops) and on the
device under the fallback detector; `judge.compare` judges each output, and the case's status is the
worst of its samples' (module doc of bringup/ops/suite.py)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.checks.fallbacks import FallbackDetector
from bringup.device import Device
from bringup.ops.cases import find_op
from bringup.ops.judge import UPCAST, Uncomparable, compare, dense

# Worst first: the case's status is the worst of its samples'.
_SEVERITY = (Status.CRASH, Status.OOM, Status.FAIL_NUMERIC, Status.UNSUPPORTED, Status.FALLBACK, Status.PASS)


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
    up = UPCAST.get(dtype)
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
                x, y = dense(x.detach()), dense(y.detach())
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


# torch.testing's default (rtol, atol) per dtype: what PyTorch's own tests compare a device with cpu by
_TESTING_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
}


def error_vs_cpu(pairs: list[tuple[Any, Any]]) -> dict[str, Any] | None:
    """How far the device's floating outputs are from cpu's in the same dtype (what PyTorch's test_compare_cpu
    checks): the largest |got - ref|, the largest |got - ref| / |ref|, and `atol_needed`: the smallest atol
    that, with torch.testing's default rtol for the output's dtype, passes every finite value (0 when the
    default atol would do); `rtol`, `default_atol`: those defaults. None: no floating output compared."""
    worst: dict[str, Any] | None = None
    for got, ref in pairs:
        for g, r in zip(tree_flatten(got)[0], tree_flatten(ref)[0], strict=False):
            if not (isinstance(g, torch.Tensor) and isinstance(r, torch.Tensor)) or g.shape != r.shape:
                continue
            if not (r.is_floating_point() or r.is_complex()) or r.numel() == 0:
                continue
            try:
                gd, rd = dense(g).detach().cpu(), dense(r).detach().cpu()
            except Exception:
                continue
            wide = torch.complex128 if rd.is_complex() else torch.float64
            gd, rd = gd.to(wide), rd.to(wide)
            ok = torch.isfinite(gd) & torch.isfinite(rd)
            if not bool(ok.any()):
                continue
            d, mag = (gd - rd).abs()[ok], rd.abs()[ok]
            rtol, atol = _TESTING_TOLERANCES.get(r.dtype, (1.3e-6, 1e-5))
            rel = (d / mag)[mag > 0]
            e = {
                "max_abs": float(d.max()),
                "max_rel": float(rel.max()) if rel.numel() else 0.0,
                "atol_needed": max(0.0, float((d - rtol * mag).max())),
                "rtol": rtol,
                "default_atol": atol,
                "dtype": str(r.dtype).removeprefix("torch."),
            }
            if worst is None:
                worst = e
            else:
                worst = {**worst, **{k: max(worst[k], e[k]) for k in ("max_abs", "max_rel", "atol_needed")}}
    return worst


@dataclass(frozen=True)
class _Refs:
    """The cpu reference of each sample cpu could run: (index, sample, output, random), the float64
    reference of the deterministic ones, and why the others failed."""

    refs: list[tuple[int, Any, Any, bool]]
    refs64: dict[int, Any]
    errors: list[str]


def run_op(case: Case, ctx: Any) -> CaseResult:
    """The op's OpInfo samples: cpu reference, the device's run under the fallback detector, judged."""
    name, dtype_s, n = case.params["op"], case.params["dtype"], int(case.params["samples"])
    dtype = getattr(torch, dtype_s)
    dev: Device = ctx.device
    try:
        op = find_op(name)
    except KeyError:
        return CaseResult.for_case(case, Status.REF_FAIL, f"no OpInfo named {name!r} in this torch")
    fields: dict[str, Any] = {"op": name, "dtype": dtype_s}
    if dtype not in op.supported_dtypes("cpu"):
        return CaseResult.for_case(
            case, Status.REF_FAIL, f"OpInfo {name} does not support {dtype_s} on cpu", fields=fields
        )
    torch.manual_seed(0)
    try:
        samples = list(itertools.islice(op.reference_inputs("cpu", dtype, requires_grad=False), n))
    except Exception as e:
        return CaseResult.for_case(case, Status.REF_FAIL, f"cpu sample inputs: {first_line(e)}", fields=fields)
    ref = _reference(op, samples, dtype)
    fields |= {"samples_run": len(ref.refs), "samples_ref_fail": len(ref.errors)}
    if not ref.refs:
        why = ref.errors[0] if ref.errors else "OpInfo produced no sample inputs"
        return CaseResult.for_case(case, Status.REF_FAIL, f"cpu reference failed: {why}", fields=fields)
    masks = device_masks(op, dtype, len(samples))
    moved = [(i, _to(s, dev.torch_device, masks[i]), r, rnd) for i, s, r, rnd in ref.refs]
    outcomes, outs, rep = _on_device(op, moved, dev)
    return _judge(case, ref, outcomes, outs, rep, fields)


def _reference(op: Any, samples: list[Any], dtype: torch.dtype) -> _Refs:
    """cpu reference for each sample; samples cpu can't run are dropped (counted)."""
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
    return _Refs(refs, refs64, ref_errors)


def _on_device(
    op: Any, moved: list[tuple[int, Any, Any, bool]], dev: Device
) -> tuple[list[tuple[int, Status, str]], list[tuple[int, Any, Any, bool]], Any]:
    """Each sample on the device under the fallback detector: the crashed ones' outcomes, the others'
    outputs, and the detector's report."""
    outcomes: list[tuple[int, Status, str]] = []
    outs: list[tuple[int, Any, Any, bool]] = []
    with FallbackDetector(dev) as det:
        for i, s, ref, rnd in moved:
            try:
                got = _run_seeded(op, s, 0)
            except Exception as e:
                st = classify(e)
                outcomes.append(
                    (i, st if st in (Status.UNSUPPORTED, Status.OOM) else Status.CRASH, f"sample {i}: {first_line(e)}")
                )
                continue
            outs.append((i, got, ref, rnd))
    return outcomes, outs, det.report()


def _judge(
    case: Case,
    ref: _Refs,
    outcomes: list[tuple[int, Status, str]],
    outs: list[tuple[int, Any, Any, bool]],
    rep: Any,
    fields: dict[str, Any],
) -> CaseResult:
    """Each output against its reference; the worst outcome is the case's (a clean run that fell back:
    `fallback`); the fields the report and the exports read."""
    for i, got, r, rnd in outs:
        try:
            why = compare(got, r, ref.refs64.get(i), structure_only=rnd)
        except Uncomparable as e:
            outcomes.append((i, Status.UNSUPPORTED, f"sample {i}: {e}"))
            continue
        outcomes.append((i, Status.FAIL_NUMERIC, f"sample {i}: {why}") if why else (i, Status.PASS, ""))
    fell_back = sorted(rep.fallback_ops)
    if (err := error_vs_cpu([(got, r) for _, got, r, rnd in outs if not rnd])) is not None:
        fields["error_vs_cpu"] = err  # what `export --format pytorch-tests` sizes tolerances from
    fields |= {
        "random": any(x for *_, x in ref.refs),
        "float64_reference": sum(v is not None for v in ref.refs64.values()),
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
    r.metric("samples", len(ref.refs))
    r.metric("fallback_calls", rep.fallback_calls)
    return r
