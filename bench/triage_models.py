"""Small user models for bench/triage_groups.py (`zoo --source FILE`, lines `triage_models:<family>_<size>`;
bench/ on PYTHONPATH): families of one architecture at three sizes, each family built around one op that a cause
can hit, the families disjoint in those ops (an MLP per activation, an attention with an explicit softmax, an
RMSNorm written with rsqrt, an embedding fed ids that repeat). Each function returns (module, example_inputs).
"""

from __future__ import annotations

import torch

SIZES = {"s": (32, 1), "m": (64, 1), "l": (48, 2)}  # (width, depth)
FAMILIES = ("silu", "gelu", "tanh", "attn", "rmsnorm", "embed")


class Mlp(torch.nn.Module):
    def __init__(self, width: int, depth: int, act: type[torch.nn.Module]) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = [torch.nn.Linear(24, width), act()]
        for _ in range(depth - 1):
            layers += [torch.nn.Linear(width, width), act()]
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Attention(torch.nn.Module):
    """One head of self-attention with the softmax written out (no SDPA), `depth` of them."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(24, width)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(width, 3 * width) for _ in range(depth))
        self.out = torch.nn.Linear(width, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for proj in self.qkv:
            q, k, v = proj(h).chunk(3, dim=-1)
            att = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
            h = h + att @ v
        return self.out(h)


class RMSNorm(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class NormNet(torch.nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = [torch.nn.Linear(24, width)]
        for _ in range(depth):
            layers += [RMSNorm(width), torch.nn.Linear(width, width)]
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class EmbedNet(torch.nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(40, width)
        self.net = torch.nn.Sequential(
            *(torch.nn.Linear(width, width) for _ in range(depth)), torch.nn.Linear(width, 8)
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.net(self.emb(ids))


def build(family: str, size: str) -> tuple[torch.nn.Module, torch.Tensor]:
    width, depth = SIZES[size]
    x = torch.randn(4, 12, 24)
    if family in ("silu", "gelu", "tanh"):
        act = {"silu": torch.nn.SiLU, "gelu": torch.nn.GELU, "tanh": torch.nn.Tanh}[family]
        return Mlp(width, depth, act), x
    if family == "attn":
        return Attention(width, depth), x
    if family == "rmsnorm":
        return NormNet(width, depth), x
    ids = torch.randint(0, 10, (4, 12), generator=torch.Generator().manual_seed(0))  # 10 ids in 48: repeats
    return EmbedNet(width, depth), ids


for _fam in FAMILIES:
    for _size in SIZES:
        globals()[f"{_fam}_{_size}"] = lambda f=_fam, s=_size: build(f, s)


def entries(families: list[str]) -> list[str]:
    return [f"triage_models:{f}_{s}" for f in families for s in SIZES]
