"""Flex's check beside the module rule's six: the output's error along what a reweighting of the attention
probabilities would do to it.

Why. With the case's random inputs nearly every bug in the score and softmax path of an attention kernel
(a scale or a temperature off, a score_mod or a bias computed wrong, an approximate exp, a mask or a
position term off, a block of keys weighed wrong by the online softmax) changes the probabilities P by
a deterministic function of the score or of where the key sits: P'_ij = P_ij (1 + w_ij), renormalised.
Its effect on the output, out'_i - out_i = sum_j P_ij w_ij (v_j - out_i), is a combination of random
value rows, so the module rule's checks (a scale along the reference, a mean given the value, a block's
scale) see it as noise and only its size can flag it. Rounding of a correct kernel reweights too (P is
rounded before P @ V), but by an error with no mean given the score or the position.

The check. The entries (i, j) of a slice are cut three ways into BINS bins: by the exponent's argument
x_ij = s_ij - max_j s_ij (the score relative to its row's largest: what exp sees), by the key's position j
(contiguous blocks: tiles), and by the distance i - j (a position term). For each bin k the direction a
reweighting of that bin moves the output, A_k[i] = sum_{j in k} P_ij (v_j - out_i) (float64 reference P
and out), and the error's coefficient along it, c_k = <err, A_k> / <A_k, A_k>: the relative reweighting
of bin k that best explains the error. Bins hold equal probability mass (x, distance) or equal key counts
(position). A device's c_k must lie in [min(0, trusted's), max(0, trusted's)] widened by a floor of one
rounding (eps / sqrt(12): a probability a correct device computes with a relative error of one rounding
as a function of x, an exp to the last bit, reweights by at most that) plus z = 6 standard errors, as the
module rule judges its statistics (module_rule.py: the same z and the same measured noise: the spread of
the error around c_k A_k, elements independent or, larger, rows clustered in 16 contiguous groups; the
device's and the trusted run's together).

Cost: per slice the scores again (float64) and three segmented sums of P_ij v_j (index_add). Query rows
are sampled evenly (the same rows in every head of the slice) while a slice holds more than SLICE_SCORES
scores or the case more than CASE_SCORES: every row of the quick matrix, half or all of a seq-1024
default case's, 64 query rows per head at seq 8192. The gradients have no such check: a
reweighting of P reaches dV as P^T dO and dQ, dK through dS, each its own set of directions; not built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from bringup.flex.reference import Attention, SliceAt

BINS = 16  # module_rule.MAX_BINS: enough to follow a function of x over its range, few enough statistics
FAMILIES = ("exp argument", "key position", "query-key distance")
SLICE_SCORES = 1 << 22
CASE_SCORES = 1 << 25
GROUPS = 16  # contiguous row groups for the clustered variance (module_rule.CHUNKS)
# scores x head_dim per index_add call (memory: 8 bytes each)
_CHUNK_ELEMS = 1 << 24


@dataclass(frozen=True)
class Coefs:
    """Per direction (family x bin, flattened): c_k and its variance, for one error on one slice."""

    coef: Tensor
    var: Tensor


def _rows(rep: int, seq: int, n_slices: int) -> Tensor:
    """The query rows judged (the same for every head of a slice): all, or an even sample."""
    per = min(SLICE_SCORES, CASE_SCORES // max(1, n_slices))
    r = max(GROUPS, per // max(1, rep * seq))
    if r >= seq:
        return torch.arange(seq)
    return torch.unique(torch.linspace(0, seq - 1, r).round().long())


def _mass_bins(key: Tensor, weight: Tensor) -> Tensor:
    """Bin index 0..BINS-1 of each element: equal shares of the total weight, in the order of key."""
    order = torch.argsort(key, stable=True)
    cum = torch.cumsum(weight[order], 0)
    total = float(cum[-1]) if cum.numel() else 0.0
    out = torch.empty_like(order)
    if total <= 0:
        out[order] = torch.arange(order.numel()) * BINS // max(1, order.numel())
        return out
    out[order] = ((cum - weight[order] / 2) / total * BINS).long().clamp(0, BINS - 1)
    return out


def _directions(p: Tensor, v: Tensor, out: Tensor, bins: Tensor) -> Tensor:
    """A_k[i] = sum_{j: bins_ij = k} P_ij (v_j - out_i) for every row i (p, bins (R, S); v (S, D); out (R, D))
    -> (BINS, R, D)."""
    R, S = p.shape
    D = v.shape[1]
    acc = torch.zeros(R * BINS, D, dtype=torch.float64)
    mass = torch.zeros(R * BINS, dtype=torch.float64)
    step = max(1, _CHUNK_ELEMS // max(1, S * D))
    for r0 in range(0, R, step):
        r1 = min(R, r0 + step)
        idx = (torch.arange(r0, r1).view(-1, 1) * BINS + bins[r0:r1]).flatten()
        pp = p[r0:r1].flatten()
        acc.index_add_(0, idx, (p[r0:r1].unsqueeze(-1) * v.unsqueeze(0)).flatten(0, 1))
        mass.index_add_(0, idx, pp)
    acc = acc.view(R, BINS, D) - mass.view(R, BINS, 1) * out.unsqueeze(1)
    return acc.permute(1, 0, 2)


def _coefs(a: Tensor, err: Tensor) -> Coefs:
    """a (K, R, D) directions, err (R, D): c_k and its variance (module doc)."""
    aa = (a * a).sum((1, 2))
    safe = aa.clamp_min(1e-300)
    c = (a * err.unsqueeze(0)).sum((1, 2)) / safe
    resid = err.unsqueeze(0) - c.view(-1, 1, 1) * a
    per_row = (a * resid).sum(2)  # (K, R)
    iid = (a * resid).pow(2).sum((1, 2)) / safe**2
    R = per_row.shape[1]
    g = min(GROUPS, R)
    group = torch.arange(R) * g // R
    sums = torch.zeros(per_row.shape[0], g, dtype=torch.float64).index_add_(1, group, per_row)
    cl = sums.pow(2).sum(1) * g / max(g - 1, 1) / safe**2
    var = torch.maximum(iid, cl)
    return Coefs(torch.where(aa > 0, c, torch.zeros_like(c)), torch.where(aa > 0, var, torch.full_like(var, math.inf)))


def _slice_directions(q: Tensor, k: Tensor, v: Tensor, out: Tensor, at: SliceAt, rows: Tensor) -> Tensor:
    """All three families' directions for one slice's sampled rows: (3 x BINS, rep x rows, D)."""
    rep, S = q.shape[0], k.shape[0]
    s = torch.matmul(q[:, rows], k.transpose(0, 1)) * at.scale
    s = at.dense(s, at.batch, at.heads.view(rep, 1, 1), rows.view(1, -1, 1), torch.arange(S).view(1, 1, S))
    m = s.amax(-1, keepdim=True)
    live = torch.isfinite(m)
    x = torch.where(live, s - torch.where(live, m, torch.zeros_like(m)), torch.full_like(s, -math.inf))
    p = torch.exp(x)
    p = p / p.sum(-1, keepdim=True).clamp_min(1e-300)
    flat_p = p.reshape(-1, S)
    keep = torch.isfinite(x)
    x_key = torch.where(keep, x, torch.full_like(x, -1e300)).flatten()
    dist = (rows.view(1, -1, 1) - torch.arange(S).view(1, 1, S)).expand_as(s).to(torch.float64).flatten()
    pos = (torch.arange(S) * BINS // S).view(1, 1, S).expand_as(s).reshape(-1, S)
    by_x = _mass_bins(x_key, p.flatten()).view(-1, S)
    by_dist = _mass_bins(dist, p.flatten()).view(-1, S)
    o = out[:, rows].reshape(-1, out.shape[-1])
    return torch.cat([_directions(flat_p, v, o, b) for b in (by_x, pos, by_dist)])


def reweight_coefs(at: Attention, ref_out: Tensor, errors: dict[str, Tensor]) -> list[dict[str, Coefs]]:
    """Per slice, per named error (a stacked (n, rep, S, D) tensor: the device's out minus ref_out, say),
    the coefficients along the reweighting directions (module doc), over the slice's q heads together and,
    with more than one, each head alone (named "<error>.h<j>"). q, k, v as the device got them (cpu),
    ref_out the float64 reference output stacked over slices (at.grad_out is not used)."""
    q, k, v, slices = at.q, at.k, at.v, at.slices
    rep = q.shape[1] // k.shape[1]
    S = q.shape[2]
    rows = _rows(rep, S, len(slices))
    res: list[dict[str, Coefs]] = []
    for i, sl in enumerate(slices):
        heads = torch.arange(sl.kv_head * rep, (sl.kv_head + 1) * rep)
        a = _slice_directions(
            q[sl.batch, heads].double(),
            k[sl.batch, sl.kv_head].double(),
            v[sl.batch, sl.kv_head].double(),
            ref_out[i],
            SliceAt(at.dense, at.scale, sl.batch, heads),
            rows,
        )
        one = {n: _coefs(a, e[i][:, rows].reshape(-1, e.shape[-1])) for n, e in errors.items()}
        R = len(rows)
        for h in range(rep if rep > 1 else 0):  # each q head alone too: "name.h<j>"
            one |= {f"{n}.h{h}": _coefs(a[:, h * R : (h + 1) * R], e[i][h, rows]) for n, e in errors.items()}
        res.append(one)
    return res


@dataclass(frozen=True)
class Reweighting:
    """The worst direction of one slice: its score (> 1 fails), where, and the figures."""

    score: float
    family: str
    bin: int
    coef: float
    trusted: float
    margin: float

    def summary(self) -> str:
        return (
            f"reweighting of the probabilities by {self.family} (bin {self.bin + 1}/{BINS}) {self.coef:+.3g} "
            f"vs trusted {self.trusted:+.3g} (margin {self.margin:.3g})"
        )


def judge_reweighting(dev: Coefs, trusted: Coefs, floor: float, z: float) -> Reweighting:
    """The device's coefficients against [min(0, trusted), max(0, trusted)] + floor + z standard errors."""
    noise = (z * (dev.var + trusted.var).sqrt()).clamp_min(1e-300)
    lo = torch.minimum(trusted.coef, torch.zeros_like(trusted.coef)) - floor
    hi = torch.maximum(trusted.coef, torch.zeros_like(trusted.coef)) + floor
    past = torch.maximum(lo - dev.coef, dev.coef - hi).clamp_min(0.0)
    score = torch.where(torch.isfinite(noise), past / noise, torch.zeros_like(past))
    i = int(torch.argmax(score))
    return Reweighting(
        float(score[i]),
        FAMILIES[i // BINS],
        i % BINS,
        float(dev.coef[i]),
        float(trusted.coef[i]),
        floor + float(noise[i]),
    )
