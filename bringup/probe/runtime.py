"""probe's runtime features, the ones the articles compare backends by: the execution model (eager or
lazy), torch.distributed with the device's own backend, DTensor and FSDP2. Each is measured on the
device, never assumed from what the backend is:

    execution.eager       a GEMM whose result is dropped vs one that is kept: an eager (or async) device
                          runs both, a lazy one never runs the first. pass = eager; unsupported = lazy
                          (the reason gives both times, and the adapter's opt-in eager switch measured)
    distributed.default   2 ranks (spawned processes, the device's backend from its adapter), an
                          all_reduce whose result is not any rank's input (rank r sends (r + 1) * arange)
    distributed.dtensor   a DTensor matmul (Shard(0) x Replicate) and a sum (Partial -> all-reduce) on a
                          2-rank device mesh, full_tensor() vs float64
    distributed.fsdp2     FSDP2 (fully_shard) on a small MLP over 2 ranks, one SGD step on a split batch:
                          the loss and the updated (full) parameters vs one float64 step on the whole batch

A rank that raises is judged against a control: the same feature, the same code, on cpu with gloo.
When the control passes, the failure is the device stack's (`unsupported`, naming where it was raised:
e.g. inside torch_xla's DTensor entry point, or torch's DeviceMesh for the device type); when the
control fails too, it is `error` (this probe or the environment).
"""

from __future__ import annotations

import datetime
import os
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import is_unsupported
from bringup.checks.parity import parity
from bringup.device import Device, resolve_device
from bringup.runner.worker import import_plugins

WORLD = 2
TIMEOUT_S = 90.0


# What decides the execution verdict, with its reason.
LAZY_RATIO = 0.25  # a dropped GEMM costing under a quarter of a kept one was not run: sync overhead is
# well under that at the probe's sizes (XLA on cpu: 0.5 ms vs 30-80 ms; cuda: ~10 us vs 0.2+ ms)


def _median_time(fn: Callable[[], float], n: int = 5) -> float:
    return statistics.median(fn() for _ in range(n))


def _gemm_times(device: Device, n: int) -> tuple[float, float]:
    """(dropped, kept) seconds: a GEMM whose result is dropped at once then a synchronize, and one whose
    result is held and materialized."""
    a = torch.randn(n, n, device=device.torch_device)
    b = torch.randn(n, n, device=device.torch_device)
    device.materialize(a, b)
    device.materialize(torch.mm(a, b))  # warm-up (a lazy device compiles the graph once)

    def dropped() -> float:
        device.synchronize()
        t0 = time.perf_counter()
        torch.mm(a, b)
        device.synchronize()
        return time.perf_counter() - t0

    def kept() -> float:
        device.synchronize()
        t0 = time.perf_counter()
        c = torch.mm(a, b)
        device.materialize(c)
        return time.perf_counter() - t0

    kept()
    return _median_time(dropped), _median_time(kept)


def probe_execution(case: Case, device: Device) -> CaseResult:
    n = 1024 if device.is_cpu or "CPU" in device.device_name else 2048
    drop, keep = _gemm_times(device, n)
    lazy = keep > 0 and drop < LAZY_RATIO * keep
    what = f"a dropped {n}x{n} GEMM + synchronize took {drop * 1e3:.3g} ms, a kept one {keep * 1e3:.3g} ms"
    r = CaseResult.for_case(case, Status.UNSUPPORTED if lazy else Status.PASS)
    r.fields |= {
        "execution": "lazy" if lazy else "eager",
        "dropped_ms": drop * 1e3,
        "kept_ms": keep * 1e3,
        "declared": device.execution,
    }
    if lazy:
        r.reason = f"lazy execution: ops are recorded and run on sync; {what} (never run)"
        switch = device.adapter.eager_switch()
        if switch is not None:
            name, ctx = switch
            with ctx():
                d2, k2 = _gemm_times(device, n)
            mode = "eager" if not (k2 > 0 and d2 < LAZY_RATIO * k2) else "still lazy"
            r.fields["eager_switch"] = {"name": name, "execution": mode, "dropped_ms": d2 * 1e3, "kept_ms": k2 * 1e3}
            r.reason += f"; with {name}: {mode} ({d2 * 1e3:.3g} ms vs {k2 * 1e3:.3g} ms)"
    else:
        r.reason = f"eager: {what}"
    if device.execution != r.fields["execution"]:
        r.fields["note"] = f"the {device.family} adapter declares {device.execution} execution; measured otherwise"
    return r


