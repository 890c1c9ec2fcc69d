"""ops' planning (no device work): which OpInfos x dtypes become cases, from the command line or for
`bringup run` (--quick: a handful of everyday ops). The OpInfo database itself is PyTorch's."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from functools import cache
from typing import Any

import torch

from bringup.case import Case
from bringup.device import Device
from bringup.errors import BadInput, user_regex
from bringup.ops.args import DEFAULT_BUDGET_S, DEFAULT_DTYPES, DEFAULT_SAMPLES, OpsOptions  # the torch-free face (cli)
from bringup.options import TORCH_DTYPE_NAMES, Options, canonical_dtype

# The worker's entry. Results stored before the split name "bringup.ops.suite:run_op", which
# bringup.ops.suite still exports.
ENTRY = "bringup.ops.run:run_op"
# `bringup run --quick`: a handful of everyday ops, float32, 2 samples each (~1 min on 2 cpu cores).
QUICK_OPS = (
    "add",
    "mul",
    "div.no_rounding_mode",
    "matmul",
    "sin",
    "exp",
    "sum",
    "mean",
    "softmax",
    "nn.functional.relu",
    "nn.functional.gelu",
    "nn.functional.layer_norm",
    "cat",
    "index_select",
)
QUICK_SAMPLES = 2


def parse_dtypes(text: str) -> list[str]:
    """'fp32,bfloat16,int64' -> torch's names (the case params keep them: stored case ids do not change).
    A precision in any spelling of the one vocabulary (bringup/options.py: fp32, float32, half ...), or any
    other dtype by torch's name (int64, bool, complex64); BadInput for anything else."""
    out: list[str] = []
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        key = canonical_dtype(name)
        dt = getattr(torch, TORCH_DTYPE_NAMES.get(key, key), None)
        if not isinstance(dt, torch.dtype):
            raise BadInput(f"unknown dtype {name!r} in --dtypes; e.g. fp32, bf16, fp16, int64, bool")
        canon = str(dt).removeprefix("torch.")
        if canon not in out:
            out.append(canon)
    if not out:
        raise BadInput("--dtypes is empty")
    return out


@cache
def op_db() -> tuple[Any, ...]:
    """PyTorch's OpInfo list. Importing it has side effects we undo: it parses sys.argv (given a
    clean one) and freezes torch.backends flags (unfrozen again, so later cases can set them)."""
    argv = sys.argv
    sys.argv = argv[:1]
    try:
        from torch.testing._internal.common_methods_invocations import op_db as db  # lazy: optional
    except ImportError as e:
        raise BadInput(f"bringup ops needs PyTorch's OpInfo database, which needs the expecttest package: {e}") from e
    finally:
        sys.argv = argv
        setattr(torch.backends, "__allow_nonbracketed_mutation_flag", True)
    return tuple(db)


def op_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else str(op.name)


def find_op(name: str) -> Any:
    for op in op_db():
        if op_name(op) == name:
            return op
    raise KeyError(name)


def _cases(names: Iterable[str], dtypes: list[str], samples: int, budget: float) -> list[Case]:
    cases = []
    for name in names:
        for dt in dtypes:
            params = {"op": name, "dtype": dt, "samples": samples}
            cases.append(Case("ops", f"{name}:{dt}", params, ENTRY, budget))
    return cases


def build_cases(options: Options, device: Device) -> list[Case]:
    opts = options.of(OpsOptions)
    if opts.samples <= 0:
        raise BadInput(f"--samples must be a positive integer, got {opts.samples}")
    dtypes = parse_dtypes(opts.dtypes)
    pattern = None if opts.filter is None else user_regex(opts.filter, "--filter")
    names = [op_name(op) for op in op_db()]
    if pattern is not None:
        names = [n for n in names if pattern.search(n)]
        if not names:
            raise BadInput(f"--filter {opts.filter!r} matches no OpInfo (of {len(op_db())}); e.g. '^(add|sin)$'")
    return _cases(names, dtypes, opts.samples, opts.case_budget)


def run_cases(device: Device, quick: bool) -> list[Case]:
    if quick:
        return _cases(QUICK_OPS, ["float32"], QUICK_SAMPLES, DEFAULT_BUDGET_S)
    return _cases([op_name(op) for op in op_db()], parse_dtypes(DEFAULT_DTYPES), DEFAULT_SAMPLES, DEFAULT_BUDGET_S)
