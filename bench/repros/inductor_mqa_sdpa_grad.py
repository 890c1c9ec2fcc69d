"""Repro: inductor's gradients through SDPA with one shared key/value head taken from a fused projection
are wrong on cpu (torch 2.13.0), in fp32 as in bf16.

    .venv/bin/python bench/repros/inductor_mqa_sdpa_grad.py

This is what the zoo's parity check flagged on `falcon` (multi-query attention: query_key_value is one
Linear, the key and value heads are sliced from it with an index, shape (B, 1, S, D), and SDPA broadcasts
them over the query heads). bench/verdict_power.py counted it as inductor's one "false failure" on
2026-11-30; it is a real miscompilation. Eager and aot_eager agree with each other to 1e-7; inductor's
input gradient is ~50% off. With k/v expanded to the query's heads before SDPA, or with k/v as leaf
tensors, inductor is right. Prints the relative error of the input gradient, eager vs inductor, for
each variant; exit code 1 while the bug is there, 0 once torch fixes it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F


def attention(expand: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        y = x.view(b, s, 6, 16)  # 4 query heads + 1 key head + 1 value head, head dim 16 (falcon's layout)
        q, k, v = y[..., :-2, :], y[..., [-2], :], y[..., [-1], :]
        q = q.transpose(1, 2).reshape(b, 4, s, 16)
        k = k.transpose(1, 2).reshape(b, 1, s, 16)
        v = v.transpose(1, 2).reshape(b, 1, s, 16)
        if expand:
            k, v = k.expand(b, 4, s, 16), v.expand(b, 4, s, 16)
        return (F.scaled_dot_product_attention(q, k, v, is_causal=True) * w).sum()

    return f


def grad_error(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], x: torch.Tensor, w: torch.Tensor, backend: str
) -> float:
    grads = []
    for f in (fn, torch.compile(fn, backend=backend)):
        xx = x.clone().requires_grad_()
        f(xx, w).backward()
        grads.append(xx.grad)
    torch._dynamo.reset()
    return float((grads[0] - grads[1]).norm() / grads[0].norm())


def main() -> int:
    torch.manual_seed(0)
    x, w = torch.randn(2, 8, 96), torch.randn(2, 4, 8, 16)
    bad = False
    for expand in (False, True):
        for backend in ("aot_eager", "inductor"):
            err = grad_error(attention(expand), x, w, backend)
            bad |= err > 1e-4
            kv = "k/v expanded to 4 heads" if expand else "k/v broadcast (B, 1, S, D)"
            print(f"{backend:>9}  {kv:<28} input-grad rel error vs eager: {err:.3g}")
    print(f"torch {torch.__version__}: {'BUG PRESENT' if bad else 'fixed'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
