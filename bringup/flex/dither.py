"""What rounding everything once costs one attention: the module rule's conditioning term
(checks/module_rule.py, size check: "rounding everything once"), measured on the case's own inputs.

The float64 dense attention of each (batch, kv-head) slice is replayed through checks/module_replay's
`replay` with its dither: the output gradient and every op result of the forward and the backward
multiplied by (1 + d x N(0, 1)), d = one rounding of the case dtype (eps / sqrt(12)), module_rule.DITHERS
seeds; its distance from the float64 reference is what a computation that rounds everything once, at
other points than the trusted run, may cost here.
 * q, k and v are not rounded: the device gets the very bf16 / fp16 values the reference widens, so
   nothing rounds them before the call. A kernel that rounds something made from them (q x scale x
   log2 e, FlexAttention's PRESCALE_QK) rounds an op result, and that is dithered. (The zoo's module
   check also rounds a module's inputs: there they are another module's results, here they are the
   case's data. Rounding q and k once moves the scores by ~0.3% of their size, and through exp the
   output by 0.47-0.54% relative RMS where rounding every op result moves it 0.32-0.34%, the trusted
   run 0.23% and the correct variants of bench/flex_power.py 0.16-0.33%: a size bound of 3 x 0.5% =
   1.5% would pass unstructured errors up to 1.5%, with rounding op results 1.0%.)
 * The scores and the softmax are held in fp32, as FlexAttention defines them (its eager math path and
   its kernels compute q k^T, the score_mod and the softmax in fp32 and round only the probabilities
   before P @ V and the output): the dither rounds them as fp32 rounds (module_replay rounds a value
   held in a narrower float as that float rounds), the rest (P for P @ V, the output, the backward's
   matmuls) at the case precision.

Cost: two more float64 attentions per draw and slice, plus a normal draw per element of every op result
(~10x the float64 reference on one core). Slices are dithered while their scores fit DITHER_SCORES per
draw (every slice of the quick matrix and of a seq-1024 case); past it an evenly spread sample of slices
(the first and the last included), and each other slice borrows the error pattern of the sampled slice
farthest from its reference, rescaled to its own reference's RMS: the slices of one case share shape, mod
and input distribution, so their conditioning is measured on a sample, and the largest one is taken.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import Tensor

from bringup.checks.module_replay import Call, ReplayNoise, replay
from bringup.checks.module_rule import DITHERS
from bringup.flex.mods import DenseRef
from bringup.flex.reference import Attention, SliceAt, attend_rows, row_chunk

# scores per draw dithered in full (every slice); past it a sample of slices (module doc). 2^25: a
# default-matrix slice at seq 4096 and 2 q heads per kv head, ~10 s of one core per draw with the backward
DITHER_SCORES = 1 << 25
WORKING = torch.float32  # FlexAttention's working precision for scores and softmax (module doc)


class _Rows(torch.nn.Module):
    """One slice's rows r0 : r0 + n as a module (module_replay replays modules), q, k and v its parameters:
    a replay rounds a call's inputs and every op result, and FlexAttention's inputs are not results of this
    computation (the device gets the very values the reference widens), so they sit where the replay leaves
    values as they are. Scores and softmax held in WORKING, everything else in float64."""

    def __init__(self, q: Tensor, k: Tensor, v: Tensor, at: SliceAt, r0: int) -> None:
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Parameter(t) for t in (q, k, v))
        self.at, self.r0 = at, r0

    def forward(self) -> Tensor:
        q = self.q
        return attend_rows(q, self.k, self.v, self.at, self.r0, q.dtype, WORKING)


@dataclass(frozen=True)
class _Slice:
    q: Tensor  # (rep, S, D) float64
    k: Tensor
    v: Tensor
    do: Tensor | None
    batch: int
    heads: Tensor


def _one_draw(sl: _Slice, dense: DenseRef, scale: float, rounding: float, seed: int) -> dict[str, Tensor]:
    """One dithered float64 replay of one slice, row chunk by row chunk (out, dq: the chunks' rows; dk,
    dv: the chunks' sums, as the float64 reference accumulates them)."""
    rep, S, _ = sl.q.shape
    rows = row_chunk(rep, S)
    want = sl.do is not None
    parts: dict[str, list[Tensor]] = {"out": [], "dq": []}
    dk = dv = None
    for c, r0 in enumerate(range(0, S, rows)):
        r1 = min(S, r0 + rows)
        module = _Rows(sl.q[:, r0:r1], sl.k, sl.v, SliceAt(dense, scale, sl.batch, sl.heads), r0)
        module.requires_grad_(want)
        grads: list[torch.Tensor | None] = [sl.do[:, r0:r1]] if sl.do is not None else [None]
        call = Call("flex", module, (), {}, [], [], grads)
        got = replay(
            call,
            module,
            torch.device("cpu"),
            contextlib.nullcontext,
            dtype=torch.float64,
            noise=ReplayNoise(rounding, seed * 100_003 + c),
        )
        parts["out"].append(got.tensors["out.0"])
        if want:
            parts["dq"].append(got.tensors["grad.q"])
            gk, gv = got.tensors["grad.k"], got.tensors["grad.v"]
            dk, dv = (gk, gv) if dk is None or dv is None else (dk + gk, dv + gv)
    res = {"out": torch.cat(parts["out"], dim=1).double()}
    if want and dk is not None and dv is not None:
        res |= {"dq": torch.cat(parts["dq"], dim=1).double(), "dk": dk.double(), "dv": dv.double()}
    return res


def sampled_slices(n: int, per_slice: int, budget: int = DITHER_SCORES) -> list[int]:
    """Which of n slices are dithered: all while n x per_slice scores fit the budget, else an evenly
    spread sample of at least 2 (the first and the last among them)."""
    k = max(2, budget // max(1, per_slice))
    if k >= n:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def _rel(a: Tensor, r: Tensor) -> float:
    rms = float(r.pow(2).mean().sqrt())
    return float((a - r).pow(2).mean().sqrt()) / rms if rms else 0.0


def _borrowed(name: str, ref: Tensor, got: dict[int, Tensor], n: int) -> Tensor:
    """A stacked (n, ...) dithered tensor: the sampled slices' own, and for every other slice the error
    pattern of the sampled slice farthest from its reference (relative RMS), rescaled to its own RMS."""
    out = ref.clone()
    worst = max(got, key=lambda i: _rel(got[i], ref[i]))
    err = got[worst] - ref[worst]
    rms_w = float(ref[worst].pow(2).mean().sqrt())
    for i in range(n):
        if i in got:
            out[i] = got[i]
        elif rms_w > 0:
            out[i] = ref[i] + err * (float(ref[i].pow(2).mean().sqrt()) / rms_w)
    return out


def dithered_attention(
    a: Attention, rounding: float, ref: dict[str, Tensor], budget: int = DITHER_SCORES
) -> tuple[list[dict[str, Tensor]], int]:
    """module_rule.DITHERS dithered float64 computations of the case's attention (module doc), each a dict
    like dense_attention's (stacked over `slices`), and how many slices were dithered (the others borrow).
    q, k, v (and grad_out) as the device got them (cpu); `rounding`: the case dtype's one rounding."""
    q, k, v, grad_out, slices = a.q, a.k, a.v, a.grad_out, a.slices
    rep = q.shape[1] // k.shape[1]
    S = q.shape[2]
    chosen = sampled_slices(len(slices), rep * S * S, budget)
    draws: list[dict[int, dict[str, Tensor]]] = [{} for _ in range(DITHERS)]
    for i in chosen:
        sl = slices[i]
        heads = torch.arange(sl.kv_head * rep, (sl.kv_head + 1) * rep)
        one = _Slice(
            q[sl.batch, heads].double(),
            k[sl.batch, sl.kv_head].double(),
            v[sl.batch, sl.kv_head].double(),
            None if grad_out is None else grad_out[sl.batch, heads].double(),
            sl.batch,
            heads,
        )
        for d in range(DITHERS):
            draws[d][i] = _one_draw(one, a.dense, a.scale, rounding, seed=1 + d + DITHERS * i)
    out = []
    for per_slice in draws:
        names = [n for n in ref if all(n in t for t in per_slice.values())]
        out.append({n: _borrowed(n, ref[n], {i: t[n] for i, t in per_slice.items()}, len(slices)) for n in names})
    return out, len(chosen)
