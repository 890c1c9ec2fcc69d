"""train's options on `bringup run` (bringup.api.RunOptions): --save-cache-artifact / --load-cache-artifact
mean there what they mean in `bringup train` (docs/train.md). torch-free: the parser imports this module;
`apply` imports the suite when the options are given."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bringup.api import RunOptions, RunPart, register_run_options
from bringup.case import Case
from bringup.options import CommandOptions, Options, measured, not_measured

if TYPE_CHECKING:
    from bringup.device import Device


@dataclass(frozen=True)
class TrainRunOptions(CommandOptions):
    """add_arguments' dests, `Options.parts["train"]` on `bringup run`."""

    save_cache_artifact: str | None = not_measured(None, "one more copy of the artifact every cold case writes anyway")
    load_cache_artifact: str | None = measured(None, "train's artifact arm starts from this file")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--save-cache-artifact",
        metavar="PATH",
        default=None,
        help="train: the full compile cold case also writes a portable warm cache here",
    )
    p.add_argument(
        "--load-cache-artifact",
        metavar="PATH",
        default=None,
        help="train: the artifact's mode starts from it in empty cache dirs (docs/train.md)",
    )


def apply(options: Options, device: Device, cases: list[Case], picked: bool) -> RunPart | None:
    """Given with train left out (--skip train): the run has no train case to give them to (BadInput)."""
    opts = options.part("train", TrainRunOptions) or TrainRunOptions()
    save, load = opts.save_cache_artifact, opts.load_cache_artifact
    if not (save or load):
        return None
    from bringup.train.suite import apply_artifact_flags  # lazy: torch-free --help

    return RunPart(apply_artifact_flags(cases, save, load, device))


register_run_options(RunOptions("train", add_arguments, apply, options=TrainRunOptions))
