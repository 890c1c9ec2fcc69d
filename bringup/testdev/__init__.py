"""testdev: a real out-of-tree PyTorch device (PrivateUse1, renamed "testdev") for CI and demos.

`import bringup.testdev` builds the C++ extension in `csrc/` once (cached under
~/.cache/bringup/testdev, or $BRINGUP_CACHE_DIR/testdev) and registers the device, so

    bringup --import bringup.testdev --device testdev run --quick

runs every suite on a device that is neither cpu nor cuda. It behaves like a young backend: host
memory behind its own allocator (with statistics), a device guard with events (torch.Event,
torch.accelerator), native kernels for empty/copy/views and a few compute ops (add, sub, mul, div,
mm, bmm, addmm, fill_, zero_), and a global CPU fallback for every other op. With
BRINGUP_TESTDEV_FALLBACK=0 those other ops raise NotImplementedError instead.
"""

from __future__ import annotations

import torch

from bringup.testdev import runtime
from bringup.testdev.build import load_extension

NAME = "testdev"

# The ops with a native testdev kernel besides memory/copy/view plumbing (documentation and tests;
# the dispatcher's registrations are the source of truth).
NATIVE_COMPUTE_OPS = (
    "aten::add.Tensor", "aten::add_.Tensor", "aten::sub.Tensor", "aten::sub_.Tensor",
    "aten::mul.Tensor", "aten::mul_.Tensor", "aten::div.Tensor", "aten::div_.Tensor",
    "aten::mm", "aten::bmm", "aten::addmm", "aten::fill_.Scalar", "aten::zero_",
)  # fmt: skip


def register() -> None:
    """Build/load the extension and register PrivateUse1 as 'testdev' (idempotent)."""
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", NAME):
        raise RuntimeError(f"PrivateUse1 is already registered as {current!r}; testdev cannot also be loaded")
    load_extension()
    if current == NAME and getattr(torch, NAME, None) is runtime:
        return
    if current != NAME:
        torch.utils.rename_privateuse1_backend(NAME)
    torch._register_device_module(NAME, runtime)
    if not hasattr(torch.Tensor, f"is_{NAME}"):
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


def fallback_enabled() -> bool:
    return bool(load_extension().fallback_enabled())


def set_fallback_enabled(enabled: bool) -> None:
    """Turn the CPU fallback on/off in this process (BRINGUP_TESTDEV_FALLBACK=0 sets it off at load)."""
    load_extension().set_fallback_enabled(bool(enabled))


def fallback_stats() -> dict[str, tuple[int, int, int]]:
    """(calls, bytes to host, bytes back to device) per dispatcher op name (with overload) that went
    through testdev's CPU fallback since the last reset: the backend's own ground truth, which the
    tests hold bringup's fallback detector against."""
    return {str(k): (int(v[0]), int(v[1]), int(v[2])) for k, v in load_extension().fallback_stats().items()}


def fallback_counts() -> dict[str, int]:
    """Calls per op that went through the CPU fallback since the last reset."""
    return {k: v[0] for k, v in fallback_stats().items()}


def reset_fallback_counts() -> None:
    load_extension().reset_fallback_counts()


register()
