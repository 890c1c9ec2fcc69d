"""Shared argument types: one validation (and one message) for the same kind of option everywhere.

argparse `type=` callables raise ArgumentTypeError, which the parser turns into one line and exit 2.
"""

from __future__ import annotations

import argparse

from bringup.errors import BadInput


def positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return v


def positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {s!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {s!r}")
    return v


def nonneg_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {s!r}")
    return v


def add_compile_backend(p: argparse.ArgumentParser, default: str | None = "inductor", dest: str = "compile_backend",
                        extra_help: str = "") -> None:  # fmt: skip
    """The one `--compile-backend NAME` option (old spelling `--backend` kept as an alias). Checked by
    `check_compile_backend` when the cases are planned, after `--import` plugins registered theirs."""
    d = f"default {default}" if default else "default: the device's (inductor; openxla on xla)"
    p.add_argument("--compile-backend", "--backend", dest=dest, default=default, metavar="NAME",
                   help=f"torch.compile backend ({d}{extra_help}); a plugin can register more (--import)")  # fmt: skip


def check_compile_backend(name: str, flag: str = "--compile-backend", allow_none: bool = False) -> str:
    """`name` if torch.compile knows it here (torch's backends and those registered by plugins), else
    BadInput naming the ones it knows. `allow_none`: "none" (no compile) passes."""
    if allow_none and name.lower() == "none":
        return "none"
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if name not in known:
        raise BadInput(f"unknown {flag} {name!r}; registered here: {', '.join(sorted(known))} "
                       "(a plugin can register more: --import MODULE)")  # fmt: skip
    return name


# --hub-rate (zoo's Hub sweeps, `bringup hub`): requests per 5-minute window to the Hub's API and /resolve/.
# Here, torch-free, so that `--help` shows them without importing the Hub code (bringup.models.hub_fetch).
FREE_API, FREE_RESOLVE = 1000, 5000  # a free user's requests per window (docs/hub/rate-limits)
DEFAULT_API, DEFAULT_RESOLVE = 900, 4500  # 90% of those
