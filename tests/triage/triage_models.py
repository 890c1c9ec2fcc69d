"""Small user models for the triage tests (`zoo --source FILE`, lines `triage_models:<function>`; tests/triage on
PYTHONPATH): two families of three, each family one architecture at three sizes, so that one fault of an op of
the family reaches all three. Each function returns (module, example_inputs)."""

from __future__ import annotations

import torch


class _Mlp(torch.nn.Module):
    def __init__(self, width: int, depth: int, act: type[torch.nn.Module]) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = [torch.nn.Linear(24, width), act()]
        for _ in range(depth - 1):
            layers += [torch.nn.Linear(width, width), act()]
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _make(width: int, depth: int, act: type[torch.nn.Module]) -> tuple[torch.nn.Module, torch.Tensor]:
    return _Mlp(width, depth, act), torch.randn(16, 24)


def silu_small() -> tuple[torch.nn.Module, torch.Tensor]:
    return _make(32, 1, torch.nn.SiLU)


def silu_wide() -> tuple[torch.nn.Module, torch.Tensor]:
    return _make(64, 1, torch.nn.SiLU)


def silu_deep() -> tuple[torch.nn.Module, torch.Tensor]:
    return _make(48, 2, torch.nn.SiLU)


def gelu_small() -> tuple[torch.nn.Module, torch.Tensor]:
    return _make(32, 1, torch.nn.GELU)


def gelu_wide() -> tuple[torch.nn.Module, torch.Tensor]:
    return _make(64, 1, torch.nn.GELU)


def gelu_deep() -> tuple[torch.nn.Module, torch.Tensor]:
    return _make(48, 2, torch.nn.GELU)


MODELS = ("silu_small", "silu_wide", "silu_deep", "gelu_small", "gelu_wide", "gelu_deep")
