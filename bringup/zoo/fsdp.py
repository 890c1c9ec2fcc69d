"""zoo --size full / --full-top over `--nproc` ranks: a model that does not fit one device, sharded with FSDP2.

When the memory preflight says the model does not fit one device and `--nproc N` is at least the number of
devices FSDP2 sharding would need (models/memory.py `suggested_nproc`), the case runs on N ranks instead of
being reported `unsupported`:

- ranks: torchrun's launcher API (`elastic_launch`, standalone rendezvous on localhost, spawned processes in the
  worker's process group: a budget kill takes them too), the process group's backend by device (gloo on cpu;
  device/dist.py `backend_for`), as `bringup train --nproc` does;
- the model: built on the meta device, then materialised one FSDP2 unit at a time on the host (each decoder
  block, then what is left at the root), initialised there exactly as the single-device build does
  (hub/build.py `build_full`: transformers' own per-module init, then `init_full`'s seeded draw per parameter,
  indexed as in the whole model) and handed to `fully_shard` (which moves its shard to the device). No rank ever
  holds more than one block unsharded on the host, and every rank holds 1/N of each parameter on the device;
  the values are those of the unsharded model, so its runs compare with a single-device run or a bundle;
- training: the global batch (`--batch`, divisible by N) is split across the ranks; FSDP2 averages the
  gradients, so the step equals the single-device step on the whole batch. Per step: the loss (mean over
  ranks), the total grad norm (clip_grad_norm_ over the DTensor grads), the logits' std (pooled over ranks),
  and at step 0 each parameter's grad norm (local shards' squares summed over ranks): the series the
  single-device full-size case records, judged by the same rules (zoo/full.py).
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import os
import resource
import traceback
import uuid
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.fsdp import fully_shard
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from bringup.device import Device
from bringup.device.dist import backend_for
from bringup.hub import build
from bringup.models import tiny as mz
from bringup.models.lm import decoder_layers
from bringup.precision import Precision
from bringup.zoo.spec import ZooSpec, config_data
from bringup.zoo.steps import FULL_LR, MAX_GRAD_NORM, Feed, StepHooks, StepOutputs, no_dropout, step_fn, train_steps

ERROR_FILE = "rank{rank}-error.json"


def wants_shards(est: Any, nproc: int) -> bool:
    """The preflight said no, and N ranks are enough."""
    n = est.suggested_nproc()
    return est.fits() is False and nproc > 1 and n is not None and n <= nproc


def run_sharded(
    p: dict[str, Any],
    dev: Device,
    prec: Precision,
    steps: int,
    backend: str,
    nproc: int,
    imports: tuple[str, ...],
    workdir: Path,
) -> dict[str, Any]:
    """Launch the ranks; rank 0's outcome: {"eager": series, "compiled": series | None, "compiled_error",
    "ranks": [{"rank", "local_params", "peak_rss_bytes"}], "params"}. A rank's failure raises RankFailed."""

    if not dev.is_cpu and nproc > dev.count():
        raise RuntimeError(f"--nproc {nproc}: only {dev.count()} {dev.type} device(s)")
    if (batch := ZooSpec.from_params(p).batch) % nproc:
        raise ValueError(f"--batch {batch} does not split over --nproc {nproc} ranks")
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("rank*-error.json"):
        old.unlink()
    cfg = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=f"bringup-zoo-{uuid.uuid4().hex[:12]}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(workdir / "logs")),
    )
    try:
        out = elastic_launch(cfg, rank_main)(p, dev.type, list(imports), str(workdir), steps, backend)
    except Exception as e:
        errs = sorted(workdir.glob("rank*-error.json"), key=lambda q: q.stat().st_mtime)
        if not errs:
            raise
        err = json.loads(errs[0].read_text())
        raise RankFailed(
            f"rank {errs[0].name.split('-')[0].removeprefix('rank')}: {err['message']}", err.get("traceback", "")
        ) from e
    got = out.get(0)
    if not isinstance(got, dict):
        raise RuntimeError("rank 0 returned no result")
    return got


class RankFailed(RuntimeError):
    def __init__(self, message: str, tb: str) -> None:
        super().__init__(message)
        self.tb = tb


