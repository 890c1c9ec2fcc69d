"""Test-only dynamo backend that models a buggy FlexAttention compiler on cpu (where FlexAttention
runs and testdev, a PrivateUse1 device, cannot): `perturb_flex_aot_eager` multiplies the attention
output of every flex_attention call in the graph by FACTOR and otherwise runs the graph as aot_eager
does. Import as a plugin (`bringup --import flex_perturb`, tests/testdev on PYTHONPATH).
`PERTURBED` counts the rewritten nodes: a perturbation that touched nothing proves nothing."""

from __future__ import annotations

import operator
from collections import Counter
from typing import Any

import torch
from torch._dynamo import register_backend

FACTOR = 1.01
PERTURBED: Counter[str] = Counter()


def _is_flex(node: torch.fx.Node) -> bool:
    return (
        node.op == "call_function"
        and "flex_attention" in str(getattr(node.target, "__name__", node.target))
        and ("backward" not in str(getattr(node.target, "__name__", node.target)))
    )


def perturb(graph: torch.fx.Graph) -> int:
    n = 0
    for node in list(graph.nodes):
        if not _is_flex(node):
            continue
        for out in [u for u in node.users if u.target is operator.getitem and u.args[1] == 0]:
            with graph.inserting_after(out):
                scaled = graph.call_function(torch.ops.aten.mul.Tensor, (out, FACTOR))
            scaled.meta.update({k: v for k, v in out.meta.items() if k in ("val", "tensor_meta", "example_value")})
            out.replace_all_uses_with(scaled, delete_user_cb=lambda u, s=scaled: u is not s)
            n += 1
    PERTURBED["flex"] += n
    return n


def _backend() -> Any:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        if not perturb(gm.graph):
            raise RuntimeError("perturb_flex_aot_eager: no flex_attention node in the graph to perturb")
        gm.graph.lint()
        gm.recompile()
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=compiler)


register_backend(name="perturb_flex_aot_eager", compiler_fn=_backend())
