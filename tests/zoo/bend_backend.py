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
    "gate": (0.005, 0.01, 0.02, 0.04, -0.02),
    "softmax_temp": (0.005, 0.01, 0.02, 0.04),
    "sdpa_scale": (0.005, 0.01, 0.02, 0.04),
    "norm_eps": (0.005, 0.01, 0.02, 0.04),
    "ln_var": (0.25, 0.5, 1.0),
    "gelu_sigmoid": (0.25, 0.5, 1.0),
    "bwd_gate": (0.01, 0.02, 0.04, 0.08),
    "bwd_softmax": (0.005, 0.01, 0.02, 0.04),
    "bwd_norm": (0.01, 0.02, 0.04, 0.08),
}
HELD_OUT: dict[str, str] = {}
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
            y = ctx.fn(xr * ctx.a) if ctx.squash else ctx.fn(xr * ctx.a) / ctx.a
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
        xf = x.float()
        mu = xf.mean(dims, keepdim=True)
        rstd = torch.rsqrt(((xf - mu) ** 2).mean(dims, keepdim=True) + eps)
        xh = (xf - mu) * rstd
        ctx.save_for_backward(xh, rstd)
        ctx.dims, ctx.d, ctx.in_dtype = dims, d, x.dtype
        return xh.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        xh, rstd = ctx.saved_tensors
        gf = g.float()
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


def _layer_norm_parts(b: inspect.BoundArguments) -> tuple[torch.Tensor, int, Any, Any, float]:
    a = b.arguments
    return a["input"], len(tuple(a["normalized_shape"])), a.get("weight"), a.get("bias"), float(a.get("eps") or 1e-5)


def _affine(y: torch.Tensor, w: Any, bias: Any) -> torch.Tensor:
    if w is not None:
        y = y * w
    if bias is not None:
        y = y + bias
    return y


def bend(family: str, d: float, func: Callable[..., Any], args: tuple[Any, ...],
         kwargs: dict[str, Any]) -> Any:  # fmt: skip
    """The bent result of `func(*args, **kwargs)`, or NotImplemented when this family leaves it alone."""
    name = _name(func)
    a = 1.0 + d
    if family in ("gate", "bwd_gate") and name in GATED + SQUASH:
        x, rest, kw = _split(args, kwargs)
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
            return NotImplemented
        inplace = bool(kw.pop("inplace", False)) or getattr(func, "__name__", "").endswith("_")
        plain = getattr(torch, name) if inplace and name in SQUASH else func
        fn = (lambda t: plain(t, *rest, **kw))
        if family == "gate":
            out = fn(x * a) if name in SQUASH else fn(x * a) / a
        else:
            out = _BwdGate.apply(x, fn, a, name in SQUASH)
        if inplace:
            with torch.no_grad():
                x.copy_(out)
            return x
        return out
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
        xf = x.float()
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


def applies(family: str, func: Any) -> bool:
    name = _name(func)
    return {
        "gate": name in GATED + SQUASH, "bwd_gate": name in GATED + SQUASH,
        "softmax_temp": name == "softmax", "bwd_softmax": name == "softmax",
        "sdpa_scale": name == "scaled_dot_product_attention", "norm_eps": name in (*NORMS, "rsqrt"),
        "ln_var": name == "layer_norm", "gelu_sigmoid": name == "gelu", "bwd_norm": name in ("layer_norm", "rsqrt"),
    }.get(family, False)  # fmt: skip


def _check(family: str) -> None:
    if family not in FAMILIES and family not in HELD_OUT:
        raise ValueError(f"unknown bend family {family!r}; one of {', '.join([*FAMILIES, *HELD_OUT])}")


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
assert set(STRENGTHS) == set(FAMILIES)
_ = F  # F.* are what models call; kept imported for readers of the matching names
