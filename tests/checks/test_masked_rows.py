"""What the mathematics leaves to the kernel (bringup/checks/masked_rows.py): fully masked attention rows found in a
mask and in a recorded module call, the uniform convention reproduced on PyTorch's SDPA, and a run's pad outputs
named by the convention they follow."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.checks import masked_rows as mr


def _left_padded_mask(pad: int, n: int) -> torch.Tensor:
    """(1, 1, n, n) causal + padding mask of one row whose first `pad` tokens are pads (True: attend)."""
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    keep[:, :pad] = False
    return keep.view(1, 1, n, n)


def test_dead_rows_are_the_pad_queries_of_a_left_padded_row() -> None:
    mask = _left_padded_mask(3, 8)
    assert mr.dead_rows(mask).flatten().tolist() == [True] * 3 + [False] * 5
    additive = torch.zeros(1, 1, 8, 8).masked_fill(~mask, torch.finfo(torch.float32).min)
    assert torch.equal(mr.dead_rows(additive), mr.dead_rows(mask))  # transformers' eager masks alike
    pad_only = torch.ones(1, 1, 8, 8, dtype=torch.bool)
    pad_only[..., :3] = False  # padding without the causal part: SDPA's is_causal adds it
    assert mr.dead_rows(pad_only, is_causal=True).flatten().tolist()[:3] == [True] * 3
    assert mr.call_dead_rows((), {"attention_mask": mask}).tolist() == [[True] * 3 + [False] * 5]
    assert mr.call_dead_rows((), {"attention_mask": _left_padded_mask(0, 8)}) is None  # none: nothing to leave out
    assert mr.call_dead_rows((torch.randn(1, 8, 4),), {}) is None


def test_the_uniform_convention_changes_only_the_fully_masked_rows() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 6, 8, 12, generator=g, dtype=torch.float64) for _ in range(3))
    kv = k[:, :2], v[:, :2]  # grouped-query attention: 3 query heads per kv head
    mask = _left_padded_mask(3, 8).expand(2, 1, 8, 8)
    torch_out = F.scaled_dot_product_attention(q, *kv, attn_mask=mask, enable_gqa=True)
    assert torch.equal(torch_out[:, :, :3], torch.zeros_like(torch_out[:, :, :3]))  # PyTorch's convention: 0
    with mr.UniformRows() as mode:
        uniform = F.scaled_dot_product_attention(q, *kv, attn_mask=mask, enable_gqa=True)
    assert mode.rows == 2 * 6 * 3
    assert torch.equal(uniform[:, :, 3:], torch_out[:, :, 3:])
    mean = v[:, :2].mean(-2, keepdim=True).repeat_interleave(3, dim=1)
    assert torch.allclose(uniform[:, :, :3], mean.expand(-1, -1, 3, -1))


def test_a_runs_pad_outputs_are_named_by_the_convention_they_follow() -> None:
    g = torch.Generator().manual_seed(1)
    zero, uniform = torch.randn(5, 11, generator=g), torch.randn(5, 11, generator=g)
    assert mr.describe(zero * (1 + 1e-3), zero, uniform) == mr.ZERO
    assert mr.describe(uniform + 1e-3, zero, uniform) == mr.UNIFORM
    assert mr.describe((zero + uniform) / 2, zero, uniform) == mr.OTHER
    assert mr.describe(torch.full_like(zero, float("nan")), zero, uniform) == mr.NON_FINITE
    assert mr.describe(zero, zero, None) == ""  # no SDPA row was fully masked: the model's code decides
    said = mr.sentence({"eager": mr.ZERO, "compiled": mr.UNIFORM})
    assert said == "fully masked attention rows: eager 0, compiled uniform (torch SDPA gives 0)"
