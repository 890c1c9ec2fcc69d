"""probe's runtime features judge what the ranks got (probe/runtime.py): each verdict fails on a
wrong result. The ranks' outputs are made up here (the real runs: tests/testdev/test_testdev_cli.py on
cpu with gloo, and the xla CI job); the execution probe runs for real on cpu."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bringup.case import Case, Status
from bringup.device import Device
from bringup.probe import runtime as pr


def _case(kind: str) -> Case:
    return Case("probe", f"distributed.{kind}", {"feature": f"distributed.{kind}", "kind": kind}, "x:y", 60)


def _with_ranks(monkeypatch, ranks: list[dict[str, Any]], control: str = "pass") -> None:
    monkeypatch.setattr(pr, "_launch", lambda kind, device, imports: (ranks, ""))
    monkeypatch.setattr(pr, "_control", lambda kind: control)
    monkeypatch.setattr(Device, "distributed_backend", lambda self: "gloo")


def _good(kind: str) -> list[dict[str, Any]]:
    if kind == "distributed":
        return [{"all_reduce": 3 * torch.arange(8.0)} for _ in range(2)]
    if kind == "dtensor":
        x, w = (t.float() for t in pr._dtensor_inputs())
        return [{"matmul": x @ w, "sum": x.sum(), "local_rows": torch.tensor(4)} for _ in range(2)]
    ref = pr._fsdp_reference()
    out = []
    for r in range(2):
        d = {"loss": ref[f"loss.rank{r}"].float(), "sharded": torch.tensor(1)}
        out.append(d | {k: v.float() for k, v in ref.items() if k.startswith("param.")})
    return out


@pytest.mark.parametrize("kind", ["distributed", "dtensor", "fsdp2"])
def test_right_results_pass(monkeypatch, kind: str) -> None:
    _with_ranks(monkeypatch, _good(kind))
    r = pr.probe_distributed(_case(kind), Device("cpu"))
    assert r.status is Status.PASS, r.reason


def test_a_group_that_does_not_communicate_fails(monkeypatch) -> None:
    _with_ranks(monkeypatch, [{"all_reduce": (i + 1) * torch.arange(8.0)} for i in range(2)])  # xla on PJRT cpu
    r = pr.probe_distributed(_case("distributed"), Device("cpu"))
    assert r.status is Status.FAIL_NUMERIC and "did not communicate" in r.reason


def test_a_wrong_dtensor_sum_fails(monkeypatch) -> None:
    ranks = _good("dtensor")
    ranks[1]["sum"] = ranks[1]["sum"] / 2  # a partial sum never all-reduced
    _with_ranks(monkeypatch, ranks)
    assert pr.probe_distributed(_case("dtensor"), Device("cpu")).status is Status.FAIL_NUMERIC


def test_fsdp2_with_grads_not_averaged_fails(monkeypatch) -> None:
    ranks = _good("fsdp2")
    ref0 = pr._fsdp_model().to(torch.float64)
    for r in ranks:  # the step taken with 1% off grads: the updated parameters are off
        for k in [k for k in r if k.startswith("param.")]:
            before = dict(ref0.named_parameters())[k.removeprefix("param.")].detach().float()
            r[k] = before + (r[k] - before) * 1.01
    _with_ranks(monkeypatch, ranks)
    assert pr.probe_distributed(_case("fsdp2"), Device("cpu")).status is Status.FAIL_NUMERIC
    ranks = _good("fsdp2")
    ranks[0]["sharded"] = torch.tensor(0)
    _with_ranks(monkeypatch, ranks)
    r = pr.probe_distributed(_case("fsdp2"), Device("cpu"))
    assert r.status is Status.FAIL_NUMERIC and "plain" in r.reason


def test_a_rank_that_raises_is_unsupported_only_when_cpu_passes_the_same_code(monkeypatch) -> None:
    err = {
        "error": "RuntimeError: DeviceMesh process groups not initialized!",
        "unsupported": False,
        "where": "/x/site-packages/torch/distributed/device_mesh.py:805",
        "traceback": "tb",
    }
    _with_ranks(monkeypatch, [err, err], control="pass")
    monkeypatch.setattr(Device, "is_cpu", property(lambda self: False))
    r = pr.probe_distributed(_case("fsdp2"), Device("cpu"))
    assert r.status is Status.UNSUPPORTED and "torch/distributed/device_mesh.py:805" in r.reason
    _with_ranks(monkeypatch, [err, err], control="RuntimeError: boom")
    r = pr.probe_distributed(_case("fsdp2"), Device("cpu"))
    assert r.status is Status.ERROR and "boom" in r.reason


def test_execution_on_cpu_is_eager() -> None:
    case = Case("probe", "execution.eager", {"feature": "execution.eager", "kind": "execution"}, "x:y", 60)
    r = pr.probe_execution(case, Device("cpu"))
    assert r.status is Status.PASS and r.fields["execution"] == "eager", r.reason


def test_execution_of_a_device_that_skips_dropped_work_is_lazy(monkeypatch) -> None:
    monkeypatch.setattr(pr, "_gemm_times", lambda device, n: (0.0001, 0.05))
    case = Case("probe", "execution.eager", {"feature": "execution.eager", "kind": "execution"}, "x:y", 60)
    r = pr.probe_execution(case, Device("cpu"))
    assert r.status is Status.UNSUPPORTED and r.fields["execution"] == "lazy" and "note" in r.fields
