"""train's options on `bringup run` (bringup.api.RunOptions): --save-cache-artifact / --load-cache-artifact
mean there what they mean in `bringup train` (docs/train.md). torch-free: the parser imports this module;
`apply` imports the suite when the options are given."""

from __future__ import annotations

import argparse
from typing import Any

from bringup.api import RunOptions, RunPart, register_run_options
from bringup.case import Case


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--save-cache-artifact", metavar="PATH", default=None,
                   help="train: the full compile cold case also writes a portable warm cache here")  # fmt: skip
    p.add_argument("--load-cache-artifact", metavar="PATH", default=None,
                   help="train: the artifact's mode starts from it in empty cache dirs (docs/train.md)")  # fmt: skip


def apply(args: argparse.Namespace, device: Any, cases: list[Case], picked: bool) -> RunPart | None:
    """Given with train left out (--skip train): the run has no train case to give them to (BadInput)."""
    save, load = getattr(args, "save_cache_artifact", None), getattr(args, "load_cache_artifact", None)
    if not (save or load):
        return None
    from bringup.train.suite import apply_artifact_flags

    return RunPart(apply_artifact_flags(cases, save, load, device))


register_run_options(RunOptions("train", add_arguments, apply))
