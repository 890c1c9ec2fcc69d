"""Test-only FlexAttention implementations, wrong and right, for flex's verdict (bench/flex_power.py and
tests/flex): a dynamo backend that runs the graph as aot_eager does, except that every FlexAttention call
in it is computed by one of the functions below instead of torch's eager math path.

Each family is one way a FlexAttention kernel goes wrong, at a strength `d`:

  scale        the softmax scale x (1 + d) (a wrong 1/sqrt(head_dim), a log2(e) folded twice)
  score_hash   every score + d x (+-1 by a hash of (q_idx, kv_idx)): an error with no structure at all
  score_drift  every score + d x (kv_idx - q_idx) / seq: a positional bias (a wrong relative-position term)
  exp_wobble   exp(x) approximated with a periodic relative error: exp(x) (1 + d sin(2 pi x log2 e))
  mask_leak    masked keys within 16 positions of an allowed one leak with weight d (score + log d)
  tail         the last eighth of the head dimension of the output x (1 + d) (a vector loop's tail)
  rescale      online softmax over key blocks of 64 whose running-max rescale is exp((1 + d)(m_old - m_new))
  tile         one key block (keys 64..127) weighs (1 + d) in P @ V but not in the normaliser
  lse_row      every 8th query row's normaliser x (1 + d) (one lane of a row reduction)
  p_trunc      the probabilities truncated (toward zero) to -log2(d) significant bits before P @ V

Correct implementations that compute differently from torch's eager math path (strength ignored):

  upcast       P @ V in fp32 (no rounding of P), the output rounded once
  flash        online softmax over key blocks of 64, fp32 accumulators, P rounded for P @ V (a kernel)
  flash_rev    the same over the key blocks in reverse order
  splitkv      four key partitions with their own softmax, partial outputs rounded to the case dtype and
               merged by their log-sum-exp (flash-decoding)
  prescale     q x scale x log2(e) rounded to the case dtype before q k^T (FlexAttention's PRESCALE_QK)

Every family is the exact function at d = 0 (tests/flex/test_flex_rule.py). Backward: FlexAttention has
none on cpu, so `flash_backward` computes one slice's gradients as FlexAttention's math backward does
(fp32 scores, P rounded for dV, dS rounded for dQ and dK), with backward families of its own
(BWD_FAMILIES), for the judgement's tests on synthetic tensors.

Import as a plugin (`bringup --import flex_bend`, tests/flex on PYTHONPATH): registers
`flex_bend_<family>` backends at DEFAULT_STRENGTH; `bend_backend(family, d)` builds one at any strength.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch._dynamo import register_backend

FAMILIES: dict[str, tuple[float, ...]] = {
    "scale": (0.0025, 0.005, 0.01, 0.02),
    "score_hash": (0.0025, 0.005, 0.01, 0.02),
    "score_drift": (0.02, 0.05, 0.1, 0.2),
    "exp_wobble": (0.0025, 0.005, 0.01, 0.02),
    "mask_leak": (0.0001, 0.0003, 0.001, 0.003),
    "tail": (0.005, 0.01, 0.02, 0.05),
    "rescale": (0.01, 0.03, 0.1, 0.3),
    "tile": (0.005, 0.01, 0.02, 0.05),
    "lse_row": (0.005, 0.01, 0.02, 0.05),
    "p_trunc": (2.0**-12, 2.0**-10, 2.0**-8),
}
# written after the rule was frozen (commit fc8234a) and only measured (bench/flex_power.py --held-out)
HELD_OUT: dict[str, tuple[float, ...]] = {
    "ho_bias_scale": (0.01, 0.02, 0.05, 0.1),  # a score_mod's own term (bias, cap) x (1 + d)
    "ho_kv_tail": (0.005, 0.01, 0.02, 0.05),  # the last eighth of the keys' scores + d
    "ho_p_hash": (0.0025, 0.005, 0.01, 0.02),  # P x (1 + d x +-1 by a hash), after normalising
    "ho_head_temp": (0.005, 0.01, 0.02, 0.05),  # the first q head of each kv group: scale x (1 + d)
    "ho_diag": (0.005, 0.01, 0.02, 0.05),  # the diagonal's probability x (1 - d), renormalised
    "ho_acc_bf16": (1 / 64, 1 / 32, 1 / 16),  # P @ V accumulated in bf16, rounded after every 1/d keys
}
CORRECT = ("upcast", "flash", "flash_rev", "splitkv", "prescale")
DEFAULT_STRENGTH = 0.01
BLOCK = 64  # key block of the online-softmax families
CALLS: Counter[str] = Counter()  # FlexAttention calls each backend computed (a bend that ran nowhere proves nothing)


# ---- the pieces of one attention (post: the scores after score_mod and mask, working precision) ------
def _hash_sign(nq: int, nkv: int, device: torch.device) -> Tensor:
    """+-1 per (q_idx, kv_idx), a fixed integer hash: no structure in position or value."""
    qi = torch.arange(nq, device=device, dtype=torch.int64).view(-1, 1)
    ki = torch.arange(nkv, device=device, dtype=torch.int64).view(1, -1)
    h = (qi * 73856093) ^ (ki * 19349663)
    h = (h ^ (h >> 13)) * 1274126177
    return ((h >> 7) & 1).to(torch.float64) * 2 - 1


def _row_max(post: Tensor) -> Tensor:
    m = post.amax(-1, keepdim=True)
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


def _normalised(p: Tensor) -> Tensor:
    z = p.sum(-1, keepdim=True)
    return p / torch.where(z == 0, torch.ones_like(z), z)


def _exp(x: Tensor, family: str, d: float) -> Tensor:
    e = torch.exp(x)
    if family == "exp_wobble":
        e = e * (1 + d * torch.sin(2 * math.pi * torch.nan_to_num(x, neginf=0.0) / math.log(2)))
    return e


def _trunc(p: Tensor, bits: int) -> Tensor:
    """p truncated toward zero to `bits` significant bits."""
    m, e = torch.frexp(p)
    return torch.ldexp(torch.floor(m * 2.0**bits) / 2.0**bits, e)


def _pv(p: Tensor, v: Tensor, dtype: torch.dtype, wp: torch.dtype, family: str, d: float) -> Tensor:
    """P @ V as the math path does it (P rounded to the case dtype, the matmul in it), or a family's."""
    if family == "p_trunc" and d > 0:
        p = _trunc(p, round(-math.log2(d)))
    if family == "upcast":
        return p @ v.to(wp)
    return (p.to(dtype) @ v.to(dtype)).to(wp)


