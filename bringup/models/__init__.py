"""Model builders (transformers, timm, user functions). Importing this makes a later `import torchvision`
survive where a CUDA-only torchvision wheel sits next to a CPU torch (see bringup.compat); torchvision itself
is imported only by what needs it (transformers' and timm's model modules)."""

from bringup.compat import install_torchvision_shim

install_torchvision_shim()