def rank_main(
    p: dict[str, Any], device_type: str, imports: list[str], workdir: str, steps: int, backend: str
) -> dict[str, Any] | None:
    """One rank (a process spawned by the elastic agent)."""

    for m in imports:
        importlib.import_module(m)
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    device = Device("cpu") if device_type == "cpu" else Device(device_type, local)
    try:
        _set_device(device)
        dist.init_process_group(backend=backend_for(device))
        prec = ZooSpec.from_params(p).prec
        out: dict[str, Any] = {"eager": None, "compiled": None, "compiled_error": None}
        eager, local_n = train(p, device, prec, steps, rank, world, None)
        out["eager"] = eager
        if backend != "none":
            try:
                out["compiled"], _ = train(p, device, prec, steps, rank, world, backend)
            except Exception as e:  # a compile failure is the case's finding, not a dead launch
                out["compiled_error"] = {
                    "message": f"{type(e).__name__}: {e}".splitlines()[0][:300],
                    "traceback": traceback.format_exc(),
                }
        stats = torch.tensor([float(local_n), float(_peak_rss())], dtype=torch.float64)
        gathered = [torch.zeros_like(stats) for _ in range(world)]
        dist.all_gather(gathered, stats)
        out["ranks"] = [
            {"rank": i, "local_params": int(g[0]), "peak_rss_bytes": int(g[1])} for i, g in enumerate(gathered)
        ]
    except BaseException as e:
        err = {"message": f"{type(e).__name__}: {e}".splitlines()[0][:300], "traceback": traceback.format_exc()}
        (Path(workdir) / ERROR_FILE.format(rank=rank)).write_text(json.dumps(err))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return out if rank == 0 else None


def _set_device(device: Device) -> None:
    """This rank's device as the current one (train/distributed.py does the same for `bringup train`)."""
    if device.is_cpu or device.index is None:
        return
    if device.is_accelerator:
        torch.accelerator.set_device_index(device.index)
    elif (fn := getattr(device.module, "set_device", None)) is not None:
        fn(device.index)


def _peak_rss() -> int:

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def build_sharded(
    data: dict[str, Any], name: str, device: Device, dtype: torch.dtype, seed: int, world: int
) -> tuple[torch.nn.Module, str, int]:
    """(FSDP2-sharded model on `device`, task, parameters held by this rank), with the single-device values."""

    model, task = build.meta_model(data, name)
    model = model.to(dtype)
    index: dict[str, int] = {}  # parameter name -> init_full's draw index (a tied one: its first name's)
    first: dict[int, int] = {}
    for i, (n, prm) in enumerate(model.named_parameters(remove_duplicate=False)):
        index[n] = first.setdefault(id(prm), i)
    std = build.init_std(model.config)
    mesh = init_device_mesh(device.type, (world,))
    try:
        blocks = list(decoder_layers(model))
    except Exception:
        blocks = []
    names = {id(m): n for n, m in model.named_modules()}
    for block in blocks:
        _materialise(model, block, names[id(block)], index, std, seed)
        fully_shard(block, mesh=mesh)
    _materialise(model, model, "", index, std, seed)
    if hasattr(model, "tie_weights"):
        model.tie_weights()  # type: ignore[operator]  # transformers' method, typed by Module.__getattr__
    fully_shard(model, mesh=mesh)
    model.train()
    local = 0
    seen: set[int] = set()
    for prm in model.parameters():
        if id(prm) not in seen:
            seen.add(id(prm))
            t = prm.to_local() if hasattr(prm, "to_local") else prm
            local += t.numel()
    return model, task, local


def _materialise(
    model: torch.nn.Module, unit: torch.nn.Module, prefix: str, index: dict[str, int], std: float, seed: int
) -> None:
    """The still-meta parameters and buffers under `unit`, on the host, initialised as build_full does."""

    owner = _owner(model, unit)
    todo = [
        (n, m)
        for n, m in unit.named_modules(prefix=prefix)
        if any(t.is_meta for t in [*m.parameters(recurse=False), *m.buffers(recurse=False)])
    ]
    for _, m in todo:
        m.to_empty(device="cpu", recurse=False)
    with torch.no_grad():
        for n, m in reversed(todo):  # children before parents, as transformers' smart_apply
            init = getattr(owner.get(id(m), model), "_initialize_weights", None)
            if init is not None:
                init(m, False)
            for pn, prm in m.named_parameters(recurse=False):
                full = f"{n}.{pn}" if n else pn
                if not prm.is_floating_point() or prm.numel() == 0:
                    continue
                lo, hi = float(prm.min()), float(prm.max())
                if lo == hi and lo != 0.0:
                    continue  # a constant (norm weights): kept, as init_full does
                scale = mz.NONZERO_STD if lo == hi else std
                g = torch.Generator().manual_seed(seed * 1_000_003 + index[full])
                flat = prm.view(-1)
                for start in range(0, flat.numel(), build.INIT_CHUNK):
                    k = min(build.INIT_CHUNK, flat.numel() - start)
                    flat[start : start + k].copy_(torch.randn(k, generator=g) * scale)