def _online(post: Tensor, v: Tensor, dtype: torch.dtype, wp: torch.dtype, family: str, d: float) -> Tensor:
    """Online softmax over key blocks of BLOCK (flash, flash_rev, rescale): fp32 running max, sum and
    accumulator; P rounded to the case dtype for each block's P @ V."""
    S = post.shape[-1]
    starts = list(range(0, S, BLOCK))
    if family == "flash_rev":
        starts.reverse()
    m = torch.full(post.shape[:-1] + (1,), -math.inf, dtype=wp, device=post.device)
    ell = torch.zeros_like(m)
    acc = torch.zeros(post.shape[:-1] + (v.shape[-1],), dtype=wp, device=post.device)
    for s0 in starts:
        blk = post[..., s0 : s0 + BLOCK]
        m_new = torch.maximum(m, blk.amax(-1, keepdim=True))
        safe = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        gap = torch.where(torch.isneginf(m), torch.full_like(m, -math.inf), m - safe)
        alpha = torch.exp(gap * (1 + d) if family == "rescale" else gap)
        p = torch.exp(blk - safe)
        ell = ell * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + (p.to(dtype).to(wp) @ v[..., s0 : s0 + BLOCK, :].to(dtype).to(wp))
        m = m_new
    return acc / torch.where(ell == 0, torch.ones_like(ell), ell)


