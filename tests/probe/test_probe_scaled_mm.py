"""probe's scaled_mm check has power: a `_scaled_mm` kernel that ignores a scale, uses one scale for
both, or applies row-wise scales to the wrong side fails; the real cpu kernel passes. In-process, cpu."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from bringup.case import Case, Status
from bringup.probe import suite as probe

REAL = torch._scaled_mm


def _case() -> Case:
    params = {"feature": "scaled_mm.float8_e4m3fn", "kind": "scaled_mm", "dtype": "float8_e4m3fn"}
    return Case("probe", "scaled_mm.float8_e4m3fn", params, probe.ENTRY, 60)


def _unscaled(a: torch.Tensor, b: torch.Tensor, **kw: Any) -> torch.Tensor:
    one = torch.tensor(1.0)
    return REAL(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32, **kw)


WRONG: dict[str, Callable[..., torch.Tensor]] = {
    "ignores scale_a": lambda a, b, scale_a, scale_b, out_dtype: (_unscaled(a, b) * scale_b).to(out_dtype),
    "ignores scale_b": lambda a, b, scale_a, scale_b, out_dtype: (_unscaled(a, b) * scale_a).to(out_dtype),
    "scale_a for both": lambda a, b, scale_a, scale_b, out_dtype: (_unscaled(a, b) * scale_a * scale_a).to(out_dtype),
    # row-wise scales applied to the other side (a kernel mixing up the operands' scales): broadcast as
    # a column scale of the right length where shapes allow, else the product of their means
    "scales swapped": lambda a, b, scale_a, scale_b, out_dtype: (
        _unscaled(a, b) * (scale_b.mean() * scale_a.mean() if scale_a.numel() > 1 else scale_b * scale_a)
    ).to(out_dtype),
}


def test_real_kernel_passes() -> None:
    r = probe.probe_scaled_mm(_case(), torch.device("cpu"))
    assert r.status is Status.PASS, r.reason
    assert len(r.fields["scaled_mm_calls"]) == 5


@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_wrong_kernels_fail(wrong: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = WRONG[wrong]
    calls: list[int] = []

    def kernel(
        a: torch.Tensor,
        b: torch.Tensor,
        *,
        scale_a: torch.Tensor,
        scale_b: torch.Tensor,
        out_dtype: torch.dtype,
        **kw: Any,
    ) -> torch.Tensor:
        calls.append(1)
        if len(calls) % 2 == 0:  # probe calls: device, then cpu's trusted run: keep that one real
            return REAL(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
        return fake(a, b, scale_a, scale_b, out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", kernel)
    r = probe.probe_scaled_mm(_case(), torch.device("cpu"))
    assert r.status is Status.FAIL_NUMERIC, (wrong, r.reason)
