"""The `unsupported` classifier (bringup/checks/errors.py, also used by the worker): real error strings
that say "not implemented / not supported here" are gaps; real bugs and bad arguments are not, even
when their wording is close ("is not supported" for a dtype argument, "needs", "is only supported")."""

from __future__ import annotations

import pytest
import torch

from bringup.case import Status
from bringup.checks.errors import classify, says_unsupported
from bringup.runner.worker import is_not_implemented

GAPS = [
    # the dispatcher: no kernel for the backend (real message, testdev's sparse path)
    "NotImplementedError: Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with arguments from "
    "the 'Sparsetestdev' backend. This could be because the operator doesn't exist for this backend",
    # ATen's dtype dispatch
    "RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'",
    # sdpa with a forced backend the device lacks
    "RuntimeError: No available kernel. Aborting execution.",
    # a build without the feature
    "AssertionError: Torch not compiled with CUDA enabled",
    # FlexAttention's backward on cpu (a NotImplementedError in torch; the wording alone also says it)
    "RuntimeError: FlexAttention does not support backward on CPU. Please set requires_grad=False",
    "RuntimeError: _scaled_mm is not supported on the testdev device",
    "RuntimeError: float8 matmul not implemented for the privateuseone backend",
    "RuntimeError: Unsupported device type: testdev",
    "RuntimeError: torchao float8 training requires CUDA compute capability 8.9 or higher",
    # torch 2.9's cpu _scaled_mm with row-wise scales (what PyTorch/XLA's CPU fallback runs)
    "RuntimeError: (scale_a.numel() == 1 && scale_b.numel() == 1) INTERNAL ASSERT FAILED at "
    '"/pytorch/aten/src/ATen/native/Blas.cpp":249, please report a bug to PyTorch. Now _scaled_mm only supports '
    "per-tensor scaling for CPU backend.",
]
BUGS = [
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x4)",
    "RuntimeError: The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and testdev:0!",
    "RuntimeError: expected scalar type Float but found BFloat16",
    "ValueError: Expected input batch_size (4) to match target batch_size (8).",
    "TypeError: forward() missing 1 required positional argument: 'x'",
    "ValueError: dtype torch.int8 is not supported",  # a bad argument, not a device gap
    "RuntimeError: the derivative for 'foo' is not supported with double backward",
    "RuntimeError: this op needs contiguous inputs",  # the old probe regex `needs \w+` took it
    "RuntimeError: reshape only supports contiguous inputs with this stride",  # "only supports", no device named
    "ValueError: fullgraph=True is only supported with dynamic=False",  # the old "is only supported"
    "RuntimeError: Expected trailing dimension of mat1 to be divisible by 16 but got mat1 shape: (32x20).",
]


@pytest.mark.parametrize("text", GAPS)
def test_real_gaps_are_unsupported(text: str) -> None:
    kind, _, msg = text.partition(": ")
    exc = {"RuntimeError": RuntimeError, "AssertionError": AssertionError, "NotImplementedError": NotImplementedError}[
        kind
    ](msg)
    assert says_unsupported(text) or isinstance(exc, NotImplementedError)
    assert classify(exc) is Status.UNSUPPORTED
    assert is_not_implemented(exc)  # the worker agrees


@pytest.mark.parametrize("text", BUGS)
def test_real_bugs_are_not_unsupported(text: str) -> None:
    kind, _, msg = text.partition(": ")
    exc = {"RuntimeError": RuntimeError, "ValueError": ValueError, "TypeError": TypeError}[kind](msg)
    assert not says_unsupported(text), text
    assert classify(exc) is Status.ERROR
    assert classify(exc, compiling=True) is Status.FAIL_COMPILE
    assert not is_not_implemented(exc)


def test_raised_by_torch_both_ways() -> None:
    """Errors torch really raises here: a dtype kernel cpu lacks is a gap; a shape bug is not."""
    with pytest.raises(Exception) as gap:
        torch.nn.functional.gelu(torch.ones(2, dtype=torch.int64))  # "GeluKernelImpl" not implemented for 'Long'
    assert classify(gap.value) is Status.UNSUPPORTED
    assert says_unsupported(str(gap.value))  # by its words too, not only by its type
    with pytest.raises(RuntimeError) as bug:
        torch.ones(4, 8) @ torch.ones(16, 4)
    assert classify(bug.value) is Status.ERROR
    # NotImplementedError anywhere in the cause chain counts
    try:
        try:
            raise NotImplementedError("no kernel")
        except NotImplementedError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as e:
        assert classify(e) is Status.UNSUPPORTED
    assert classify(MemoryError()) is Status.OOM