def _splitkv(post: Tensor, v: Tensor, dtype: torch.dtype, wp: torch.dtype) -> Tensor:
    """Four key partitions, each its own softmax; partial outputs rounded to the case dtype, merged by lse."""
    parts = post.shape[-1] // 4 or 1
    outs, lses = [], []
    for s0 in range(0, post.shape[-1], parts):
        blk = post[..., s0 : s0 + parts]
        m = _row_max(blk)
        p = torch.exp(blk - m)
        ell = p.sum(-1, keepdim=True)
        o = (p.to(dtype) @ v[..., s0 : s0 + parts, :].to(dtype)).to(wp) / torch.where(ell == 0, 1.0, ell)
        outs.append(o.to(dtype).to(wp))
        lses.append(torch.where(ell == 0, torch.full_like(ell, -math.inf), m + torch.log(ell)))
    lse = torch.logsumexp(torch.stack(lses), 0)
    lse = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    return sum(o * torch.exp(lz - lse) for o, lz in zip(outs, lses, strict=True))  # type: ignore[return-value]


def _leak(post: Tensor, raw: Tensor, d: float) -> Tensor:
    """Masked keys within 16 positions of an allowed key in the same row get raw score + log d."""
    allowed = torch.isfinite(post)
    near = torch.nn.functional.max_pool1d(allowed.to(torch.float32).flatten(0, -2).unsqueeze(1), 33, 1, 16)
    leak = ~allowed & (near.squeeze(1).view(post.shape) > 0)
    return torch.where(leak, raw + math.log(d), post)


