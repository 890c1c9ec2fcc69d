"""Precision names: pure and mixed, one parser, one-line errors for unknown names."""

from __future__ import annotations

import pytest
import torch

from bringup.errors import BadInput
from bringup.precision import parse_precision


def test_pure_and_mixed_precisions() -> None:
    bf16 = parse_precision("bfloat16")
    assert bf16.name == "bf16" and not bf16.mixed and bf16.low and bf16.param_dtype == torch.bfloat16
    amp = parse_precision("amp-bf16")
    assert amp.mixed and amp.low and amp.param_dtype == torch.float32 and amp.compute_dtype == torch.bfloat16
    assert not amp.needs_grad_scaler and parse_precision("amp-fp16").needs_grad_scaler
    assert not parse_precision("fp32").low


def test_autocast_really_casts_on_cpu() -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with parse_precision("amp-bf16").autocast("cpu"):
        assert (a @ b).dtype == torch.bfloat16
    with parse_precision("fp32").autocast("cpu"):
        assert (a @ b).dtype == torch.float32


def test_unknown_or_disallowed_precision_is_bad_input() -> None:
    with pytest.raises(BadInput, match="unknown dtype 'fp7'"):
        parse_precision("fp7")
    with pytest.raises(BadInput, match="use one of fp32, bf16, fp16$"):
        parse_precision("amp-bf16", allow_mixed=False)
