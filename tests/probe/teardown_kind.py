"""Imported by the ranks of tests/probe/test_probe_teardown.py (the probe's --import path): two distributed kinds
whose process dies with SIGABRT as gloo's teardown sometimes makes it, one after its result is done and saved
(at interpreter exit), one before it has a result; and one whose rank 1 raises while rank 0 finishes (rank 0 then
meets the failure at the barrier before the teardown)."""

from __future__ import annotations

import atexit
import os

import torch

from bringup.probe import runtime


def _abort_at_exit(rank: int, world: int, dev: torch.device) -> dict[str, torch.Tensor]:
    if rank == 1:
        atexit.register(os.abort)  # after _rank saved the result and tore its group down
    return {"x": torch.tensor([float(rank)])}


def _abort_at_once(rank: int, world: int, dev: torch.device) -> dict[str, torch.Tensor]:
    if rank == 1:
        os.abort()
    return {"x": torch.tensor([float(rank)])}


def _fail_on_one(rank: int, world: int, dev: torch.device) -> dict[str, torch.Tensor]:
    if rank == 1:
        raise ValueError("rank 1's own failure")
    return {"x": torch.tensor([0.0])}


runtime.KINDS["abort_at_exit"] = _abort_at_exit
runtime.KINDS["abort_at_once"] = _abort_at_once
runtime.KINDS["fail_on_one"] = _fail_on_one