def _bend_scores(post: Tensor, raw: Tensor, family: str, d: float) -> Tensor:
    nq, nkv = post.shape[-2], post.shape[-1]
    if family == "score_hash":
        return post + d * _hash_sign(nq, nkv, post.device).to(post.dtype)
    if family == "score_drift":
        rel = torch.arange(nkv, device=post.device).view(1, -1) - torch.arange(nq, device=post.device).view(-1, 1)
        return post + d * rel.to(post.dtype) / nkv
    if family == "mask_leak" and d > 0:
        return _leak(post, raw, d)
    if family == "ho_bias_scale":
        return torch.where(torch.isfinite(post), raw + (post - raw) * (1 + d), post)
    if family == "ho_kv_tail":
        out = post.clone()
        out[..., -max(1, nkv // 8) :] += d
        return out
    return post


def _acc_bf16(p: Tensor, v: Tensor, dtype: torch.dtype, wp: torch.dtype, block: int) -> Tensor:
    """P @ V with the accumulator held in bf16: rounded after every `block` keys."""
    acc = torch.zeros(p.shape[:-1] + (v.shape[-1],), dtype=wp, device=p.device)
    for s0 in range(0, p.shape[-1], block):
        part = p[..., s0 : s0 + block].to(dtype).to(wp) @ v[..., s0 : s0 + block, :].to(dtype).to(wp)
        acc = (acc + part).to(torch.bfloat16).to(wp)
    return acc


def attend(post: Tensor, raw: Tensor, v: Tensor, dtype: torch.dtype, family: str, d: float) -> Tensor:
    """Attention from the scores after score_mod and mask (`post`, working precision; `raw`: before
    them) and v (heads already matched to q's): the output in the working precision."""
    wp = post.dtype
    post = _bend_scores(post, raw, family, d)
    if family in ("flash", "flash_rev", "rescale"):
        out = _online(post, v, dtype, wp, family, d)
    elif family == "ho_acc_bf16" and d > 0:
        out = _acc_bf16(_normalised(torch.exp(post - _row_max(post))), v, dtype, wp, max(1, round(1 / d)))
    elif family == "splitkv":
        out = _splitkv(post, v, dtype, wp)
    else:
        p = _exp(post - _row_max(post), family, d)
        if family == "tile":
            num = p.clone()
            num[..., BLOCK : 2 * BLOCK] *= 1 + d
            out = _pv(num, v, dtype, wp, family, d) / p.sum(-1, keepdim=True).clamp_min(1e-300)
        elif family == "ho_p_hash":
            pn = _normalised(p)
            out = _pv(pn * (1 + d * _hash_sign(pn.shape[-2], pn.shape[-1], pn.device).to(wp)), v, dtype, wp, "", 0)
        elif family == "ho_diag":
            n = min(p.shape[-2], p.shape[-1])
            p = p.clone()
            p[..., torch.arange(n), torch.arange(n)] *= 1 - d
            out = _pv(_normalised(p), v, dtype, wp, family, d)
        else:
            out = _pv(_normalised(p), v, dtype, wp, family, d)
    if family == "tail":
        out = out.clone()
        out[..., -max(1, out.shape[-1] // 8) :] *= 1 + d
    if family == "lse_row":
        out = out.clone()
        out[..., 7::8, :] /= 1 + d
    return out


# ---- the dynamo backend ----------------------------------------------------------------------------------
def flex_impl(family: str, d: float) -> Callable[..., tuple[Tensor, Tensor, Tensor]]:
    """A stand-in for torch.ops.higher_order.flex_attention (same arguments, same outputs)."""
    from torch._higher_order_ops.flex_attention import _math_attention_inner

    def impl(
        q: Tensor,
        k: Tensor,
        v: Tensor,
        score_mod: Any,
        block_mask: tuple[Any, ...],
        scale: float,
        kernel_options: Any,
        score_bufs: tuple[Any, ...] = (),
        mask_bufs: tuple[Any, ...] = (),
    ) -> Any:
        CALLS[family] += 1
        g = q.shape[1] // k.shape[1]
        k2 = torch.repeat_interleave(k, g, dim=1)
        v2 = torch.repeat_interleave(v, g, dim=1)
        s_eff = scale * (1 + d) if family == "scale" else scale
        if family == "prescale":  # q x scale x log2(e) rounded to q's dtype (PRESCALE_QK), scores back in nats
            q, s_eff = (q.to(torch.float64) * (scale / math.log(2))).to(q.dtype), math.log(2)
        raw, post = _math_attention_inner(
            q, k2, v2, score_mod, block_mask, s_eff, kernel_options, score_bufs, mask_bufs
        )
        if family == "ho_head_temp":  # the first q head of each kv group computed at scale x (1 + d)
            raw2, post2 = _math_attention_inner(
                q, k2, v2, score_mod, block_mask, scale * (1 + d), kernel_options, score_bufs, mask_bufs
            )
            raw, post = raw.clone(), post.clone()
            raw[:, ::g], post[:, ::g] = raw2[:, ::g], post2[:, ::g]
        out = attend(post, raw, v2, q.dtype, family, d)
        lse = torch.logsumexp(post, -1) / math.log(2)
        return out.to(q.dtype), lse, post.amax(-1) / math.log(2)

    return impl


def _is_flex(node: torch.fx.Node) -> bool:
    name = str(getattr(node.target, "__name__", node.target))
    return node.op == "call_function" and "flex_attention" in name and "backward" not in name


def bend_backend(family: str, d: float = DEFAULT_STRENGTH) -> Any:
    """A dynamo backend: aot_eager with every FlexAttention call computed by flex_impl(family, d)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    impl = flex_impl(family, d)

    def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        nodes = [n for n in gm.graph.nodes if _is_flex(n)]
        if not nodes:
            raise RuntimeError(f"flex_bend {family}: no flex_attention node in the graph")
        for n in nodes:
            n.target = impl
        gm.recompile()
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=compiler)


for _name in (*FAMILIES, *HELD_OUT, *CORRECT):
    register_backend(name=f"flex_bend_{_name}", compiler_fn=bend_backend(_name))


# ---- backward, on synthetic tensors --------------------------------------------------------------------
BWD_FAMILIES: dict[str, tuple[float, ...]] = {
    "dk_scale": (0.005, 0.01, 0.02),  # dK x (1 + d)
    "delta": (0.005, 0.01, 0.02),  # rowsum(dO * O) x (1 + d) in dS = P (dP - delta)
    "dv_tile": (0.01, 0.02, 0.05),  # dV of one key block (64..127) x (1 + d)
    "dk_softmax_scale": (0.005, 0.01, 0.02),  # dK's softmax scale x (1 + d) (dQ right)
    "bwd_exp_wobble": (0.005, 0.01, 0.02),  # P recomputed in the backward with exp_wobble's exp
    "dq_tail": (0.01, 0.02, 0.05),  # the last eighth of dQ's head dimension x (1 + d)
    "lse_off": (0.005, 0.01, 0.02),  # the backward recomputes P from lse + d (P x e^-d)
}


def flash_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    do: Tensor,
    dense: Any,
    scale: float,
    batch: int,
    heads: Tensor,
    dtype: torch.dtype,
    family: str = "",
    d: float = 0.0,
) -> dict[str, Tensor]:
    """One slice's out, dq, dk, dv as FlexAttention's math backward computes them: q (rep, S, D), k, v (S,
    D), do like q, all in `dtype`; scores and softmax in fp32 (float64 for a float64 run), P rounded to
    `dtype` for dV, dS x scale rounded to `dtype` for dQ and dK. `dense`: the mod's dense reference (its
    score derivative must be 1: masks and additive biases). A backward family bends it at strength d."""
    wp = torch.float64 if dtype == torch.float64 else torch.float32
    rep, S, _ = q.shape
    s = (q.to(wp) @ k.to(wp).T) * scale
    s = dense(s, batch, heads.view(rep, 1, 1), torch.arange(S).view(1, S, 1), torch.arange(S).view(1, 1, S)).to(wp)
    m = _row_max(s)
    p = _normalised(torch.exp(s - m))
    out = (p.to(dtype) @ v.to(dtype)).to(dtype)
    pb = p
    if family == "bwd_exp_wobble":
        pb = _normalised(_exp(s - m, "exp_wobble", d))
    if family == "lse_off":
        pb = p * math.exp(-d)
    dv = (pb.to(dtype).transpose(-1, -2) @ do.to(dtype)).sum(0)
    dp = do.to(wp) @ v.to(wp).T
    delta = (out.to(wp) * do.to(wp)).sum(-1, keepdim=True) * (1 + d if family == "delta" else 1)
    ds = pb * (dp - delta)
    dq = (ds * scale).to(dtype) @ k.to(dtype)
    k_scale = scale * (1 + d) if family == "dk_softmax_scale" else scale
    dk = ((ds * k_scale).to(dtype).transpose(-1, -2) @ q.to(dtype)).sum(0)
    res = {
        "out": out.to(torch.float64),
        "dq": dq.to(torch.float64),
        "dk": dk.to(torch.float64),
        "dv": dv.to(torch.float64),
    }
    if family == "dk_scale":
        res["dk"] = res["dk"] * (1 + d)
    if family == "dv_tile":
        res["dv"][BLOCK : 2 * BLOCK] *= 1 + d
    if family == "dq_tail":
        res["dq"][..., -max(1, q.shape[-1] // 8) :] *= 1 + d
    return res


def flash_grads(
    shape: Any, x: dict[str, Tensor], dense: Any, dtype: torch.dtype, family: str = "", d: float = 0.0
) -> dict[str, Tensor]:
    """flash_backward on every (batch, kv-head) slice of a case (x: q, k, v, do, (B, H, S, D)), stacked as
    bringup/flex/reference.dense_attention stacks them."""
    from bringup.flex.mods import default_scale
    from bringup.flex.reference import ref_slices

    rep = shape.q_heads // shape.kv_heads
    parts: dict[str, list[Tensor]] = {}
    for sl in ref_slices(shape):
        heads = torch.arange(sl.kv_head * rep, (sl.kv_head + 1) * rep)
        one = flash_backward(
            x["q"][sl.batch, heads].to(dtype),
            x["k"][sl.batch, sl.kv_head].to(dtype),
            x["v"][sl.batch, sl.kv_head].to(dtype),
            x["do"][sl.batch, heads].to(dtype),
            dense,
            default_scale(shape.head_dim),
            sl.batch,
            heads,
            dtype,
            family,
            d,
        )
        for n, t in one.items():
            parts.setdefault(n, []).append(t)
    return {n: torch.stack(ts) for n, ts in parts.items()}
