"""Test-only dynamo backends that model a buggy compiler: they multiply the output of ONE aten op kind
by 1.01 (a 1% error) and otherwise compile exactly like aot_eager or inductor.

Import it as a plugin (`bringup --import perturb_backend ...`, with tests/zoo on PYTHONPATH) to get
backends named `perturb_<kind>_<base>`, kind in KINDS, base in aot_eager | inductor. aot_eager
rewrites the forward and backward aten graphs that AOTAutograd hands it; inductor rewrites its
post-grad graphs (a post_grad_custom_pre_pass), i.e. after its decompositions, so e.g. a layer norm
shows up there as the rsqrt of its variance. `PERTURBED[name]` counts the rewritten nodes.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from typing import Any

import torch
from torch._dynamo import register_backend
from torch.utils._python_dispatch import TorchDispatchMode

FACTOR = 1.01
aten = torch.ops.aten


def _kinds() -> dict[str, tuple[Any, ...]]:
    def ops(*names: str) -> tuple[Any, ...]:
        out = []
        for n in names:
            base, _, overload = n.partition(".")
            packet = getattr(aten, base, None)
            if packet is not None:
                out.append(getattr(packet, overload or "default"))
        return tuple(out)

    return {
        "mm": ops("mm", "addmm", "bmm", "baddbmm"),
        "softmax": ops("_softmax", "_safe_softmax"),
        "norm": ops("native_layer_norm", "_fused_rms_norm", "rsqrt"),
        "act": ops("gelu", "silu", "relu"),
        "add": ops("add.Tensor"),
        "sdpa": ops(
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_flash_attention",
        ),
    }


KINDS = tuple(_kinds())
# multi-output ops: which output is "the" output
_FIRST_OUTPUT = {
    "native_layer_norm",
    "_fused_rms_norm",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_attention_math",
}
PERTURBED: Counter[str] = Counter()


def perturb_graph(graph: torch.fx.Graph, kind: str, tag: str) -> int:
    targets = _kinds()[kind]
    n = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in targets:
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and not val.is_floating_point():
            continue  # integer adds are index arithmetic, not numerics
        name = node.target._opname if hasattr(node.target, "_opname") else str(node.target)
        if name in _FIRST_OUTPUT:
            outs = [u for u in node.users if u.target is operator.getitem and u.args[1] == 0]
        else:
            outs = [node]
        for out in outs:
            with graph.inserting_after(out):
                scaled = graph.call_function(aten.mul.Tensor, (out, FACTOR))
            scaled.meta.update({k: v for k, v in out.meta.items() if k in ("val", "tensor_meta", "example_value")})
            out.replace_all_uses_with(scaled, delete_user_cb=lambda u, s=scaled: u is not s)
            n += 1
    PERTURBED[tag] += n
    return n


def _aot_eager_backend(kind: str, tag: str) -> Any:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        perturb_graph(gm.graph, kind, tag)
        gm.graph.lint()
        gm.recompile()
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler)


class _Pass:
    """A post-grad custom pass (inductor calls it on the forward and the backward graph)."""

    def __init__(self, kind: str, tag: str) -> None:
        self.kind, self.tag = kind, tag

    def __call__(self, graph: torch.fx.Graph) -> None:
        perturb_graph(graph, self.kind, self.tag)

    def uuid(self) -> str:  # part of inductor's FX-graph cache key: perturbed graphs never alias clean ones
        return f"perturb-{self.kind}-{FACTOR}"


def _inductor_backend(kind: str, tag: str) -> Any:
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class Pass(_Pass, CustomGraphPass):  # type: ignore[misc]
        pass

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        # no FX-graph cache: a cache hit would skip the pass's counting (the code would still be perturbed)
        patches = {"post_grad_custom_pre_pass": Pass(kind, tag), "fx_graph_cache": False}
        return compile_fx(gm, example_inputs, config_patches=patches)

    return backend


def register_all() -> list[str]:
    names = []
    for kind in KINDS:
        for base, make in (("aot_eager", _aot_eager_backend), ("inductor", _inductor_backend)):
            name = f"perturb_{kind}_{base}"
            register_backend(name=name, compiler_fn=make(kind, name))
            names.append(name)
    return names


NAMES = register_all()


# ---- perturbation families (bench/verdict_power.py) ---------------------------------------------
# Each family models one way a device kernel can be wrong. A family rewrites the aten graphs that
# AOTAutograd hands its compiler (forward and backward) and then runs them like aot_eager; it counts
# the nodes it rewrote (`FAMILY_NODES[family]`): a family that rewrote no node of a model's graph is
# not applicable to that model and proves nothing about it.
ACT_OPS = (
    "gelu",
    "silu",
    "relu",
    "tanh",
    "sigmoid",
    "elu",
    "leaky_relu",
    "hardtanh",
    "mish",
    "hardswish",
    "hardsigmoid",
    "softplus",
)
NORM_OPS = (
    "native_layer_norm",
    "_fused_rms_norm",
    "rsqrt",
    "native_batch_norm",
    "_native_batch_norm_legit_functional",
    "_native_batch_norm_legit",
    "native_group_norm",
)
ATTN_OPS = (
    "_softmax",
    "_safe_softmax",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_attention_math",
)
SDPA_OPS = ATTN_OPS[2:]
MM_OPS = ("mm", "addmm", "bmm", "baddbmm")
LOWACC_CHUNK = 4  # products summed in fp32 before the running sum is rounded to the low dtype
FAMILIES = {
    "act": "activation output x1.01 (gelu, silu, relu, tanh, sigmoid, ...)",
    "norm": "normalisation output x1.01 (layer/rms/batch/group norm, rsqrt of a variance)",
    "attn": "attention probabilities / SDPA output x1.01 (softmax, SDPA kernels)",
    "ascale": "attention scale x1.01 (SDPA's scale; the softmax input)",
    "mm_lowacc": f"matmul accumulating in bf16/fp16 (running sum rounded every {LOWACC_CHUNK} products)",
    "add": "tensor + tensor (residual adds, grad accumulation) x1.005",
    "nobias": "bias dropped (addmm -> mm, convolution bias -> None)",
}
FAMILY_NODES: Counter[str] = Counter()


def _opname(target: Any) -> str:
    return target._opname if hasattr(target, "_opname") else str(target)


def _is_float(node: Any) -> bool:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.is_floating_point()


def _scale_output(graph: torch.fx.Graph, node: torch.fx.Node, factor: float) -> None:
    outs = (
        [u for u in node.users if u.target is operator.getitem and u.args[1] == 0]
        if _opname(node.target) in _FIRST_OUTPUT | set(NORM_OPS) - {"rsqrt"}
        else [node]
    )
    for out in outs:
        with graph.inserting_after(out):
            scaled = graph.call_function(aten.mul.Tensor, (out, factor))
        scaled.meta.update({k: v for k, v in out.meta.items() if k in ("val", "tensor_meta", "example_value")})
        out.replace_all_uses_with(scaled, delete_user_cb=lambda u, s=scaled: u is not s)


def _low_dtype(*ts: torch.Tensor) -> torch.dtype:
    return torch.float16 if any(t.dtype == torch.float16 for t in ts) else torch.bfloat16


def _lowacc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b (mm or bmm) with the running sum over K rounded to bf16 (fp16 for fp16 inputs) every
    LOWACC_CHUNK products: a device that accumulates in the low dtype."""
    low = _low_dtype(a, b)
    k = a.shape[-1]
    acc: torch.Tensor | None = None
    for k0 in range(0, k, LOWACC_CHUNK):
        part = torch.matmul(a[..., k0 : k0 + LOWACC_CHUNK].float(), b[..., k0 : k0 + LOWACC_CHUNK, :].float())
        acc = part.to(low) if acc is None else (acc.float() + part).to(low)
    if acc is None:
        acc = torch.zeros(*a.shape[:-1], b.shape[-1], dtype=low)
    return acc.to(a.dtype)


