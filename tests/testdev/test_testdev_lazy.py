"""The test device's lazy mode (csrc/lazy.h), and what it proves: a timer or a calibration that drops
the value it timed measures nothing on a lazy device, and bringup's do not (they hand it over).

`test_calibration_on_a_lazy_device_is_the_gemm_rate` fails against the calibration before the device
adapters (it timed `torch.mm(a, b)` and dropped the result: on lazy testdev that measured an empty
queue, tens of times cpu's GEMM rate), as `test_a_timer_that_drops_its_result_times_nothing` shows
with that code path written out."""

from __future__ import annotations

import pytest

from tests.testdev.conftest import run_py

LAZY = {"BRINGUP_TESTDEV_LAZY": "1"}


def test_lazy_mode_queues_computes_on_read_and_skips_what_nobody_reads(testdev_built: None) -> None:
    out = run_py(
        """
        import json, torch, bringup.testdev as td
        assert td.lazy()
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(64, 32, generator=g), torch.randn(32, 16, generator=g)
        da, db = a.to("testdev"), b.to("testdev")
        td.reset_lazy_stats()
        c = da @ db
        queued = td.lazy_stats()
        res = {"queued": queued, "mm": torch.allclose(c.cpu(), a @ b, atol=1e-5), "after_read": td.lazy_stats()}
        td.reset_lazy_stats()
        torch.mm(da, db)  # dropped at once: never computed
        (da * 2).sum()    # mul queued, its output read by the fallback's sum: computed
        torch.accelerator.synchronize()
        res["dropped"] = td.lazy_stats()
        x = da.clone(); x.mul_(3); x.add_(da)  # in place, in order
        res["inplace"] = torch.allclose(x.cpu(), a * 4)
        w = db.clone().requires_grad_()
        (da @ w).sum().backward()
        res["grad"] = torch.allclose(w.grad.cpu(), a.sum(0)[:, None].expand(32, 16), atol=1e-5)
        td.set_lazy(False)
        res["off"] = not td.lazy()
        print(json.dumps(res))
    """,
        env=LAZY,
    )
    assert out["queued"] == {"deferred": 1, "executed": 0, "skipped": 0, "flushes": 0}
    assert out["mm"] and out["after_read"]["executed"] == 1
    assert out["dropped"]["skipped"] == 1 and out["dropped"]["executed"] == 1
    assert out["inplace"] and out["grad"] and out["off"]


TIMES = """
    import json, time, torch, bringup.testdev as td
    from bringup.device import resolve_device
    d = resolve_device("testdev")
    a, b = torch.randn(768, 768, device="testdev"), torch.randn(768, 768, device="testdev")
    d.synchronize()

    def old_timer():  # the timer before the adapters: sync, clock, work, sync, clock (result dropped)
        d.synchronize(); t0 = time.perf_counter()
        torch.mm(a, b)
        d.synchronize(); return time.perf_counter() - t0

    def new_timer():
        t = d.timer(); t.start()
        c = torch.mm(a, b)
        return t.stop(c)

    old = min(old_timer() for _ in range(5))
    new = min(new_timer() for _ in range(5))
    cpu_a, cpu_b = a.cpu(), b.cpu()
    t0 = time.perf_counter(); [torch.mm(cpu_a, cpu_b) for _ in range(5)]; cpu = (time.perf_counter() - t0) / 5
    print(json.dumps({"old": old, "new": new, "cpu": cpu, "stats": td.lazy_stats()}))
"""


def test_a_timer_that_drops_its_result_times_nothing(testdev_built: None) -> None:
    lazy = run_py(TIMES, env=LAZY)
    # the dropped GEMM was never run: the old way times an empty queue; the timer that holds it times it
    assert lazy["stats"]["skipped"] >= 5
    assert lazy["old"] < 0.2 * lazy["new"], lazy
    assert lazy["new"] > 0.3 * lazy["cpu"], lazy  # testdev's mm is cpu's at::mm on the same memory
    eager = run_py(TIMES)  # the same code on the eager device: both ways time the GEMM
    assert eager["old"] > 0.3 * eager["new"], eager


def test_calibration_on_a_lazy_device_is_the_gemm_rate(testdev_built: None) -> None:
    out = run_py(
        """
        import json, torch, bringup.testdev as td
        from bringup.device import Device, resolve_device
        lazy = resolve_device("testdev").calibrate_peak_flops(torch.float32, seconds=0.5)
        cpu = Device("cpu").calibrate_peak_flops(torch.float32, seconds=0.5)
        print(json.dumps({"lazy": lazy.flops, "cpu": cpu.flops, "stats": td.lazy_stats()}))
    """,
        env=LAZY,
    )
    assert out["stats"]["deferred"] > 0  # the GEMMs were queued, not run at once
    # the same kernels on the same cores: within a factor of a few of cpu's rate (noisy machine), not the
    # tens to thousands of times cpu that timing an empty queue gives
    assert out["lazy"] < 3.0 * out["cpu"], out
    assert out["lazy"] > 0.1 * out["cpu"], out


@pytest.mark.slow  # ~110 s; the cheap forms: test_a_timer_that_drops_its_result_times_nothing, the calibration above
def test_training_on_the_lazy_device_times_its_steps(testdev_built: None, tmp_path) -> None:
    """The train loop on lazy testdev: every step's work is in its time (steady step within a few x of
    the eager device's) and MFU is a fraction of the run's one peak."""
    from tests.conftest import load_json, run_cli

    args = [
        "--import",
        "bringup.testdev",
        "--device",
        "testdev",
        "train",
        "--modes",
        "eager",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--batch",
        "1",
        "--seq",
        "32",
        "--override",
        "num_hidden_layers=1",
        "--json",
        "t.json",
    ]
    got = {}
    for name, env in (("lazy", LAZY), ("eager", {})):
        (tmp_path / name).mkdir()
        run_cli(args, tmp_path / name, env=env)  # exit 1: testdev runs most ops on its CPU fallback
        got[name] = load_json(tmp_path / name / "t.json")["modes"]["eager"]
    lz, eg = got["lazy"], got["eager"]
    assert lz["status"] in ("pass", "fallback") and 0 < lz["mfu"] < 1.0, lz
    assert lz["step_s"] > 0.25 * eg["step_s"], (lz["step_s"], eg["step_s"])
