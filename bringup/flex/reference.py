"""Dense float64 attention on cpu: the reference every FlexAttention case is judged against.

Math attention, written out: scores = q k^T * scale, the mod's dense bias/mask, softmax (a row with
every key masked gives 0, as FlexAttention defines it), times v. Backward by autograd in float64.

Cost control, so a default-matrix case (batch 4, seq 8192, 16 heads) stays a few seconds of cpu:
 * slices: the reference is computed one (batch, kv-head group) slice at a time, each with every q
   head of its group, so dk/dv of a kv head are complete; every slice is computed (every (batch,
   head) pair and every gradient is compared).
 * rows are processed in chunks so at most ~2^24 scores (128 MiB of float64) live at once.
`compute_dtype`: the same mathematics rounded to the case dtype at every step (scores, softmax,
P @ V): the trusted run at the case precision that the device's error is measured against
(checks/parity.py), like the eager math path PyTorch's own FlexAttention tests compare with.
The inputs are the device inputs after rounding to the case dtype (then widened to float64), so the
reference measures the kernel's error, not the input quantization.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from bringup.flex.mods import AttnShape, DenseRef

_MAX_SCORES = 1 << 24


@dataclass(frozen=True)
class Slice:
    batch: int
    kv_head: int


@dataclass(frozen=True)
class Attention:
    """One case's attention on cpu, as the references compute it: q (B, Hq, S, D), k / v (B, Hkv, S, D)
    as the device got them, the mod's dense form, the scale, the (batch, kv-head) slices computed, and
    the output's gradient (backward cases; None: forward only)."""

    q: Tensor
    k: Tensor
    v: Tensor
    dense: DenseRef
    scale: float
    slices: list[Slice]
    grad_out: Tensor | None = None


@dataclass(frozen=True)
class SliceAt:
    """Where one slice's rows sit in the mod: the mod's dense form, the scale, the slice's batch and its
    q heads."""

    dense: DenseRef
    scale: float
    batch: int
    heads: Tensor


def ref_slices(shape: AttnShape) -> list[Slice]:
    """Every (batch, kv head) pair: each with its q heads, so all of out, dq, dk and dv is compared."""
    return [Slice(b, g) for b in range(shape.batch) for g in range(shape.kv_heads)]


def q_heads_of(shape: AttnShape, g: int) -> range:
    rep = shape.q_heads // shape.kv_heads
    return range(g * rep, (g + 1) * rep)


def gather_q(shape: AttnShape, slices: list[Slice], t: Tensor) -> Tensor:
    """Stack the slices of a q-side (B, Hq, S, D) tensor (out, dq) -> (n, rep, S, D)."""
    parts = []
    for s in slices:
        h = q_heads_of(shape, s.kv_head)
        parts.append(t[s.batch, h.start : h.stop])
    return torch.stack(parts)


def gather_kv(slices: list[Slice], t: Tensor) -> Tensor:
    """Stack the slices of a kv-side (B, Hkv, S, D) tensor (dk, dv) -> (n, S, D)."""
    return torch.stack([t[s.batch, s.kv_head] for s in slices])


def _softmax_rows(scores: Tensor) -> Tensor:
    # the row max only steadies exp: its gradient is 0 exactly, and through amax's backward (gradient / count
    # of elements equal to the max) a dithered max (flex/dither.py) would divide 0 by 0
    m = scores.detach().amax(-1, keepdim=True)
    dead = torch.isneginf(m)
    p = torch.exp(scores - torch.where(dead, torch.zeros_like(m), m))
    z = p.sum(-1, keepdim=True)
    return p / torch.where(dead, torch.ones_like(z), z)


def attend_rows(
    qs: Tensor, ks: Tensor, vs: Tensor, at: SliceAt, r0: int, compute: torch.dtype, working: torch.dtype
) -> Tensor:
    """Rows r0 : r0 + len of one slice's attention: qs (rep, rows, D) against ks, vs (S, D). Scores and
    softmax held in `working`, the probabilities rounded to `compute` for P @ V (FlexAttention's eager math
    path: working fp32, compute the case dtype)."""
    rep, n, S = qs.shape[0], qs.shape[1], ks.shape[0]
    s = torch.matmul(qs.to(working), ks.to(working).transpose(0, 1)) * at.scale
    s = at.dense(
        s, at.batch, at.heads.view(rep, 1, 1), torch.arange(r0, r0 + n).view(1, n, 1), torch.arange(S).view(1, 1, S)
    )
    return torch.matmul(_softmax_rows(s.to(working)).to(compute), vs.to(compute))


