"""`bringup compare`'s backend scorecard: each suite's own rows (Suite.scorecard, through the registry)
for two runs side by side: what a native eager device and a lazy one (PyTorch/XLA) support, measured.
The results here are made up to the shape the suites record (the real pair: docs/xla.md, the xla CI job)."""

from __future__ import annotations

import time

from bringup.case import Case, CaseResult, Status
from bringup.report.compare import scorecard
from bringup.store import RunInfo
from bringup.train.spec import TrainSpec
from tests.conftest import fake_run


def _run(device: str, peaks: dict | None = None) -> RunInfo:
    return fake_run(
        run_id="r-" + device,
        bringup_version="0.1",
        torch_version="2.9.0",
        device=device,
        device_name=f"{device} hw",
        started_at=time.time(),
        ended_at=None,
        info={"peak_flops": peaks or {}},
    )


def _probe(name: str, status: Status, **fields) -> CaseResult:
    r = CaseResult.for_case(Case("probe", name, {"feature": name, "kind": name.split(".")[0]}, "x:y", 1), status)
    r.fields.update(fields)
    return r


def _train(mode: str, ttfs: float, tok_s: float, mfu: float, status: Status = Status.PASS) -> CaseResult:
    spec = TrainSpec(mode=mode, cache="none" if mode == "eager" else "cold")
    r = CaseResult.for_case(Case("train", spec.name, spec.params(), "x:y", 1), status)
    r.metric("ttfs_s", ttfs)
    r.metric("tokens_per_s", tok_s)
    r.metric("mfu", mfu)
    r.metric("peak_flops", 1e11)
    if mode == "eager":
        r.fields["fallback_ops"] = {}
    return r


def test_side_by_side_rows_of_an_eager_and_a_lazy_device() -> None:
    cpu = [
        _probe("execution.eager", Status.PASS, execution="eager"),
        _probe("compile.inductor", Status.PASS),
        _probe("distributed.default", Status.PASS, backend="gloo"),
        _probe("distributed.dtensor", Status.PASS, backend="gloo"),
        _probe("distributed.fsdp2", Status.PASS, backend="gloo"),
        _train("eager", 1.5, 4000.0, 0.02),
        _train("compile", 20.0, 5000.0, 0.025),
    ]
    xla = [
        _probe("execution.eager", Status.UNSUPPORTED, execution="lazy", dropped_ms=0.1, kept_ms=110.0),
        _probe("compile.openxla", Status.PASS),
        _probe("distributed.default", Status.FAIL_NUMERIC, backend="xla"),
        _probe("distributed.dtensor", Status.UNSUPPORTED, backend="xla"),
        _probe("distributed.fsdp2", Status.UNSUPPORTED, backend="xla"),
        _train("eager", 9.2, 1542.0, 0.016),
        _train("compile", 20.8, 2077.0, 0.021),
    ]
    rows = {
        r["row"]: (r["a"], r["b"])
        for r in scorecard(
            _run("cpu"),
            cpu,
            _run("xla", {"xla/fp32": {"flops": 9.8e10, "source": "calibrated", "unit": "device"}}),
            xla,
        )
    }
    assert rows["probe: eager execution"][0] == "yes" and rows["probe: eager execution"][1].startswith("no: lazy")
    assert rows["probe: torch.compile"] == ("inductor pass", "openxla pass")
    assert rows["probe: torch.distributed"] == ("yes (gloo)", "fail_numeric (xla)")
    assert rows["probe: DTensor"][1].startswith("unsupported") and rows["probe: FSDP2"][0] == "yes (gloo)"
    assert rows["train: first step s"] == ("eager 1.5; compile (cold cache) 20", "eager 9.2; compile (cold cache) 20.8")
    assert rows["train: tokens/s"][1] == "eager 1,542; compile (cold cache) 2,077"
    assert rows["train: MFU"][1] == "eager 1.60%; compile (cold cache) 2.10%"
    assert rows["peak FLOP/s (this run's)"] == (None, "fp32 9.8e+10")
    assert rows["device"][1].startswith("xla (xla hw)")