# ---- torch.distributed, DTensor, FSDP2: 2 spawned ranks ----------------------------------------------
def _all_reduce(rank: int, world: int, dev: torch.device) -> dict[str, torch.Tensor]:
    t = (rank + 1) * torch.arange(8, dtype=torch.float32, device=dev)
    dist.all_reduce(t)
    return {"all_reduce": t.cpu()}


def _dtensor_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(21)
    return torch.randn(8, 16, generator=g, dtype=torch.float64), torch.randn(16, 4, generator=g, dtype=torch.float64)


def _dtensor(rank: int, world: int, dev: torch.device) -> dict[str, torch.Tensor]:
    mesh = init_device_mesh(dev.type, (world,))
    x, w = (t.to(torch.float32) for t in _dtensor_inputs())
    dx = distribute_tensor(x.to(dev), mesh, [Shard(0)])
    dw = distribute_tensor(w.to(dev), mesh, [Replicate()])
    y = dx @ dw  # sharded rows x replicated: sharded rows
    s = dx.sum()  # a partial sum per rank, all-reduced by full_tensor()
    return {
        "matmul": y.full_tensor().cpu(),  # type: ignore[attr-defined]  # a DTensor
        "sum": s.full_tensor().cpu(),  # type: ignore[attr-defined]  # a DTensor
        "local_rows": torch.tensor(dx.to_local().shape[0]),
    }


def _fsdp_model() -> torch.nn.Sequential:
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))


def _fsdp_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(22)
    return torch.randn(8, 16, generator=g, dtype=torch.float64), torch.randn(8, 8, generator=g, dtype=torch.float64)


FSDP_LR = 0.5


def _fsdp2(rank: int, world: int, dev: torch.device) -> dict[str, torch.Tensor]:
    mesh = init_device_mesh(dev.type, (world,))
    model = _fsdp_model().to(dev)
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    x, y = (t.to(torch.float32) for t in _fsdp_batch())
    rows = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    opt = torch.optim.SGD(model.parameters(), lr=FSDP_LR)
    loss = torch.nn.functional.mse_loss(model(x[rows].to(dev)), y[rows].to(dev))
    loss.backward()  # FSDP2 reduce-scatters the grads as their mean over ranks
    opt.step()
    out = {"loss": loss.detach().cpu().reshape(1)}
    out |= {f"param.{n}": p.full_tensor().detach().cpu() for n, p in model.named_parameters()}  # type: ignore[attr-defined]  # DTensors (fully_shard)
    out["sharded"] = torch.tensor(int(all(type(p).__name__ == "DTensor" for p in model.parameters())))
    return out


