"""User models for the zoo tests (`--source FILE` lines `zoo_models:<function>`; tests/zoo on PYTHONPATH).
Each function returns (module, example_inputs)."""

from __future__ import annotations

import torch


class _ItemBreak(torch.nn.Module):
    """Reads a tensor value with .item() in forward: a graph break under torch.compile."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        scale = 1.0 + 0.0 * h.mean().item()  # host sync: dynamo breaks the graph here
        return self.b(h) * scale


class _PrintBreak(torch.nn.Module):
    """Prints in forward: a graph break (print is not traceable)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        print("zoo_models: forward")
        return torch.nn.functional.gelu(h)


class _Clean(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(), torch.nn.Linear(32, 4)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def item_break() -> tuple[torch.nn.Module, torch.Tensor]:
    return _ItemBreak(), torch.randn(8, 16)


def print_break() -> tuple[torch.nn.Module, torch.Tensor]:
    return _PrintBreak(), torch.randn(8, 16)


def clean_mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    return _Clean(), torch.randn(8, 16)


def not_a_module() -> int:
    return 3