def _owner(model: torch.nn.Module, unit: torch.nn.Module) -> dict[int, Any]:
    """Module -> the closest PreTrainedModel above it (its `_initialize_weights` inits it, as smart_apply)."""
    # lazy: transformers imports torchvision, which needs the shim bringup.models installs (bringup/compat.py);
    # at the top, isort puts it before bringup.models, and a torchrun rank importing this module first fails
    from transformers import PreTrainedModel

    out: dict[int, Any] = {}

    def walk(m: torch.nn.Module, own: Any) -> None:
        own = m if isinstance(m, PreTrainedModel) else own
        out[id(m)] = own
        for c in m.children():
            walk(c, own)

    walk(model, model)
    return out


def train(
    p: dict[str, Any], device: Device, prec: Precision, steps: int, rank: int, world: int, backend: str | None
) -> tuple[dict[str, Any], int]:
    """K AdamW steps of the sharded model on this rank's slice of each global batch (zoo/steps.py's loop);
    the pooled series."""

    spec = ZooSpec.from_params(p)
    seed = spec.seed
    model, task, local = build_sharded(config_data(spec), spec.model, device, prec.param_dtype, seed, world)
    no_dropout(model)
    gb, seq = spec.batch, spec.seq
    make = build.batches_for(model, task, gb, seq, seed)
    per = gb // world
    dev = device.torch_device
    fn = step_fn(mz.call_kwargs, mz.hf_loss, mz.first_float, model, prec, dev.type, backend)
    opt = torch.optim.AdamW(model.parameters(), lr=FULL_LR)
    series: dict[str, Any] = {"loss": [], "grad_norm": [], "logits_std": [], "grad_norms0": {}, "seconds": 0.0}

    params = inspect.signature(model.forward).parameters
    takes_items = "num_items_in_batch" in params or any(q.kind is q.VAR_KEYWORD for q in params.values())

    def batch_at(i: int) -> dict[str, Any]:
        full = make(i)
        part = {
            k: (v[rank * per : (rank + 1) * per] if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == gb else v)
            for k, v in full.items()
        }
        return {**part, **global_items(full, world)} if takes_items else part

    def at_step0(outputs: StepOutputs) -> None:
        series["grad_norms0"] = _grad_norms(model)

    def after_clip(outputs: StepOutputs, gn: torch.Tensor) -> None:
        gn = gn.full_tensor() if hasattr(gn, "full_tensor") else gn
        loss = outputs.loss
        pooled = torch.stack([loss.detach().to(torch.float64)] + [m.to(loss.device) for m in outputs.moments()])
        dist.all_reduce(pooled)
        series["loss"].append(float(pooled[0]) / world)
        n, s1, s2 = float(pooled[1]), float(pooled[2]), float(pooled[3])
        series["logits_std"].append(math.sqrt(max(0.0, (s2 - s1 * s1 / n) / (n - 1))) if n > 1 else math.nan)
        series["grad_norm"].append(float(gn.detach().to("cpu", torch.float64)))

    # no GradScaler here (as before the loop was shared): the sharded run trains in the param dtype
    feed = Feed(batch_at, steps, dev, prec.param_dtype)
    hooks = StepHooks(at_step0=at_step0, after_clip=after_clip)
    series["seconds"], _ = train_steps(model, fn, opt, feed, hooks, max_grad_norm=MAX_GRAD_NORM)
    return series, local


def global_items(full: dict[str, Any], world: int) -> dict[str, Any]:
    """What makes each rank's loss a share of the whole batch's: a causal LM's loss is a mean over its labelled
    tokens, and rows labelled unevenly (padding, packed documents' first tokens) give ranks unequal counts, so the
    mean of the ranks' means (what FSDP2's averaged gradients compute) is not the single-device step. transformers
    divides the summed loss by `num_items_in_batch` when given: the global count / world, so that the average over
    the ranks is the global mean, as HF Trainer and TorchTitan normalise data-parallel losses."""
    labels = full.get("labels")
    if not isinstance(labels, torch.Tensor) or labels.dim() != 2:
        return {}
    count = int((labels[:, 1:] != -100).sum())  # the shifted labels a causal LM's loss reads
    return {"num_items_in_batch": torch.tensor(count / world, dtype=torch.float32)} if count else {}


def _grad_norms(model: torch.nn.Module) -> dict[str, float]:
    """Each parameter's grad norm at step 0: the local shards' squared norms, summed over the ranks."""

    names, sq = [], []
    for n, q in model.named_parameters():
        if q.grad is not None:
            g = q.grad.to_local() if hasattr(q.grad, "to_local") else q.grad
            names.append(n)
            sq.append(g.detach().to(torch.float64).pow(2).sum())
    if not sq:
        return {}
    v = torch.stack(sq)
    dist.all_reduce(v)
    return {n: float(x) for n, x in zip(names, v.sqrt().cpu(), strict=True)}