def _fsdp_reference() -> dict[str, torch.Tensor]:
    """One float64 SGD step on the whole batch; the loss per rank's half (what each rank reports)."""
    model = _fsdp_model().to(torch.float64)
    x, y = _fsdp_batch()
    opt = torch.optim.SGD(model.parameters(), lr=FSDP_LR)
    losses = []
    for r in range(WORLD):
        rows = slice(r * len(x) // WORLD, (r + 1) * len(x) // WORLD)
        losses.append(torch.nn.functional.mse_loss(model(x[rows]), y[rows]))
    (sum(losses) / WORLD).backward()  # type: ignore[union-attr]  # a sum of tensors; the mean of the ranks' losses: FSDP2's averaged grads
    opt.step()
    out = {f"loss.rank{r}": losses[r].detach().reshape(1) for r in range(WORLD)}
    return out | {f"param.{n}": p.detach().clone() for n, p in model.named_parameters()}


KINDS: dict[str, Callable[[int, int, torch.device], dict[str, torch.Tensor]]] = {
    "distributed": _all_reduce,
    "dtensor": _dtensor,
    "fsdp2": _fsdp2,
}


def _where(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    return f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""


def _rank(rank: int, world: int, kind: str, device: str, imports: tuple[str, ...], init: str, out: str) -> None:
    """One rank (a spawned process): import the plugins, resolve the device (its family's package is
    imported), join the group with the adapter's backend, run the feature; save what it got or its error."""
    res: dict[str, Any] = {}
    stage = "feature"
    try:
        import_plugins(list(imports))
        d = resolve_device(device)
        dev = d.torch_device
        if not d.is_cpu and d.index is None and d.count() > 1:
            dev = torch.device(d.type, rank % d.count())
        dist.init_process_group(
            d.distributed_backend(),
            init_method=init,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=TIMEOUT_S),
        )
        res = KINDS[kind](rank, world, dev)
        stage = "barrier"  # no rank tears its group down while another still talks to it
        dist.barrier()
    except BaseException as e:
        res = {
            "error": f"{type(e).__name__}: {e}".splitlines()[0][:300],
            "where": _where(e),
            "unsupported": is_unsupported(e),
            "traceback": "".join(traceback.format_exception(e))[-4000:],
            "at_barrier": stage == "barrier",  # this rank's feature ran: another rank's failure is the case's
        }
    finally:
        # Saved before the teardown: gloo's teardown can abort the process (`terminate called without an active
        # exception`, SIGABRT: seen on cpu 2 of 3 `make test` runs under load, after FSDP2 had finished right),
        # and a result the rank finished is not lost to it (_launch says what the teardown did).
        torch.save(res, f"{out}.{rank}")
        if dist.is_initialized():
            dist.destroy_process_group()


def _launch(kind: str, device: Device, imports: tuple[str, ...]) -> tuple[list[dict[str, Any]], str]:
    """Every rank's saved result, and what a rank's death in the teardown was ("" when none died)."""
    with tempfile.TemporaryDirectory(prefix="bringup-dist-") as tmp:
        init, out = f"file://{os.path.join(tmp, 'store')}", os.path.join(tmp, "result")
        try:
            mp.start_processes(
                _rank,
                args=(WORLD, kind, device.name, tuple(imports), init, out),
                nprocs=WORLD,
                join=True,
                start_method="spawn",
            )
        except mp.ProcessExitedException as e:
            # A rank died. Where every rank saved its result first, it died in the teardown after the feature
            # ran (its results stand, the teardown is said); else the death is the case's error.
            if not all(os.path.exists(f"{out}.{r}") for r in range(WORLD)):
                raise
            teardown = f"rank {e.error_index} died in the process group's teardown, after its result ({e})"
        else:
            teardown = ""
        return [torch.load(f"{out}.{r}", weights_only=True) for r in range(WORLD)], teardown


def _control(kind: str) -> str:
    """The same feature on cpu (gloo): "pass", or what failed there."""
    ranks, _ = _launch(kind, Device("cpu"), ())
    bad = next((x for x in ranks if "error" in x), None)
    return "pass" if bad is None else str(bad["error"])


def _short(where: str) -> str:
    """A file:line from a traceback, from the package root on (site-packages/torch_xla/... -> torch_xla/...)."""
    for marker in ("site-packages/", "/bringup/"):
        if marker in where:
            return where.split(marker, 1)[1] if marker == "site-packages/" else "bringup/" + where.split(marker, 1)[1]
    return where


def _judge(case: Case, got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor]) -> CaseResult:
    rep = parity(got, ref, torch.float32)
    r = CaseResult.for_case(case, Status.PASS if rep.ok else Status.FAIL_NUMERIC, "" if rep.ok else rep.summary())
    r.metric("max_rel_err", rep.max_rel_err)
    return r


