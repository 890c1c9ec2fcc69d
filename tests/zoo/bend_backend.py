"""Test-only wrong devices whose bug BENDS a function instead of scaling its output: a sharper or
flatter nonlinearity, an approximation where the exact form was asked, a wrong constant inside a
function (a softmax temperature, an attention scale, a norm's epsilon), a wrong decomposition of
correct ops, an error in the backward only.

Each family rewrites one kind of torch-level call (what a dynamo graph holds: F.silu, F.softmax,
torch.rsqrt, ...) into a bent function built from correct torch ops, so autograd derives its backward
(the backward-only families are autograd.Functions with a correct forward). Two ways to inject one:
  * `BendMode(family, strength)`: a TorchFunctionMode over an eager step (bench/verdict_power.py's
    default `--inject mode`; counts the calls it bent in BEND_CALLS).
  * `bend_backend(family, strength)`: a dynamo backend that rewrites the dynamo graph's nodes of that
    kind, then compiles like aot_eager (`--inject compile`; also registered as plugin backends
    `bend_<family>_aot_eager` at the default strength).
`strength` is the family's own knob (a relative change of a constant: 0.01 = 1%). What a bend does
to a model's result is measured separately (bench/verdict_power.py: `effect`, in float64).

FAMILIES are the ones the module-level rule (bringup/checks/module_check.py) was developed on;
HELD_OUT are written after that rule was frozen and only measured (docs/verdicts.md says which).
"""

from __future__ import annotations

import inspect
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import datapath_backend as dp
import tail_backend as tb
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

DEFAULT_STRENGTH = 0.01
FAMILIES: dict[str, str] = {
    "gate": "activation gate sharper by (1+d): silu/gelu/mish/hardswish f(x) -> f((1+d)x)/(1+d), "
    "sigmoid/tanh f(x) -> f((1+d)x) (negative d: flatter)",
    "softmax_temp": "softmax temperature off: softmax(x) -> softmax((1+d)x)",
    "sdpa_scale": "attention scale off: SDPA's scale x (1+d)",
    "norm_eps": "a norm's epsilon off by d (absolute, added to the variance): layer/rms/group/batch norm, "
    "rsqrt(x) -> rsqrt(x + d)",
    "ln_var": "wrong decomposition of layer norm: variance + d * mean^2 (d=1: the uncentered second moment)",
    "gelu_sigmoid": "approximation for the exact form: gelu(x) -> (1-d) gelu(x) + d x sigmoid(1.702x)",
    "bwd_gate": "backward only: an activation's gradient is that of the (1+d)-sharper gate; forward exact",
    "bwd_softmax": "backward only: softmax's gradient x (1+d); forward exact",
    "bwd_norm": "backward only: the gradient through a norm's variance x (1-d) (layer norm's projection "
    "term, rsqrt's derivative); forward exact",
}
# strengths the bench sweeps per family (resolution: the smallest caught >= 95% of the time)
STRENGTHS: dict[str, tuple[float, ...]] = {
    "gate": (0.005, 0.01, 0.02, -0.02),
    "softmax_temp": (0.005, 0.01, 0.02),
    "sdpa_scale": (0.005, 0.01, 0.02),
    # absolute, on the variance: the zoo's hidden states reach some norms with a variance near 1e-4 (q/k and
    # final norms), so 0.005 moved a gradient by 130-500% (bench, 2026-12-02); 1e-6 is rms_norm's own eps
    "norm_eps": (1e-6, 1e-5, 1e-4),
    "ln_var": (0.25, 0.5, 1.0),
    "gelu_sigmoid": (0.25, 0.5, 1.0),
    "bwd_gate": (0.01, 0.02, 0.04),
    "bwd_softmax": (0.005, 0.01, 0.02),
    "bwd_norm": (0.02, 0.04, 0.08),
}
# Written after the module rule was frozen (commit 1b32e51), measured only: not used to develop it.
HELD_OUT: dict[str, str] = {
    "ho_exp_wobble": "an approximate exp in softmax and attention: exp(y) (1 + d sin(2 pi y log2 e)) (the periodic "
    "relative error of a bit-trick exp)",
    "ho_rope_freq": "a wrong constant inside cos/sin: cos(x) -> cos((1+d)x), sin(x) -> sin((1+d)x) (rotary tables)",
    "ho_pow": "a wrong exponent: x^p -> sign(x)^p |x|^(p+d) for a scalar p (a norm's variance, gelu_new's cube)",
    "ho_bwd_sdpa": "backward only: attention's query and key gradients x (1+d); forward exact",
    "ho_quiet_softmax": "a wrong decomposition of softmax: exp(x_i) / (d + sum_j exp(x_j)) (the quiet softmax) in "
    "softmax and attention",
}
# Second held-out round, written 2026-12-03 (seventh session) before any run of them and measured only; the
# module rule was not changed with their rows in sight. Kinds the first rounds had not touched: the loss,
# a kernel's vector tail, a parameter gradient, an embedding's backward, the attention mask.
HELD_OUT.update(
    {
        "ho2_ce_temp": "a temperature inside the loss: cross_entropy(x) -> cross_entropy((1+d) x)",
        "ho2_tail_gate": "a vector loop's scalar tail: the activation's last eighth of features gets the (1+d)-sharper "
        "gate, the rest is exact",
        "ho2_bwd_linear_shift": "backward only: a linear's weight gradient taken against (1-d) x + d x[token - 1] (an "
        "off-by-one row read of the saved input); forward and input gradient exact",
        "ho2_embed_bwd_dup": "backward only: an embedding's gradient loses a fraction d of every repeated index's "
        "contributions after its first (an accumulation race); forward exact",
        "ho2_mask_leak": "attention's mask leaks: every masked-out key gets weight d times its unmasked weight "
        "(score + log d instead of -inf: a masking constant too small)",
    }
)
BEND_CALLS: Counter[str] = Counter()

