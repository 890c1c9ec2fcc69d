"""The module check records a replay's outputs as copies: a module may return one of its own parameters
(transformers' GPTNeoXJapaneseAttention returns its `dense_bias`), and the run's optimizer step then moved the
recorded output under the comparison. The hf-causal sweep failed gpt_neox_japanese with inductor so ("out.2:
rel_rmse 0.102 (bound 0.0003; trusted 0)"), a correct compiler."""

from __future__ import annotations

import contextlib

import torch

import bringup.models  # noqa: F401  (torchvision shim first)
from bringup.checks.module_replay import Call, replay


class ReturnsItsBias(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4))
        self.bias = torch.nn.Parameter(torch.zeros(4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * self.weight, self.bias


def test_an_output_that_is_a_parameter_is_recorded_as_it_was_not_as_the_step_leaves_it() -> None:
    m = ReturnsItsBias()
    x = torch.randn(3, 4)
    call = Call(name="m", module=m, args=(x,), kwargs={}, grad_in=[False], in_names=["x"], out_grads=[None, None])
    res = replay(call, m, torch.device("cpu"), contextlib.nullcontext)
    assert torch.equal(res.tensors["out.1"], torch.zeros(4))
    with torch.no_grad():
        m.bias.add_(0.1)  # what the run's optimizer step does to the parameter after the record
    assert torch.equal(res.tensors["out.1"], torch.zeros(4)), "the record moved with the parameter"
    assert torch.equal(res.tensors["out.0"], x * m.weight.detach())
