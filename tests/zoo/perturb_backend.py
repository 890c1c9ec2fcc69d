"""Test-only dynamo backends that model a buggy compiler: they multiply the output of ONE aten op kind
by 1.01 (a 1% error) and otherwise compile exactly like aot_eager or inductor.

Import it as a plugin (`bringup --import perturb_backend ...`, with tests/zoo on PYTHONPATH) to get
backends named `perturb_<kind>_<base>`, kind in KINDS, base in aot_eager | inductor. aot_eager
rewrites the forward and backward aten graphs that AOTAutograd hands it; inductor rewrites its
post-grad graphs (a post_grad_custom_pre_pass), i.e. after its decompositions, so e.g. a layer norm
shows up there as the rsqrt of its variance. `PERTURBED[name]` counts the rewritten nodes.
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Any

import torch
from torch._dynamo import register_backend

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