def first_failure(ranks: list[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    """The failed rank a case names: one whose own feature failed before one that only met another rank's failure
    at the barrier; None when every rank passed."""
    failed = [(r, x) for r, x in enumerate(ranks) if "error" in x]
    return min(failed, key=lambda rx: (bool(rx[1].get("at_barrier")), rx[0]), default=None)


def probe_distributed(case: Case, device: Device, imports: tuple[str, ...] = ()) -> CaseResult:
    kind = case.params["kind"]
    what = {"distributed": "torch.distributed", "dtensor": "DTensor", "fsdp2": "FSDP2"}[kind]
    if not dist.is_available():
        return CaseResult.for_case(case, Status.UNSUPPORTED, "torch.distributed is not available in this torch build")
    backend = device.distributed_backend()
    if not backend:
        return CaseResult.for_case(
            case,
            Status.UNSUPPORTED,
            f"{what}: no torch.distributed backend is registered for device type {device.type!r}",
        )
    ranks, teardown = _launch(kind, device, imports)
    failed = first_failure(ranks)
    if failed is not None:
        return _rank_failed(case, device, what, backend, *failed)
    judge = {"distributed": _judge_all_reduce, "dtensor": _judge_dtensor}.get(kind, _judge_fsdp)
    res = judge(case, ranks, backend)
    res.fields |= {"backend": backend, "world_size": WORLD} | ({"teardown": teardown} if teardown else {})
    if res.status is Status.PASS:
        res.reason = f"backend {backend}, {WORLD} ranks" + (f"; {teardown}" if teardown else "")
    return res


def _rank_failed(case: Case, device: Device, what: str, backend: str, r: int, x: dict[str, Any]) -> CaseResult:
    """A rank raised: `unsupported` when the backend says so or the same code passes on cpu with gloo
    (the control), else `error`."""
    control = "" if device.is_cpu else _control(case.params["kind"])
    status = Status.UNSUPPORTED if x["unsupported"] or control == "pass" else Status.ERROR
    where = _short(x["where"])
    why = f"{what} with backend {backend}: rank {r}: {x['error']} (raised at {where}"
    why += (
        "; the same code passes on cpu with gloo)"
        if control == "pass"
        else (f"; on cpu with gloo: {control})" if control else ")")
    )
    res = CaseResult.for_case(case, status, why, error=x["traceback"])
    res.fields |= {"backend": backend, "world_size": WORLD, "raised_at": x["where"], "cpu_control": control}
    return res


def _judge_all_reduce(case: Case, ranks: list[dict[str, Any]], backend: str) -> CaseResult:
    total = WORLD * (WORLD + 1) / 2
    got = {f"rank{i}": x["all_reduce"] for i, x in enumerate(ranks)}
    ref = {k: total * torch.arange(8, dtype=torch.float64) for k in got}
    res = _judge(case, got, ref)
    if res.status is Status.FAIL_NUMERIC and all(
        torch.equal(x["all_reduce"], (i + 1) * torch.arange(8.0)) for i, x in enumerate(ranks)
    ):
        res.reason = (
            f"all_reduce over {WORLD} ranks with backend {backend!r} returned each rank's own input: "
            "the process group did not communicate"
        )
    return res


def _judge_dtensor(case: Case, ranks: list[dict[str, Any]], backend: str) -> CaseResult:
    x, w = _dtensor_inputs()
    xr = x.to(torch.float32).to(torch.float64)
    ref = {"matmul": xr @ w.to(torch.float32).to(torch.float64), "sum": xr.sum()}
    got = {f"rank{i}.{k}": v for i, t in enumerate(ranks) for k, v in t.items() if k != "local_rows"}
    res = _judge(case, got, {f"rank{i}.{k}": v for i in range(WORLD) for k, v in ref.items()})
    rows = [int(t["local_rows"]) for t in ranks]
    res.fields["local_rows"] = rows
    if res.status is Status.PASS and sum(rows) != len(x):
        res.status, res.reason = Status.FAIL_NUMERIC, f"Shard(0) split {len(x)} rows as {rows}"
    return res


def _judge_fsdp(case: Case, ranks: list[dict[str, Any]], backend: str) -> CaseResult:
    ref = _fsdp_reference()
    got: dict[str, torch.Tensor] = {f"loss.rank{i}": t["loss"] for i, t in enumerate(ranks)}
    got |= {k: v for k, v in ranks[0].items() if k.startswith("param.")}
    res = _judge(case, got, ref)
    if res.status is Status.PASS and not all(int(t["sharded"]) for t in ranks):
        res.status, res.reason = Status.FAIL_NUMERIC, "fully_shard left plain (not DTensor) parameters"
    return res
