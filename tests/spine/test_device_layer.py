"""Device layer: peak FLOPs table and calibration, timers, memory on cpu."""

from __future__ import annotations

import mmap

import pytest
import torch

from bringup.device import PEAK_TABLE, Device, dtype_name, parse_dtype, resolve_device, table_peak


def test_table_rows_have_sources_and_units() -> None:
    for row in PEAK_TABLE:
        assert row.source and row.unit
        assert row.bf16 is None or row.bf16 > 1e12


def test_table_lookup_by_device_name() -> None:
    assert table_peak("NVIDIA H100 80GB HBM3", torch.bfloat16).bf16 == 989e12
    assert table_peak("NVIDIA H100 PCIe", torch.bfloat16).bf16 == 756e12
    assert table_peak("NVIDIA H100 NVL", torch.bfloat16).bf16 == 835e12
    assert table_peak("AMD Instinct MI300X", torch.bfloat16).bf16 == 1300e12
    assert table_peak("Trainium2", torch.bfloat16).bf16 == 667e12
    # Trainium3 has no sourced bf16 figure: not in the table -> calibrated
    assert table_peak("Trainium3", torch.bfloat16) is None
    # unknown device: None (calibrated), never a silent A100 guess
    assert table_peak("Some New Accelerator", torch.bfloat16) is None


def test_cpu_peak_is_calibrated_and_positive() -> None:
    pk = Device("cpu").peak_flops(torch.float32)
    assert pk is not None and pk.calibrated and pk.flops > 1e8
    assert "GEMM" in pk.source


def test_peak_env_override(monkeypatch) -> None:
    monkeypatch.setenv("BRINGUP_PEAK_FLOPS", "123e12")
    pk = Device("cpu").peak_flops(torch.bfloat16)
    assert pk is not None and pk.flops == 123e12 and "override" in pk.source


def test_timer_and_memory_on_cpu() -> None:
    d = resolve_device("cpu")
    assert not d.has_timing_events  # cpu has no timing events: perf_counter after sync
    t = d.timer()
    t.start()
    x = torch.randn(256, 256)
    for _ in range(5):
        x = x @ x.T / 256
    dt = t.stop(x)
    assert 0 < dt < 60
    with pytest.raises(TypeError, match="needs what the timed region produced"):
        t.stop()  # a timer that is handed nothing cannot say the work was done
    d.reset_peak_memory()
    before = d.peak_memory()
    # 64 MiB of fresh anonymous pages, touched: a malloc'ed buffer can reuse pages the process already
    # holds (in a long pytest process the peak then did not move: 909512704 before and after)
    blob = mmap.mmap(-1, 64 << 20)
    blob.write(b"x" * (64 << 20))
    after = d.peak_memory()
    assert before is not None and after is not None and after >= before + (48 << 20)
    assert d.memory_allocated() is not None
    blob.close()


def test_dtype_names_round_trip() -> None:
    for name in ("fp32", "bf16", "fp16"):
        assert dtype_name(parse_dtype(name)) == name


def test_auto_skips_an_accelerator_that_is_built_in_but_absent(monkeypatch) -> None:
    from bringup import device as d

    # a CUDA build on a machine with no GPU: compiled in, not available
    monkeypatch.setattr(torch._C, "_accelerator_getAccelerator", lambda: torch.device("cuda"))
    assert d.built_accelerator() == torch.device("cuda")
    assert d.available_accelerator() is None
    dev, why = d.auto_choice()
    assert dev.name == "cpu" and "built with 'cuda'" in why and "no cuda device" in why
    assert resolve_device("auto").name == "cpu"
    assert d.known_types() == ["cpu"]
    assert not Device("cpu").is_accelerator
