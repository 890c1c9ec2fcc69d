"""`--compile-backend NAME`, the option of the vocabulary (bringup/options.py) that names a torch.compile backend:
its one spelling and its check against the backends torch.compile knows here (torch's own, and those an
`--import` plugin registered). Torch-free until a name that is not torch's own is checked.
"""

from __future__ import annotations

import argparse
import sys

from bringup.errors import BadInput
from bringup.options import refuse_old


def add_compile_backend(p: argparse.ArgumentParser, default: str | None = "inductor", extra_help: str = "") -> None:
    """The one `--compile-backend NAME` option (the old spelling `--backend` is refused, naming it). Checked by
    `check_compile_backend` when the cases are planned, after `--import` plugins registered theirs."""
    d = f"default {default}" if default else "default: the device's (inductor; openxla on xla)"
    p.add_argument(
        "--compile-backend",
        dest="compile_backend",
        default=default,
        metavar="NAME",
        help=f"torch.compile backend ({d}{extra_help}); a plugin can register more (--import)",
    )
    refuse_old(p, ["--backend"], "--compile-backend")


# The backends torch registers itself, in every torch this project supports. Planning accepts them without
# importing torch._dynamo (~2 s of CPU in the command's own process, which compiles nothing: the worker does);
# any other name, or any name once a plugin has imported dynamo (to register its own), is checked against
# dynamo's registry.
TORCH_OWN_BACKENDS = frozenset({"inductor", "aot_eager", "eager"})


def check_compile_backend(name: str, flag: str = "--compile-backend", allow_none: bool = False) -> str:
    """`name` if torch.compile knows it here (torch's backends and those registered by plugins), else
    BadInput naming the ones it knows. `allow_none`: "none" (no compile) passes."""
    if allow_none and name.lower() == "none":
        return "none"
    if name in TORCH_OWN_BACKENDS and "torch._dynamo" not in sys.modules:
        return name  # registered by torch itself in every release we support: no need to import dynamo to know
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if name not in known:
        raise BadInput(
            f"unknown {flag} {name!r}; registered here: {', '.join(sorted(known))} "
            "(a plugin can register more: --import MODULE)"
        )
    return name
