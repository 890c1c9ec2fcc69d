"""A `--import` plugin that makes this torch answer like a CUDA build on a machine with no GPU.

`torch.accelerator.current_accelerator()` then names `cuda` (compiled in) while nothing is available:
the set-up of every user who `pip install`s the default torch wheel on a GPU-less laptop or CI runner.
"""

import torch

torch._C._accelerator_getAccelerator = lambda: torch.device("cuda")
