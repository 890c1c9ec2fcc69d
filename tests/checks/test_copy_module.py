"""A model is copied for the float64 twin, the rounding-elsewhere runs and the module check (checks/module_replay.py:
copy_module), after a training step ran it. recurrent_gemma keeps its recurrent state as a plain attribute with its
history, and `copy.deepcopy` refuses a tensor that is not a graph leaf: the hf-causal sweep said `ref_fail`
("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol") for a model whose
reference runs."""

from __future__ import annotations

import copy

import pytest
import torch

from bringup.checks.module_replay import copy_module


class _Stateful(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.state: torch.Tensor | None = None
        self.cache: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        self.state = y * 2  # what a recurrent block keeps for the next call, its history with it
        self.cache = [y + 1]
        return y


def test_a_module_holding_a_state_with_history_is_copied_detached() -> None:
    m = _Stateful()
    m(torch.randn(2, 3)).sum().backward()
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(m)
    c = copy_module(m)
    assert c.state is not None and c.state.grad_fn is None and torch.equal(c.state, m.state)
    assert c.cache[0].grad_fn is None and torch.equal(c.cache[0], m.cache[0])
    assert c.lin.weight is not m.lin.weight and torch.equal(c.lin.weight, m.lin.weight)
    assert isinstance(c.lin.weight, torch.nn.Parameter)
