"""Device adapters: the registry, the plugin example of docs/examples/device_adapter.py, a missing backend
package named in one line, the run's one peak FLOP/s, MFU above 100% as an error."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch

from bringup import device as bd
from bringup.case import Case, CaseResult, Status
from bringup.device.adapter import SHIPPED, load_family
from bringup.errors import BadInput
from tests.conftest import REPO, assert_one_line_error


def _example() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("device_adapter_example", REPO / "docs/examples/device_adapter.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_plugin_example_registers_an_adapter_that_the_timer_goes_through(monkeypatch) -> None:
    steps: list[int] = []
    core = types.ModuleType("habana_frameworks.torch.core")
    core.mark_step = lambda: steps.append(1)  # type: ignore[attr-defined]
    for name, m in (
        ("habana_frameworks", types.ModuleType("habana_frameworks")),
        ("habana_frameworks.torch", types.ModuleType("habana_frameworks.torch")),
        ("habana_frameworks.torch.core", core),
    ):
        monkeypatch.setitem(sys.modules, name, m)
    try:
        mod = _example()
        assert isinstance(bd.Device("hpu").adapter, mod.GaudiLazyAdapter)
        assert bd.Device("hpu").execution == "lazy" and bd.Device("hpu").distributed_backend() == "hccl"
        # the same class serving cpu (the only device here): the timer's stop() goes through its materialize
        bd.register_adapter("cpu", mod.GaudiLazyAdapter)
        t = bd.Device("cpu").timer()
        t.start()
        x = torch.ones(4) * 2
        assert t.stop(x) >= 0 and len(steps) == 2  # start() synchronized, stop() materialized
    finally:
        bd.unregister_adapter("hpu")
        bd.unregister_adapter("cpu")
    assert type(bd.Device("cpu").adapter).__name__ == "EagerAdapter"


def test_a_missing_backend_package_is_one_line_naming_its_install(monkeypatch) -> None:
    monkeypatch.setitem(SHIPPED, "xla", ("no_such_pkg_xla", "bringup.device.xla", "pip install torch-xla"))
    with pytest.raises(BadInput, match="needs the no_such_pkg_xla package.*pip install torch-xla"):
        load_family("xla")


def test_cli_device_xla_without_torch_xla(cli) -> None:
    if importlib.util.find_spec("torch_xla") is not None:
        pytest.skip("torch_xla is installed here")
    assert_one_line_error(cli("--device", "xla", "smoke"), "pip install torch-xla")


def test_one_peak_per_run_device_and_dtype(tmp_path: Path, monkeypatch) -> None:
    calls: list[torch.dtype] = []

    def fake(self, dtype=torch.bfloat16, calibrate=True):  # type: ignore[no-untyped-def]
        calls.append(dtype)
        return bd.PeakFlops(1e11 * (1 + len(calls)), "calibrated: test")

    monkeypatch.setattr(bd.Device, "peak_flops", fake)
    a = bd.run_peak(bd.Device("cpu"), torch.float32, tmp_path)
    b = bd.run_peak(bd.Device("cpu"), torch.float32, tmp_path)  # a later case of the run: the same figure
    c = bd.run_peak(bd.Device("cpu"), torch.bfloat16, tmp_path)
    assert a == b and a is not None and a.flops == 2e11 and c is not None and c.flops == 3e11
    assert calls == [torch.float32, torch.bfloat16]
    assert set(bd.read_run_peaks(tmp_path)) == {"cpu/fp32", "cpu/bf16"}


def test_mfu_above_100_percent_is_an_error_with_the_numbers() -> None:
    from bringup.train.suite import verdict
    from bringup.train.summary import mfu_impossible

    r = CaseResult.for_case(Case("train", "eager", {}, "x:y", 1), Status.PASS)
    r.metric("mfu", 0.4)
    assert mfu_impossible(r) == ""
    r.metric("mfu", 2.3)
    r.metric("peak_flops", 1e10)
    r.fields.update(achieved_flops=2.3e10, peak_flops_source="calibrated: fastest of 3 x 1024x1024 GEMM")
    why = mfu_impossible(r)
    assert "230.0%" in why and "2.3e+10" in why and "1e+10" in why and "calibrated" in why
    assert verdict([(Status.ERROR, why)])[0] is Status.ERROR
