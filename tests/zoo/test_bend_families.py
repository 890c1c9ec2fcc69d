"""The bench's bending families (bend_backend.py) are what they say: at strength 0 each computes the exact
function, forward and backward, and at a small strength it changes what it claims to change and nothing
else. A family that bent something at 0, or nothing at all, would make bench/verdict_power.py's power
figures (and its false-failure counts) measure the wrong thing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bend_backend as bb


def _step(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """A tiny model's step that makes one call of every kind a family rewrites."""
    ids = torch.tensor([[1, 2, 1, 3, 1, 0], [2, 0, 4, 4, 1, 5]])
    h = F.embedding(ids, p["emb"])  # (2, 6, 16)
    pos = torch.arange(6, dtype=torch.float64).unsqueeze(-1) * p["freq"]
    h = h * torch.cos(pos) + h.roll(1, -1) * torch.sin(pos)
    h = F.layer_norm(h, (16,), p["ln_w"], p["ln_b"])
    r = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    q = F.linear(r, p["wq"]).view(2, 6, 2, 8).transpose(1, 2)
    a = F.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True).transpose(1, 2).reshape(2, 6, 16)
    s = F.softmax(a @ p["wq"].t(), -1)
    m = F.silu(F.linear(a + s, p["w1"])) + F.gelu(F.linear(a, p["w1"])) + torch.tanh(F.linear(a, p["w1"]))
    logits = F.linear(m, p["out"])
    return F.cross_entropy(logits.reshape(-1, 6), ids.reshape(-1))


def _run(family: str | None, d: float) -> tuple[torch.Tensor, list[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    shapes = {
        "emb": (6, 16),
        "freq": (16,),
        "ln_w": (16,),
        "ln_b": (16,),
        "wq": (16, 16),
        "w1": (32, 16),
        "out": (6, 32),
    }
    p = {k: torch.randn(s, generator=g, dtype=torch.float64).requires_grad_(True) for k, s in shapes.items()}
    if family is None:
        loss = _step(p)
    else:
        with bb.BendMode(family, d):
            loss = _step(p)
    grads = torch.autograd.grad(loss, list(p.values()))
    return loss.detach(), [t.detach() for t in grads]


FAMILIES = [*bb.FAMILIES, *bb.HELD_OUT]
ZERO = {"ho2_mask_leak": 1e-300}  # its strength is a weight: 0 is "no leak", which it leaves to the exact call


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_at_strength_zero_is_the_exact_function(family: str) -> None:
    loss, grads = _run(None, 0.0)
    before = bb.BEND_CALLS[family]
    bloss, bgrads = _run(family, ZERO.get(family, 0.0))
    assert bb.BEND_CALLS[family] > before, f"{family} found nothing to rewrite in the step"
    torch.testing.assert_close(bloss, loss, rtol=1e-12, atol=1e-12)
    for b, c in zip(bgrads, grads, strict=True):
        torch.testing.assert_close(b, c, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_bends_what_it_says(family: str) -> None:
    loss, grads = _run(None, 0.0)
    d = 0.05 if family not in ("norm_eps",) else 1e-3
    bloss, bgrads = _run(family, d)
    changed = max(float((b - c).norm() / c.norm().clamp_min(1e-300)) for b, c in zip(bgrads, grads, strict=True))
    assert changed > 1e-6, f"{family}@{d} changed no gradient"
    backward_only = family.startswith("bwd_") or "_bwd_" in family
    if backward_only:  # its forward is exact: the loss is the clean one
        torch.testing.assert_close(bloss, loss, rtol=1e-12, atol=1e-12)