def lowacc_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _lowacc(a, b)


def lowacc_addmm(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    return (beta * bias + alpha * _lowacc(a, b)).to(a.dtype)


def _rewrite_family(graph: torch.fx.Graph, family: str) -> int:
    n = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        name = _opname(node.target)
        if family == "act" and name in ACT_OPS and _is_float(node):
            _scale_output(graph, node, FACTOR)
        elif family == "norm" and name in NORM_OPS and (_is_float(node) or name != "rsqrt"):
            _scale_output(graph, node, FACTOR)
        elif family == "attn" and name in ATTN_OPS:
            _scale_output(graph, node, FACTOR)
        elif family == "ascale" and name in ("_softmax", "_safe_softmax"):
            with graph.inserting_before(node):
                x = graph.call_function(aten.mul.Tensor, (node.args[0], FACTOR))
            x.meta.update({k: v for k, v in node.args[0].meta.items() if k in ("val", "tensor_meta")})
            node.args = (x, *node.args[1:])
        elif family == "ascale" and name in SDPA_OPS:
            q = node.args[0].meta.get("val")
            scale = node.kwargs.get("scale") or (1.0 / math.sqrt(q.shape[-1]))
            node.kwargs = {**node.kwargs, "scale": scale * FACTOR}
        elif family == "mm_lowacc" and name in MM_OPS and _is_float(node):
            if name in ("mm", "bmm"):
                node.target = lowacc_mm
            else:
                beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
                node.target = lowacc_addmm
                node.kwargs = {"beta": beta, "alpha": alpha}
        elif family == "add" and name == "add" and node.target == aten.add.Tensor and _is_float(node):
            a, b = node.args[0], node.args[1]
            if not (_is_float(a) and _is_float(b)) or a.meta["val"].shape != b.meta["val"].shape:
                continue
            _scale_output(graph, node, 1.005)
        elif family == "nobias" and name == "addmm" and node.kwargs.get("beta", 1) != 0:
            node.target = aten.mm.default
            node.args = (node.args[1], node.args[2])
            node.kwargs = {}
        elif family == "nobias" and name == "convolution" and node.args[2] is not None:
            node.args = (node.args[0], node.args[1], None, *node.args[3:])
        else:
            continue
        n += 1
    FAMILY_NODES[family] += n
    return n


def family_backend(family: str) -> Any:
    """A dynamo backend: AOTAutograd, then the family's rewrite of the forward and backward graphs, run
    like aot_eager (the graph module's own Python forward)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    if family not in FAMILIES:
        raise ValueError(f"unknown perturbation family {family!r}; one of {', '.join(FAMILIES)}")

    def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        _rewrite_family(gm.graph, family)
        gm.graph.lint()
        gm.recompile()
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler)


class FamilyMode(TorchDispatchMode):
    """The same perturbation families applied in eager mode: a TorchDispatchMode that rewrites each
    matching aten call (forward and backward) by `_rewrite_family`'s rules, with no graph to trace.
    bench/verdict_power.py uses it (`--inject mode`, ~20x cheaper than a dynamo backend per run);
    FAMILY_NODES counts the calls it perturbed. Eager runs in-place ops (`relu_`, `add_`) where
    functionalized graphs show `relu`, `add`: those are perturbed too, in place."""

    def __init__(self, family: str) -> None:
        super().__init__()
        if family not in FAMILIES:
            raise ValueError(f"unknown perturbation family {family!r}; one of {', '.join(FAMILIES)}")
        self.family = family

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        name, f = _opname(func), self.family
        inplace = name.endswith("_") and not name.startswith("_")
        base = name[:-1] if inplace else name
        scale: float | None = None
        if f in ("act", "norm", "attn") and base in {"act": ACT_OPS, "norm": NORM_OPS, "attn": ATTN_OPS}[f]:
            scale = FACTOR
        elif f == "ascale" and name in ("_softmax", "_safe_softmax"):
            args = (args[0] * FACTOR, *args[1:])
            self._count()
        elif f == "ascale" and name in SDPA_OPS:
            q = args[0]
            kwargs["scale"] = (kwargs.get("scale") or 1.0 / math.sqrt(q.shape[-1])) * FACTOR
            self._count()
        elif f == "mm_lowacc" and name in MM_OPS and args[-1].is_floating_point():
            self._count()
            if name in ("mm", "bmm"):
                return lowacc_mm(args[0], args[1])
            return lowacc_addmm(args[0], args[1], args[2], kwargs.get("beta", 1), kwargs.get("alpha", 1))
        elif (
            f == "add"
            and func in (aten.add.Tensor, aten.add_.Tensor)
            and len(args) == 2
            and all(isinstance(a, torch.Tensor) and a.is_floating_point() for a in args)
            and args[0].shape == args[1].shape
        ):
            scale = 1.005
        elif f == "nobias" and name == "addmm" and kwargs.get("beta", 1) != 0:
            self._count()
            return aten.mm.default(args[1], args[2])
        elif f == "nobias" and name == "convolution" and args[2] is not None:
            args = (args[0], args[1], None, *args[3:])
            self._count()
        out = func(*args, **kwargs)
        if scale is None:
            return out
        first = isinstance(out, (tuple, list))
        head = out[0] if first else out
        if not (isinstance(head, torch.Tensor) and head.is_floating_point()):
            return out
        self._count()
        if inplace:
            return head.mul_(scale) if not first else out
        if first:
            return type(out)([head * scale, *out[1:]]) if isinstance(out, list) else (head * scale, *out[1:])
        return out * scale

    def _count(self) -> None:
        FAMILY_NODES[self.family] += 1


# ---- correct implementations that round differently -----------------------------------------------
# A wrong-device check is only as good as its false-failure rate on correct devices that do NOT
# compute like cpu eager. Real accelerators split reductions differently and keep intermediates of
# fused kernels in fp32; these eager modes model that, so the bench can count false failures on more
# than inductor (cpu eager under another thread count is often bit-identical to the trusted run).
VARIANTS = {
    "splitk": "matmuls summed over K in two halves in fp32, rounded once (another reduction order)",
    "upcast": "activations, norms, softmax, SDPA and their backward computed in fp32 from low-precision "
    "inputs and rounded once (a fused kernel); in fp32 runs, computed in float64",
    "sdpa_math": "attention through PyTorch's math path (scores and probabilities rounded to the input "
    "dtype) instead of the fused cpu kernel",
}
UPCAST_OPS = (
    *ACT_OPS,
    "native_layer_norm",
    "_fused_rms_norm",
    "_softmax",
    "_log_softmax",
    "gelu_backward",
    "silu_backward",
    "threshold_backward",
    "tanh_backward",
    "sigmoid_backward",
    "native_layer_norm_backward",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    *SDPA_OPS,
    "_scaled_dot_product_flash_attention_for_cpu_backward",
)


def _wide_dtype(args: Any) -> torch.dtype:
    """fp32 for a call with any bf16/fp16 input (a fused kernel's fp32 intermediates), float64 for an
    all-fp32 call (an fp32 run's more accurate variant)."""
    low = (torch.bfloat16, torch.float16)
    floats = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    return torch.float32 if any(a.dtype in low for a in floats) else torch.float64


def _wider(t: Any, wide: torch.dtype) -> Any:
    if not (isinstance(t, torch.Tensor) and t.is_floating_point()) or t.dtype == torch.float64:
        return t
    return t.to(wide)


def _like(out: Any, ref: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return type(out)(_like(o, r) for o, r in zip(out, ref, strict=True))
    return out.to(ref.dtype) if isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor) else out


def _splitk(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    k = a.shape[-1]
    h = max(1, k // 2)
    acc = torch.float64 if a.dtype == torch.float32 else torch.float32
    lo = torch.matmul(a[..., :h].to(acc), b[..., :h, :].to(acc))
    return lo + torch.matmul(a[..., h:].to(acc), b[..., h:, :].to(acc)) if h < k else lo


class CorrectMode(TorchDispatchMode):
    """A correct backend that is not cpu eager (VARIANTS): same math, other rounding. `calls` counts
    the aten calls it recomputed (a variant that touched nothing proves nothing)."""

    def __init__(self, variant: str) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"unknown correct variant {variant!r}; one of {', '.join(VARIANTS)}")
        self.variant = variant
        self.calls = 0
        self._kernel: Any = None

    def __enter__(self) -> CorrectMode:
        if self.variant == "sdpa_math":  # chosen above autograd, so the backward is the math path's too
            from torch.nn.attention import SDPBackend, sdpa_kernel

            self._kernel = sdpa_kernel([SDPBackend.MATH])
            self._kernel.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if self._kernel is not None:
            self._kernel.__exit__(*exc)
            self._kernel = None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        name = _opname(func)
        if self.variant == "splitk" and name in MM_OPS and args[-1].is_floating_point():
            out_dtype = args[-1].dtype
            if name in ("mm", "bmm"):
                res = _splitk(args[0], args[1])
            else:
                beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
                res = alpha * _splitk(args[1], args[2])
                res = res + beta * args[0].to(res.dtype) if beta != 0 else res
            self.calls += 1
            return res.to(out_dtype)
        if self.variant == "sdpa_math" and name in ("_softmax", "_safe_softmax"):
            self.calls += 1  # the math path's softmax (the fused kernel's never reaches dispatch)
        if self.variant == "upcast" and name in UPCAST_OPS:
            ref = func(*args, **kwargs)  # the dtypes a correct result has
            w = _wide_dtype([*args, *kwargs.values()])
            wide = func(*[_wider(a, w) for a in args], **{k: _wider(v, w) for k, v in kwargs.items()})
            self.calls += 1
            return _like(wide, ref)
        return func(*args, **kwargs)


# ---- bending families (tests/zoo/bend_backend.py): registered with the plugin too -------------------
import bend_backend  # noqa: E402  (tests/zoo is on the path wherever this plugin is)

BEND_NAMES = bend_backend.register_all()
