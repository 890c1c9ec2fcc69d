"""Model builders (transformers, timm, user functions). Importing this makes torchvision importable
where a CUDA-only torchvision wheel sits next to a CPU torch (see bringup.compat)."""

from bringup.compat import ensure_torchvision_importable

ensure_torchvision_importable()
