"""ops' rule: is the device's output of one OpInfo sample within its dtype's tolerance of float64 (and of
cpu at the same precision)? `compare` walks an output pytree; `judge_tensor` judges one tensor by the
table below (docs/ops.md). No device work here: the worker (`ops/run.py`) hands it cpu tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from bringup.checks.errors import first_line


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
UPCAST = {
    torch.float32: torch.float64,
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.complex64: torch.complex128,
    torch.complex32: torch.complex128,
}
# Worst first: the case's status is the worst of its samples'.


def ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of `dtype` at |x| (float64 tensor; subnormal spacing below the smallest normal)."""
    fi = torch.finfo(dtype)
    mag = x.abs().to(torch.float64).clamp_min(fi.tiny)
    return torch.exp2(torch.floor(torch.log2(mag))) * fi.eps


def dense(t: torch.Tensor) -> torch.Tensor:
    return t if t.layout == torch.strided else t.to_dense()


class Uncomparable(Exception):
    """An output that cannot be compared (a layout that will not densify): `unsupported`, never `pass`."""


_REAL = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}


def judge_tensor(got: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor | None) -> str:
    """'' when the device result `got` is within the rule (module TOLERANCES) of float64 `ref64`
    given how far cpu's `ref` (same dtype) is; else why not. Same dtype and shape already checked."""
    dtype = ref.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        if torch.equal(got, ref):
            return ""
        bad = int((got != ref).sum())
        return f"{bad}/{ref.numel()} values differ from cpu (exact dtype {dtype})"
    g = got.to(torch.complex128 if dtype.is_complex else torch.float64).flatten()
    c = ref.to(g.dtype).flatten()
    r = ref64.to(g.dtype).flatten() if ref64 is not None else c
    if why := _nonfinite(g, c, r):
        return why
    keep = torch.isfinite(g) & torch.isfinite(c) & torch.isfinite(r)
    g, c, r = g[keep], c[keep], r[keep]
    if not g.numel():
        return ""
    if why := _elementwise(g, c, r, dtype, ref64 is not None):
        return why
    if ref64 is None or dtype.is_complex or g.numel() < 2:
        return ""
    return _bias(g, c, r, dtype)


def _nonfinite(g: torch.Tensor, c: torch.Tensor, r: torch.Tensor) -> str:
    """NaN / inf: where cpu (same dtype) or float64 has them, with the same value (an overflow or a NaN
    at this precision is cpu's too; a device that stays finite where float64 is finite is fine)."""
    bad_g = ~torch.isfinite(g)
    same = (g == c) | (torch.isnan(g) & torch.isnan(c)) | (g == r) | (torch.isnan(g) & torch.isnan(r))
    if bool((bad_g & ~same).any()):
        return (
            f"NaN/inf where cpu and float64 have none or others ({int(bad_g.sum())} non-finite vs cpu "
            f"{int((~torch.isfinite(c)).sum())})"
        )
    lost = torch.isfinite(g) & ~torch.isfinite(c) & ~torch.isfinite(r)
    if bool(lost.any()):
        return f"{int(lost.sum())} finite value(s) where cpu and float64 give NaN/inf"
    return ""


def _elementwise(g: torch.Tensor, c: torch.Tensor, r: torch.Tensor, dtype: torch.dtype, has64: bool) -> str:
    """Each value within tol.multiplier x cpu's error + tol.ulps ulps of float64 (without float64: of
    cpu, with a floor scaled by the values' rms)."""
    tol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    real = _REAL.get(dtype, dtype)
    u = ulp(r.abs(), real)
    e_dev = (g - r).abs()
    if has64:
        e_cpu = (c - r).abs()
        floor = 0.0 if bool((e_cpu <= u).all()) else float(e_cpu.max())
        allowed = tol.multiplier * e_cpu.clamp_min(floor) + tol.ulps * u
    else:
        rms = float(c.abs().pow(2).mean().sqrt())
        allowed = tol.ulps * u + tol.multiplier * SAME_DTYPE_FLOOR * torch.finfo(real).eps * rms
    over = e_dev > allowed
    if not bool(over.any()):
        return ""
    i = int(torch.argmax(e_dev - allowed))
    what = "float64" if has64 else "cpu"
    val = complex if dtype.is_complex else float
    return (
        f"{int(over.sum())}/{g.numel()} values off: e.g. {val(g[i]):.6g} vs {what} {val(r[i]):.6g} "
        f"(error {float(e_dev[i]):.3g}, allowed {float(allowed[i]):.3g} = {tol.multiplier:g} x cpu's error "
        f"+ {tol.ulps:g} ulps)"
    )


def _bias(g: torch.Tensor, c: torch.Tensor, r: torch.Tensor, dtype: torch.dtype) -> str:
    """A systematic error: the device's projection on float64 off by more than cpu's, beyond noise."""
    tol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    real = _REAL.get(dtype, dtype)
    u = ulp(r.abs(), real)
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
                g, r = dense(g.detach().cpu()), dense(r.detach())
            except Exception as e:
                raise Uncomparable(f"{where}output layout {r.layout} cannot be compared: {first_line(e)}") from e
            if g.dtype != r.dtype or g.shape != r.shape:
                return f"{where}{g.dtype} {tuple(g.shape)} != cpu {r.dtype} {tuple(r.shape)}"
            if structure_only:
                continue
            t64 = None
            if isinstance(r64, torch.Tensor) and r64.dtype == UPCAST.get(r.dtype) and r64.shape == r.shape:
                try:
                    t64 = dense(r64.detach())
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