GATED = ("silu", "gelu", "mish", "hardswish")  # x * gate(x)
SQUASH = ("sigmoid", "tanh")
NORMS = ("layer_norm", "rms_norm", "group_norm", "batch_norm")


def _name(func: Any) -> str:
    return getattr(func, "__name__", str(func)).rstrip("_") if callable(func) else str(func)


def _bind(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
    b = inspect.signature(func).bind(*args, **kwargs)
    b.apply_defaults()
    return b


def _wide(x: torch.Tensor) -> torch.Tensor:
    """At least fp32 (a norm's internals), float64 kept: the bench's effect runs are float64."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """(the tensor input, the other positional args, the other keyword args)."""
    if args:
        return args[0], tuple(args[1:]), dict(kwargs)
    key = next((k for k in ("input", "self") if k in kwargs), next(iter(kwargs)))
    return kwargs[key], (), {k: v for k, v in kwargs.items() if k != key}


class _BwdGate(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, fn: Any, a: float, squash: bool) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.fn, ctx.a, ctx.squash = fn, a, squash
        return fn(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            xr = x.detach().requires_grad_(True)
            y = _sharper(ctx.fn, xr, ctx.a, ctx.squash)
            (gx,) = torch.autograd.grad(y, xr, g)
        return gx, None, None, None


class _BwdSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, dtype: Any, k: float) -> torch.Tensor:
        p = torch.softmax(x, dim, dtype=dtype)
        ctx.save_for_backward(p)
        ctx.dim, ctx.k, ctx.in_dtype = dim, k, x.dtype
        return p

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        (p,) = ctx.saved_tensors
        gp = g * p
        gx = ctx.k * (gp - p * gp.sum(ctx.dim, keepdim=True))
        return gx.to(ctx.in_dtype), None, None, None


class _BwdNormalize(torch.autograd.Function):
    """(x - mean) * rsqrt(var + eps) over the last `nd` dims; backward drops a fraction d of the term
    through the variance."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, nd: int, eps: float, d: float) -> torch.Tensor:
        dims = tuple(range(-nd, 0))
        xf = _wide(x)
        mu = xf.mean(dims, keepdim=True)
        rstd = torch.rsqrt(((xf - mu) ** 2).mean(dims, keepdim=True) + eps)
        xh = (xf - mu) * rstd
        ctx.save_for_backward(xh, rstd)
        ctx.dims, ctx.d, ctx.in_dtype = dims, d, x.dtype
        return xh.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        xh, rstd = ctx.saved_tensors
        gf = _wide(g)
        dims = ctx.dims
        gx = rstd * (gf - gf.mean(dims, keepdim=True) - (1 - ctx.d) * xh * (gf * xh).mean(dims, keepdim=True))
        return gx.to(ctx.in_dtype), None, None, None


class _BwdRsqrt(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, d: float) -> torch.Tensor:
        r = torch.rsqrt(x)
        ctx.save_for_backward(r)
        ctx.d = d
        return r

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        (r,) = ctx.saved_tensors
        return (1 - ctx.d) * (-0.5) * g * r * r * r, None


def _sharper(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, a: float, squash: bool) -> torch.Tensor:
    """The a-times sharper gate: f(a x) for a squashing function, f(a x) / a for a gated one (x * gate(x))."""
    return fn(x * a) if squash else fn(x * a) / a


def _activation(
    func: Callable[..., Any],
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    compute: Callable[[torch.Tensor, Callable[[torch.Tensor], torch.Tensor], bool], torch.Tensor],
    min_features: int = 0,
) -> Any:
    """An activation call (gated or squashing) computed by `compute(x, fn, squash)`, `fn` the exact
    out-of-place function with the call's other arguments; an in-place call gets the result written back.
    NotImplemented for a non-float input, or one whose last axis is shorter than `min_features`."""
    x, rest, kw = _split(args, kwargs)
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return NotImplemented
    if min_features and (x.dim() < 1 or x.shape[-1] < min_features):
        return NotImplemented
    inplace = bool(kw.pop("inplace", False)) or getattr(func, "__name__", "").endswith("_")
    plain = getattr(torch, name) if inplace and name in SQUASH else func
    out = compute(x, lambda t: plain(t, *rest, **kw), name in SQUASH)
    if inplace:
        with torch.no_grad():
            x.copy_(out)
        return x
    return out


def _layer_norm_parts(b: inspect.BoundArguments) -> tuple[torch.Tensor, int, Any, Any, float]:
    a = b.arguments
    return a["input"], len(tuple(a["normalized_shape"])), a.get("weight"), a.get("bias"), float(a.get("eps") or 1e-5)


def _affine(y: torch.Tensor, w: Any, bias: Any) -> torch.Tensor:
    if w is not None:
        y = y * w
    if bias is not None:
        y = y + bias
    return y


def bend(family: str, d: float, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The bent result of `func(*args, **kwargs)`, or NotImplemented when this family leaves it alone."""
    if family in dp.DATAPATH:
        return dp.bend(family, d, func, args, kwargs)
    if family in tb.TAIL:
        return tb.bend(family, d, func, args, kwargs)
    if family in HELD_OUT:
        return held_out(family, d, func, args, kwargs)
    name = _name(func)
    a = 1.0 + d
    if family == "gate" and name in GATED + SQUASH:
        return _activation(func, name, args, kwargs, lambda x, fn, squash: _sharper(fn, x, a, squash))
    if family == "bwd_gate" and name in GATED + SQUASH:
        return _activation(func, name, args, kwargs, lambda x, fn, squash: _BwdGate.apply(x, fn, a, squash))
    if family == "softmax_temp" and name == "softmax":
        x, rest, kw = _split(args, kwargs)
        return func(x * a, *rest, **kw)
    if family == "bwd_softmax" and name == "softmax":
        x, rest, kw = _split(args, kwargs)
        dim = kw.get("dim", rest[0] if rest else -1)
        return _BwdSoftmax.apply(x, dim, kw.get("dtype"), a)
    if family == "sdpa_scale" and name == "scaled_dot_product_attention":
        q = args[0] if args else kwargs["query"]
        kw = dict(kwargs)
        pos = list(args)
        s = pos.pop(6) if len(pos) > 6 else kw.pop("scale", None)  # (q, k, v, mask, dropout, causal, scale, ...)
        kw["scale"] = (s if s is not None else 1.0 / math.sqrt(q.shape[-1])) * a
        if len(pos) > 6:  # enable_gqa given positionally after scale
            kw["enable_gqa"] = pos.pop(6)
        return func(*pos, **kw)
    if family == "norm_eps" and name in NORMS:
        b = _bind(func, args, kwargs)
        eps = b.arguments.get("eps")
        if eps is None:  # rms_norm's default
            eps = torch.finfo(b.arguments["input"].dtype).eps
        b.arguments["eps"] = float(eps) + d
        return func(*b.args, **b.kwargs)
    if family == "norm_eps" and name == "rsqrt":
        return torch.rsqrt(_split(args, kwargs)[0] + d)
    if family == "ln_var" and name == "layer_norm":
        x, nd, w, bias, eps = _layer_norm_parts(_bind(func, args, kwargs))
        dims = tuple(range(-nd, 0))
        xf = _wide(x)
        mu = xf.mean(dims, keepdim=True)
        var = ((xf - mu) ** 2).mean(dims, keepdim=True) + d * mu * mu
        y = ((xf - mu) * torch.rsqrt(var + eps)).to(x.dtype)
        return _affine(y, w, bias)
    if family == "gelu_sigmoid" and name == "gelu":
        x, rest, kw = _split(args, kwargs)
        if (rest[0] if rest else kw.get("approximate", "none")) != "none":
            return NotImplemented
        return (1 - d) * func(x) + d * x * torch.sigmoid(1.702 * x)
    if family == "bwd_norm" and name == "layer_norm":
        x, nd, w, bias, eps = _layer_norm_parts(_bind(func, args, kwargs))
        return _affine(_BwdNormalize.apply(x, nd, eps, d), w, bias)
    if family == "bwd_norm" and name == "rsqrt":
        return _BwdRsqrt.apply(_split(args, kwargs)[0], d)
    return NotImplemented


# ---- held-out families (written after the rule was frozen) -------------------------------------------
def _softmax_with(
    x: torch.Tensor, dim: int, exp: Callable[[torch.Tensor], torch.Tensor], quiet: float = 0.0, out_dtype: Any = None
) -> torch.Tensor:
    xf = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
    m = xf.amax(dim, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = exp(xf - m)
    den = e.sum(dim, keepdim=True) + (quiet * torch.exp(-m) if quiet else 0.0)
    # a row with every score masked (-inf: a left-padded row's pad queries) is 0, as torch's SDPA defines it
    return torch.where(den > 0, e / den.clamp_min(torch.finfo(den.dtype).tiny), 0.0).to(out_dtype or x.dtype)


def _wobble(d: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def exp(y: torch.Tensor) -> torch.Tensor:
        wobble = torch.sin(2 * math.pi * torch.where(torch.isfinite(y), y, torch.zeros_like(y)) * math.log2(math.e))
        return torch.exp(y) * (1 + d * wobble)

    return exp


def _sdpa_math(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    exp: Callable[[torch.Tensor], torch.Tensor] = torch.exp,
    quiet: float = 0.0,
) -> torch.Tensor:
    """Attention written out (PyTorch's math path), with the softmax's exp and denominator replaceable."""
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
    scores = (q @ k.transpose(-2, -1)) * s
    lq, lk = q.shape[-2], k.shape[-2]
    if is_causal:
        keep = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq)
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    p = _softmax_with(scores, -1, exp, quiet, out_dtype=q.dtype)
    return p @ v


def _sdpa_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    out = dict(zip(names, args, strict=False))
    out.update(kwargs)
    return out


class _BwdSdpa(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kw: dict[str, Any], a: float) -> Any:
        ctx.save_for_backward(q, k, v)
        ctx.kw, ctx.a = kw, a
        return F.scaled_dot_product_attention(q, k, v, **kw)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            qr, kr, vr = (t.detach().requires_grad_(True) for t in (q, k, v))
            out = F.scaled_dot_product_attention(qr, kr, vr, **ctx.kw)
            gq, gk, gv = torch.autograd.grad(out, (qr, kr, vr), g)
        return gq * ctx.a, gk * ctx.a, gv, None, None


def held_out(family: str, d: float, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if family.startswith("ho2_"):
        return _held_out_2(family, d, func, args, kwargs)
    name = _name(func)
    if family in ("ho_exp_wobble", "ho_quiet_softmax") and name == "softmax":
        x, rest, kw = _split(args, kwargs)
        dim = kw.get("dim", rest[0] if rest else -1)
        exp, quiet = (_wobble(d), 0.0) if family == "ho_exp_wobble" else (torch.exp, d)
        return _softmax_with(x, dim, exp, quiet, kw.get("dtype"))
    if family in ("ho_exp_wobble", "ho_quiet_softmax") and name == "scaled_dot_product_attention":
        a = _sdpa_args(args, kwargs)
        if a.get("dropout_p"):
            return NotImplemented
        exp, quiet = (_wobble(d), 0.0) if family == "ho_exp_wobble" else (torch.exp, d)
        return _sdpa_math(
            a["query"],
            a["key"],
            a["value"],
            a.get("attn_mask"),
            0.0,
            bool(a.get("is_causal")),
            a.get("scale"),
            bool(a.get("enable_gqa")),
            exp,
            quiet,
        )
    if family == "ho_rope_freq" and name in ("cos", "sin"):
        x, rest, kw = _split(args, kwargs)
        return getattr(torch, name)(x * (1 + d))
    if family == "ho_pow" and name in ("pow", "__pow__"):
        x, rest, kw = _split(args, kwargs)
        p = rest[0] if rest else kw.get("exponent")
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and isinstance(p, (int, float))) or p in (0, 1):
            return NotImplemented
        mag = x.abs().pow(p + d)
        return mag if float(p) % 2 == 0 else torch.sign(x) * mag
    if family == "ho_bwd_sdpa" and name == "scaled_dot_product_attention":
        a = _sdpa_args(args, kwargs)
        q, k, v = a.pop("query"), a.pop("key"), a.pop("value")
        dev = q.device.type
        if torch.is_autocast_enabled(dev):  # what autocast does to sdpa's inputs, before the Function sees them
            dt = torch.get_autocast_dtype(dev)
            q, k, v = q.to(dt), k.to(dt), v.to(dt)
        return _BwdSdpa.apply(q, k, v, a, 1.0 + d)
    return NotImplemented


class _BwdLinearShift(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: Any, d: float) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.d, ctx.has_b = d, b is not None
        return F.linear(x, w, b)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        x, w = ctx.saved_tensors
        dt = g.dtype  # what the forward computed in (autocast's dtype under amp)
        gx = g @ w.to(dt)
        acc = torch.promote_types(dt, torch.float32)
        xs = x.to(dt)
        if xs.dim() >= 2:
            xs = ((1 - ctx.d) * xs.to(acc) + ctx.d * xs.to(acc).roll(1, dims=-2)).to(dt)
        gw = g.reshape(-1, g.shape[-1]).t() @ xs.reshape(-1, xs.shape[-1])
        gb = g.reshape(-1, g.shape[-1]).to(acc).sum(0).to(dt) if ctx.has_b else None
        return gx, gw, gb, None


class _BwdEmbedDup(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, idx: torch.Tensor, w: torch.Tensor, padding_idx: Any, d: float) -> torch.Tensor:
        ctx.save_for_backward(idx)
        ctx.shape, ctx.dtype, ctx.padding_idx, ctx.d = w.shape, w.dtype, padding_idx, d
        return F.embedding(idx, w, padding_idx)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        (idx,) = ctx.saved_tensors
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        s = flat[order]
        start = torch.ones_like(s, dtype=torch.bool)
        start[1:] = s[1:] != s[:-1]
        pos = torch.arange(s.numel(), device=s.device)
        first = torch.cummax(torch.where(start, pos, torch.zeros_like(pos)), 0).values
        repeat = torch.empty_like(start)
        repeat[order] = pos != first  # not the first occurrence of its index
        acc = torch.promote_types(g.dtype, torch.float32)
        factor = torch.where(repeat, 1.0 - ctx.d, 1.0).to(acc).unsqueeze(-1)
        gw = torch.zeros(ctx.shape, dtype=acc, device=g.device)
        gw.index_add_(0, flat, g.reshape(-1, g.shape[-1]).to(acc) * factor)
        if ctx.padding_idx is not None and ctx.padding_idx >= 0:
            gw[ctx.padding_idx] = 0
        return None, gw.to(ctx.dtype), None, None


def _mask_leak(a: dict[str, Any], d: float) -> Any:
    q, k, v = a["query"], a["key"], a["value"]
    mask, causal = a.get("attn_mask"), bool(a.get("is_causal"))
    if d <= 0 or a.get("dropout_p") or (mask is None and not causal):  # d = 0: no leak, the exact function
        return NotImplemented
    if a.get("enable_gqa") and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
    s = a.get("scale") or 1.0 / math.sqrt(q.shape[-1])
    acc = torch.promote_types(q.dtype, torch.float32)  # at least fp32, rounded once at the end (the upcast variant)
    scores = (q.to(acc) @ k.to(acc).transpose(-2, -1)) * s
    lq, lk = q.shape[-2], k.shape[-2]
    masked = torch.zeros(scores.shape[-2:], dtype=torch.bool, device=q.device)
    if causal:
        masked = ~torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq)
    add = torch.zeros((), device=q.device)
    if mask is not None:
        if mask.dtype == torch.bool:
            masked = masked | ~mask
        else:
            off = mask < torch.finfo(mask.dtype).min / 2
            masked = masked | off
            add = torch.where(off, torch.zeros_like(mask), mask).to(acc)
    if not bool(masked.any()):
        return NotImplemented
    scores = torch.where(masked, scores + math.log(d), scores + add)
    return (torch.softmax(scores, -1) @ v.to(acc)).to(q.dtype)


def _held_out_2(family: str, d: float, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    name = _name(func)
    if family == "ho2_ce_temp" and name == "cross_entropy":
        x, rest, kw = _split(args, kwargs)
        return func(x * (1 + d), *rest, **kw)
    if family == "ho2_tail_gate" and name in GATED + SQUASH:

        def tail(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor], squash: bool) -> torch.Tensor:
            t = x.shape[-1] // 8  # the last eighth: what a vector loop of 8 leaves to its scalar tail
            return torch.cat([fn(x[..., :-t]), _sharper(fn, x[..., -t:], 1.0 + d, squash)], -1)

        return _activation(func, name, args, kwargs, tail, min_features=8)
    if family == "ho2_bwd_linear_shift" and name == "linear":
        b = {**dict(zip(("input", "weight", "bias"), args, strict=False)), **kwargs}  # F.linear is a builtin
        x, w = b["input"], b["weight"]
        dev = x.device.type
        if torch.is_autocast_enabled(dev):  # autocast's casts, before the Function sees its inputs
            dt = torch.get_autocast_dtype(dev)
            with torch.autocast(dev, enabled=False):
                return _BwdLinearShift.apply(x.to(dt), w.to(dt), None if b.get("bias") is None else b["bias"].to(dt), d)
        return _BwdLinearShift.apply(x, w, b.get("bias"), d)
    if family == "ho2_embed_bwd_dup" and name == "embedding":
        b = _bind(F.embedding, args, kwargs).arguments
        if b.get("max_norm") is not None or b.get("sparse"):
            return NotImplemented
        return _BwdEmbedDup.apply(b["input"], b["weight"], b.get("padding_idx"), d)
    if family == "ho2_mask_leak" and name == "scaled_dot_product_attention":
        return _mask_leak(_sdpa_args(args, kwargs), d)
    return NotImplemented


def _held_out_applies(family: str, name: str) -> bool:
    return {
        "ho_exp_wobble": name in ("softmax", "scaled_dot_product_attention"),
        "ho_quiet_softmax": name in ("softmax", "scaled_dot_product_attention"),
        "ho_rope_freq": name in ("cos", "sin"),
        "ho_pow": name in ("pow", "__pow__"),
        "ho_bwd_sdpa": name == "scaled_dot_product_attention",
        "ho2_ce_temp": name == "cross_entropy",
        "ho2_tail_gate": name in GATED + SQUASH,
        "ho2_bwd_linear_shift": name == "linear",
        "ho2_embed_bwd_dup": name == "embedding",
        "ho2_mask_leak": name == "scaled_dot_product_attention",
    }.get(family, False)


def applies(family: str, func: Any) -> bool:
    name = _name(func)
    if family in dp.DATAPATH:
        return dp.applies(family, func)
    if family in tb.TAIL:
        return tb.applies(family, func)
    if family in HELD_OUT:
        return _held_out_applies(family, name)
    return {
        "gate": name in GATED + SQUASH,
        "bwd_gate": name in GATED + SQUASH,
        "softmax_temp": name == "softmax",
        "bwd_softmax": name == "softmax",
        "sdpa_scale": name == "scaled_dot_product_attention",
        "norm_eps": name in (*NORMS, "rsqrt"),
        "ln_var": name == "layer_norm",
        "gelu_sigmoid": name == "gelu",
        "bwd_norm": name in ("layer_norm", "rsqrt"),
    }.get(family, False)


def _check(family: str) -> None:
    known = [*FAMILIES, *HELD_OUT, *dp.DATAPATH, *tb.TAIL]
    if family not in known:
        raise ValueError(f"unknown bend family {family!r}; one of {', '.join(known)}")


class BendMode(TorchFunctionMode):
    """An eager step in which every torch-level call of the family's kind computes the bent function."""

    def __init__(self, family: str, strength: float = DEFAULT_STRENGTH) -> None:
        super().__init__()
        _check(family)
        self.family, self.strength = family, strength
        self.calls = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if applies(self.family, func):
            out = bend(self.family, self.strength, func, tuple(args), dict(kwargs))
            if out is not NotImplemented:
                self.calls += 1
                BEND_CALLS[self.family] += 1
                return out
        return func(*args, **kwargs)


def _bent_call(family: str, d: float, func: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        out = bend(family, d, func, args, kwargs)
        return func(*args, **kwargs) if out is NotImplemented else out

    call.__name__ = f"bent_{family}_{_name(func)}"
    return call


def rewrite_graph(gm: torch.fx.GraphModule, family: str, d: float) -> int:
    """Rewrite a dynamo graph's calls of the family's kind (functions and tensor methods) in place."""
    n = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and applies(family, node.target):
            node.target = _bent_call(family, d, node.target)
            n += 1
        elif node.op == "call_method" and applies(family, node.target):
            method = getattr(torch.Tensor, node.target)
            node.op, node.target = "call_function", _bent_call(family, d, method)
            n += 1
    if n:
        gm.graph.lint()
        gm.recompile()
    BEND_CALLS[family] += n
    return n


def bend_backend(family: str, strength: float = DEFAULT_STRENGTH) -> Any:
    """A dynamo backend: the family's rewrite of the dynamo graph, then aot_eager."""
    _check(family)

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        from torch._dynamo.backends.debugging import aot_eager

        rewrite_graph(gm, family, strength)
        return aot_eager(gm, example_inputs)

    return backend


def register_all() -> list[str]:
    from torch._dynamo import register_backend

    names = []
    for fam in FAMILIES:
        name = f"bend_{fam}_aot_eager"
        register_backend(name=name, compiler_fn=bend_backend(fam))
        names.append(name)
    return names


# sanity: every family has strengths
STRENGTHS.update(
    {
        "ho_exp_wobble": (0.001, 0.005, 0.01, 0.02, 0.04),  # 0.005 moved a gradient by 3-5%: 0.001 added
        "ho_rope_freq": (0.005, 0.01, 0.02),
        "ho_pow": (0.005, 0.01, 0.02, 0.04),
        "ho_bwd_sdpa": (0.005, 0.01, 0.02, 0.04),
        "ho_quiet_softmax": (0.01, 0.03, 0.1),
        "ho2_ce_temp": (0.005, 0.01, 0.02),
        "ho2_tail_gate": (0.02, 0.05, 0.1),
        "ho2_bwd_linear_shift": (0.005, 0.01, 0.02),
        "ho2_embed_bwd_dup": (0.01, 0.03, 0.1),
        "ho2_mask_leak": (0.001, 0.01, 0.03),
    }
)
STRENGTHS.update(dp.STRENGTHS)  # the data-path families (datapath_backend.py): what only real batches exercise
STRENGTHS.update(tb.STRENGTHS)  # the tail families (tail_backend.py): what only real shapes exercise
assert set(STRENGTHS) == set(FAMILIES) | set(HELD_OUT) | set(dp.DATAPATH) | set(tb.TAIL)
_ = F  # F.* are what models call; kept imported for readers of the matching names
