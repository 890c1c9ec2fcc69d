"""A real repro for PyTorch's compiler bisector: a backend that ships one wrong decomposition (hardswish 1% off, put
in inductor's decomposition table, which aot_eager_decomp_partition and inductor apply). torch.compile with
aot_eager_decomp_partition, the first backend that applies the table (the bisector sets each run's backend itself,
whatever the script names; inductor would only add a cold C++ compile to every candidate's plain run); exit 0 when
the compiled function matches eager, 1 when it does not. The bisector (run by bringup/bisect/compiler_driver.py)
answers aot_eager_decomp_partition / decomposition, the hardswish one, without ever compiling C++ (the failure shows
before inductor), in ~8 test runs."""

import sys

import torch
from torch._inductor import decomposition

aten = torch.ops.aten


def wrong_hardswish(x):
    return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0 * 1.01


decomposition.decompositions[aten.hardswish.default] = wrong_hardswish


def f(x):
    return torch.nn.functional.hardswish(x).sum() + x.sin().sum()


x = torch.randn(64, generator=torch.Generator().manual_seed(0))
err = (torch.compile(f, backend="aot_eager_decomp_partition")(x) - f(x)).abs().item()
print(f"compiled vs eager: {err:.3g}")
sys.exit(1 if err > 1e-4 else 0)
