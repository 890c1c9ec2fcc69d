"""A `--import` plugin that makes timm and torchvision look uninstalled (`pip install .` without the
timm extra): `import timm` raises ModuleNotFoundError and `importlib.util.find_spec("timm")` is None."""

import sys

for _name in ("timm", "torchvision"):
    sys.modules[_name] = None  # type: ignore[assignment]
