"""--nproc N: N ranks started by torchrun's launcher API (`elastic_launch`, standalone rendezvous on
localhost), process-group backend by device (gloo on cpu, the device's default elsewhere), FSDP2
`fully_shard` per block then root (loop.shard). The launch runs inside the case's worker, and the ranks
are spawned (function entrypoint) into the worker's process group, so a budget kill takes them too.

Each rank trains on its own seeded data (DATA_SEED + rank). Rank 0 returns the outcome: the loss is
the mean over ranks and each step's time the slowest rank's. A rank that fails writes
`rank<R>-error.json` (stage, status, message) in the case's work dir before raising, so the case can
report what failed and how, not just "a child died".
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import threading
import traceback
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from bringup.case import Status
from bringup.checks.errors import classify, first_line
from bringup.device import Device
from bringup.device.dist import backend_for
from bringup.train import loop
from bringup.train.loop import StageError, TrainOutcome
from bringup.train.spec import TrainSpec

FIRST_STEP_MARKER = "first-step-done"


class RankError(Exception):
    """A rank's failure as the rank classified it (the exception itself stayed in that process)."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = Status(status)


def _set_device(device: Device) -> None:
    if device.is_cpu or device.index is None:
        return
    if device.is_accelerator:
        torch.accelerator.set_device_index(device.index)
    else:
        fn = getattr(device.module, "set_device", None)
        if fn is not None:
            fn(device.index)


def rank_main(params: dict[str, Any], device_type: str, imports: list[str], workdir: str) -> dict[str, Any] | None:
    """One rank (runs in a process spawned by the elastic agent)."""

    for m in imports:
        importlib.import_module(m)
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    device = Device("cpu") if device_type == "cpu" else Device(device_type, local)
    spec = TrainSpec.from_params(params)
    marker = Path(workdir) / FIRST_STEP_MARKER
    try:
        _set_device(device)
        dist.init_process_group(backend=backend_for(device))
        touch = (lambda: marker.touch()) if rank == 0 else None
        out = loop.train(spec, device, rank=rank, world=world, after_first=touch)
    except BaseException as e:
        stage = e.stage if isinstance(e, StageError) else "setup"
        exc = e.exc if isinstance(e, StageError) else e
        status = classify(exc, compiling=stage == "first_step" and spec.compiled)
        err = {"stage": stage, "status": status.value, "message": first_line(exc), "traceback": traceback.format_exc()}
        (Path(workdir) / f"rank{rank}-error.json").write_text(json.dumps(err))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return asdict(out) if rank == 0 else None


def launch(
    spec: TrainSpec,
    device: Device,
    imports: tuple[str, ...],
    workdir: Path,
    first_step: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> TrainOutcome:
    """Run spec on spec.nproc local ranks; `first_step` wraps the wait for rank 0's first step."""
    if not device.is_cpu and spec.nproc > device.count():
        raise StageError("build", RuntimeError(f"--nproc {spec.nproc}: only {device.count()} {device.type} device(s)"))
    workdir.mkdir(parents=True, exist_ok=True)
    for old in [workdir / FIRST_STEP_MARKER, *workdir.glob("rank*-error.json")]:
        old.unlink(missing_ok=True)
    cfg = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=spec.nproc,
        run_id=f"bringup-{uuid.uuid4().hex[:12]}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
    )
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            box["ret"] = elastic_launch(cfg, rank_main)(spec.params(), device.type, list(imports), str(workdir))
        except BaseException as e:
            box["exc"] = e

    th = threading.Thread(target=go, name="bringup-launch", daemon=True)
    th.start()
    with first_step():
        while th.is_alive() and not (workdir / FIRST_STEP_MARKER).exists():
            th.join(0.2)
    th.join()
    if "exc" in box:
        errs = sorted(workdir.glob("rank*-error.json"), key=lambda p: p.stat().st_mtime)  # first = the cause
        if not errs:
            raise StageError("launch", box["exc"])
        e = json.loads(errs[0].read_text())
        rank = errs[0].name.removeprefix("rank").split("-")[0]
        raise StageError(e["stage"], RankError(f"rank {rank}: {e['message']}", e["status"]))
    ret = box["ret"].get(0)
    if ret is None:
        raise StageError("launch", RuntimeError("rank 0 returned no result"))
    return TrainOutcome(**ret)