def row_chunk(shape_rep: int, seq: int) -> int:
    """Query rows per chunk: at most _MAX_SCORES scores live at once."""
    return max(1, _MAX_SCORES // max(1, shape_rep * seq))


def dense_attention(
    a: Attention, compute_dtype: torch.dtype = torch.float64, working_dtype: torch.dtype | None = None
) -> dict[str, Tensor]:
    """q (B, Hq, S, D), k/v (B, Hkv, S, D) on cpu. Returns 'out' (and 'dq', 'dk', 'dv' when grad_out is
    given), computed in `compute_dtype` (scores and softmax in `working_dtype`, default the same), returned
    in float64, each stacked over `slices` as gather_q / gather_kv do."""
    q, k, v, grad_out = a.q, a.k, a.v, a.grad_out
    cd = compute_dtype
    wd = working_dtype or cd
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    rep = Hq // Hkv
    rows = row_chunk(rep, S)
    outs, dqs, dks, dvs = [], [], [], []
    for sl in a.slices:
        heads = torch.arange(sl.kv_head * rep, (sl.kv_head + 1) * rep)
        at = SliceAt(a.dense, a.scale, sl.batch, heads)
        qs = q[sl.batch, heads].detach().to(cd)
        ks = k[sl.batch, sl.kv_head].detach().to(cd)
        vs = v[sl.batch, sl.kv_head].detach().to(cd)
        want_grad = grad_out is not None
        if want_grad:
            qs, ks, vs = (t.clone().requires_grad_(True) for t in (qs, ks, vs))
        out = torch.empty(rep, S, D, dtype=torch.float64)
        for r0 in range(0, S, rows):
            r1 = min(S, r0 + rows)
            with torch.set_grad_enabled(want_grad):
                o = attend_rows(qs[:, r0:r1], ks, vs, at, r0, cd, wd)
            if want_grad:
                assert grad_out is not None
                go = grad_out[sl.batch, heads, r0:r1].to(cd)
                o.backward(go)
            out[:, r0:r1] = o.detach().to(torch.float64)
        outs.append(out)
        if want_grad:
            assert qs.grad is not None and ks.grad is not None and vs.grad is not None  # backward ran above
            dqs.append(qs.grad.to(torch.float64))
            dks.append(ks.grad.to(torch.float64))
            dvs.append(vs.grad.to(torch.float64))
    res = {"out": torch.stack(outs)}
    if grad_out is not None:
        res |= {"dq": torch.stack(dqs), "dk": torch.stack(dks), "dv": torch.stack(dvs)}
    return res


def trusted_attention(a: Attention, dtype: torch.dtype) -> dict[str, Tensor]:
    """The trusted run at the case precision `dtype`, on cpu. The output as FlexAttention's eager math path
    computes it (scores and softmax in fp32, the probabilities rounded to `dtype` for P @ V, the output
    rounded): cpu eager FlexAttention at that precision, the zoo's trusted run for a module. The gradients
    by autograd through the same attention rounded to `dtype` at every step (scores, softmax, dS, the
    matmuls): a device's backward kernel rounds P and dS to `dtype` before its matmuls (FlexAttention's
    math backward and its kernels do), and cpu has no FlexAttention backward to take as the trusted run,
    so the gradients' trusted run rounds at least wherever a kernel may. fp32 / fp64: one computation in
    `dtype` throughout."""
    if dtype in (torch.float32, torch.float64):
        return dense_attention(a, dtype)
    res = dense_attention(replace(a, grad_out=None), dtype, torch.float32)
    if a.grad_out is not None:
        grads = dense_attention(a, dtype)
        res |= {n: grads[n] for n in ("dq", "dk", "dv")}
    return res
