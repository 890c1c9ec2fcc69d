"""Repro: inductor on cpu emits C++ that does not compile when one bf16 reduction is stored to two outputs
(torch 2.13.0 and 2.9.0).

    .venv/bin/python bench/repros/inductor_bf16_shared_bias_grad.py

Found by `bench/verdict_power.py --families '' --precisions bf16` (2026-12-03): the correct `inductor`
backend raised on `phi` and `gpt_neox` in bf16 (not in amp-bf16 or fp32): both have parallel blocks,
out = x + attn(x) + mlp(x), so the attention's output bias and the MLP's output bias receive the same
gradient. Inductor reduces that gradient once (a column sum) and writes it to both bias gradients, and its
cpp backend declares the bf16 copy of the accumulator twice in one scope:

    error: conflicting declaration 'auto at_BFloat16_tmp_acc0_vec'

Exit code 1 while the bug is there (prints the compiler's first error line), 0 once torch fixes it.
"""

from __future__ import annotations

import sys

import torch


class Parallel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.a(x) + self.b(torch.nn.functional.gelu(x, approximate="tanh"))


def main() -> int:
    torch.manual_seed(0)
    m = Parallel().to(torch.bfloat16)
    x = torch.randn(32, 64, dtype=torch.bfloat16, requires_grad=True)
    try:
        torch.compile(m, backend="inductor")(x).sum().backward()
    except Exception as e:  # InductorError(CppCompileError)
        first = next((ln for ln in str(e).splitlines() if "error:" in ln), str(e).splitlines()[0])
        print(f"torch {torch.__version__}: inductor failed: {first.strip()}")
        return 1
    ref = m.a.bias.grad.float()
    print(f"torch {torch.__version__}: compiled; bias grads equal: {torch.equal(ref, m.b.bias.grad.float())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
