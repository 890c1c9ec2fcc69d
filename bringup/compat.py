"""Environment shims, each with the reason it exists.

torchvision from PyPI is a CUDA build: next to a CPU-only torch its C++ ops library can't load, and
`import torchvision` then dies registering a fake kernel for `torchvision::nms` (an operator that was
never defined). transformers and timm import torchvision at module level, so every HF/timm model
would be unusable. When (and only when) that exact failure happens, we define the schemas of the two
operators torchvision registers unconditionally, so the pure-Python parts (layers, transforms) import.
Calling those ops still fails loudly: no kernel is provided.
"""

from __future__ import annotations

import importlib.util
import sys

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)


def ensure_torchvision_importable() -> str:
    """'absent' | 'ok' | 'shimmed' (the CPU-torch + CUDA-torchvision case above)."""
    if "torchvision" in sys.modules:
        return "ok"
    if importlib.util.find_spec("torchvision") is None:
        return "absent"
    try:
        import torchvision

        return "ok"
    except RuntimeError as e:
        if "torchvision::nms" not in str(e):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    import torch

    lib = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _SCHEMAS:
        try:
            lib.define(schema)
        except RuntimeError:  # already defined (a second call, or a partially loaded library)
            pass
    sys.modules["bringup._torchvision_shim_lib"] = lib  # type: ignore[assignment]  # keep it alive
    import torchvision  # noqa: F401

    return "shimmed"


# Import-time warnings of optional packages that say nothing about the user's run. transformers
# imports torchao whenever it is installed (its quantizer registry); torchao then logs "Failed to load
# .../_C_mxfp8...so" for each CUDA-only extension it ships (on a cpu build they can't load, by design),
# and registers enums with torch's pytree, which torch >= 2.12 logs as deprecated. Every command that
# touches a model printed four such lines before its own output, and a bad input no longer ended in
# one line. Only these two loggers, only below ERROR; probe reports what torchao can really do.
_NOISY_IMPORT_LOGGERS = ("torchao", "torch.utils._pytree")


def quiet_import_noise() -> None:
    import logging

    for name in _NOISY_IMPORT_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
