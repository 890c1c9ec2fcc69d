"""The testdev device itself and the fallback detector against the backend's own counters.

Everything touching testdev runs in a subprocess (importing it makes PrivateUse1 the accelerator of
that process)."""

from __future__ import annotations

from tests.testdev.conftest import run_py


def test_device_layer_accelerator_events_memory(testdev_built: None) -> None:
    out = run_py("""
        import json, torch, bringup.testdev
        from bringup.device import resolve_device
        d = resolve_device("testdev")
        acc = torch.accelerator.current_accelerator()
        before = d.memory_allocated()
        x = torch.empty(1000, dtype=torch.float32, device="testdev")
        after = d.memory_allocated()
        d.reset_peak_memory()
        y = torch.empty(500, dtype=torch.float64, device="testdev")
        peak = d.peak_memory()
        del y
        t = d.timer(); t.start(); z = torch.randn(64, 64, device="testdev") @ torch.randn(64, 64, device="testdev")
        secs = t.stop(z)
        e1 = torch.Event(torch.device("testdev"), enable_timing=True); e1.record()
        e2 = torch.Event(torch.device("testdev"), enable_timing=True); e2.record(); e2.synchronize()
        print(json.dumps({"acc": acc.type, "count": d.count(), "name": d.device_name, "is_acc": d.is_accelerator,
            "grew": after - before, "peak_minus_now": peak - after, "events": d.has_timing_events,
            "secs": secs, "elapsed": e1.elapsed_time(e2), "dev": str(x.device), "mod": d.module.__name__}))
    """)
    assert out["acc"] == "testdev" and out["is_acc"] and out["count"] == 1
    assert out["dev"] == "testdev:0" and out["mod"] == "bringup.testdev.runtime"
    assert "testdev" in out["name"]
    assert out["grew"] == 4000  # the allocator counts exactly what was asked for
    assert out["peak_minus_now"] == 4000  # the 500 float64 freed, the peak keeps it
    assert out["events"] and out["secs"] > 0 and out["elapsed"] >= 0


def test_native_ops_compute_right_and_autograd_works(testdev_built: None) -> None:
    out = run_py("""
        import json, torch, bringup.testdev as td
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g)
        da, db = a.to("testdev"), b.to("testdev")
        td.reset_fallback_counts()
        ints = torch.arange(4).to("testdev")
        td.reset_fallback_counts()
        res = {"add": torch.equal((da + da).cpu(), a + a), "mul": torch.equal((da * 3).cpu(), a * 3),
               "mm": torch.allclose((da @ db).cpu(), a @ b), "div_int": (ints / 2).dtype == torch.float32}
        res["fallbacks_for_native"] = td.fallback_counts()
        w = db.clone().requires_grad_()
        (da @ w).sum().backward()
        res["grad"] = torch.allclose(w.grad.cpu(), a.sum(0)[:, None].expand(16, 4))
        conv = torch.nn.Conv2d(3, 4, 3).to("testdev"); x = torch.randn(2, 3, 8, 8)
        ref = torch.nn.Conv2d(3, 4, 3); ref.load_state_dict({k: v.cpu() for k, v in conv.state_dict().items()})
        res["conv"] = torch.allclose(conv(x.to("testdev")).cpu(), ref(x), atol=1e-5)
        ifft = torch.fft.ifft(torch.ones(8, device="testdev"))  # a conjugate view: its copy must not recurse
        res["ifft_conj_copy"] = torch.allclose(ifft.cpu(), torch.fft.ifft(torch.ones(8)))
        print(json.dumps(res))
    """)
    assert out.pop("fallbacks_for_native") == {}  # add, mul, mm, div, copies, views: no fallback at all
    assert all(out.values()), out


def test_detector_against_backend_counters(testdev_built: None) -> None:
    """Native ops are not fallbacks; ops without a kernel are, with the call counts and bytes that
    the backend's own fallback counted, and explicit transfers are counted with their bytes."""
    out = run_py("""
        import json, torch, bringup.testdev as td
        from bringup.device import resolve_device
        from bringup.checks.fallbacks import detect
        dev = resolve_device("testdev")
        x = torch.randn(8, 16, device="testdev")       # 512 bytes
        w = torch.randn(16, 16, device="testdev")
        host = torch.randn(10)                          # 40 bytes
        td.reset_fallback_counts()
        def work():
            for _ in range(3):
                torch.relu(x)                            # no kernel: 3 fallbacks, 512 B each way
            y = x @ w + x * 2                            # native
            torch.sin(y)                                 # structured: sin.out falls back
            host.to("testdev")                           # h2d 40 B
            y.cpu()                                      # d2h 512 B
            y.sum().item()                               # sum falls back; item: d2h 4 B
        rep = detect(work, dev)
        print(json.dumps({"rep": rep.to_json(), "truth": td.fallback_stats()}))
    """)
    rep, truth = out["rep"], out["truth"]
    assert rep["source"] == "dispatch+profiler"
    ops = rep["ops"]
    for native in ("aten::mm", "aten::add.Tensor", "aten::mul.Tensor"):
        assert native in ops and not ops[native]["fallback"], native
        assert native not in rep["fallback_ops"]
    assert rep["fallback_ops"] == {"aten::relu": 3, "aten::sin": 1, "aten::sum": 1}
    assert ops["aten::relu"] == {"calls": 3, "bytes_to_host": 3 * 512, "bytes_to_device": 3 * 512, "fallback": True}
    assert truth["aten::relu"] == [3, 3 * 512, 3 * 512]
    # the structured sin copies its input and its out= buffer to the host: 1024 B, 512 back
    assert truth["aten::sin.out"] == [1, ops["aten::sin"]["bytes_to_host"], ops["aten::sin"]["bytes_to_device"]]
    assert ops["aten::sin"]["bytes_to_host"] == 1024 and ops["aten::sin"]["bytes_to_device"] == 512
    assert truth["aten::sum.IntList_out"][1:] == [
        ops["aten::sum"]["bytes_to_host"],
        ops["aten::sum"]["bytes_to_device"],
    ]
    t = rep["transfers"]
    assert t["h2d_bytes"] == 40 + sum(v[2] for v in truth.values())
    assert t["d2h_bytes"] == 512 + 4 + sum(v[1] for v in truth.values())
    assert t["d2d_count"] == 0


def test_fallback_switch_makes_ops_unsupported(testdev_built: None) -> None:
    out = run_py(
        """
        import json, torch, bringup.testdev as td
        from bringup.checks.errors import classify
        x = torch.randn(4).to("testdev")  # randn on the device would need normal_: a fallback
        res = {"enabled": td.fallback_enabled(), "add": torch.equal((x + x).cpu(), x.cpu() * 2)}
        try:
            torch.sin(x)
            res["sin"] = "ran"
        except NotImplementedError as e:
            res["sin"] = str(classify(e))
            res["msg"] = str(e).splitlines()[0]
        print(json.dumps(res))
    """,
        env={"BRINGUP_TESTDEV_FALLBACK": "0"},
    )
    assert out["enabled"] is False and out["add"] is True
    assert out["sin"] == "unsupported" and "BRINGUP_TESTDEV_FALLBACK=0" in out["msg"]


def test_detector_without_profiler_uses_registrations(testdev_built: None) -> None:
    out = run_py("""
        import json, torch, bringup.testdev
        from bringup.device import resolve_device
        from bringup.checks.fallbacks import FallbackDetector
        x = torch.randn(4, 4, device="testdev")
        with FallbackDetector(resolve_device("testdev"), use_profiler=False) as det:
            torch.sin(x); x + x; torch.relu(x)
        print(json.dumps(det.report().to_json()))
    """)
    assert out["source"] == "dispatch+registrations"
    assert out["fallback_ops"] == {"aten::relu": 1, "aten::sin": 1}
    assert out["ops"]["aten::relu"]["bytes_to_host"] == 64  # estimated from the op's device inputs


def test_detector_on_cpu_reports_no_fallbacks() -> None:
    import torch

    from bringup.checks.fallbacks import detect
    from bringup.device import resolve_device

    x = torch.randn(4, 4)
    rep = detect(lambda: (torch.sin(x) @ x).sum().item(), resolve_device("cpu"))
    assert rep.fallback_ops == {} and rep.source == "dispatch"
    assert rep.ops["aten::sin"].calls == 1 and not rep.ops["aten::sin"].fallback
    assert all(v == 0 for v in rep.transfers.values())


def test_a_backward_just_before_exit_never_aborts_the_exit(testdev_built: None) -> None:
    """A non-cpu backward runs on torch's autograd device thread, which can drop the finished graph task
    (holding a Python object in torch 2.13 and 2.14) while the interpreter finalizes: std::terminate at exit,
    every result already printed (bringup/compat.py, drain_autograd_threads_at_exit, says why). Pinned to
    one core the race was lost in 35 of 40 runs before the drain; four runs, lazy mode in two."""
    code = """
        import json, os
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the threads made from here on share it
        import torch, bringup.testdev
        w = torch.ones(16, 4).to("testdev").requires_grad_()
        (torch.ones(8, 16).to("testdev") @ w).sum().backward()
        print(json.dumps({"grad": w.grad.cpu().eq(8).all().item()}))
    """
    for lazy in ("0", "0", "1", "1"):
        assert run_py(code, env={"BRINGUP_TESTDEV_LAZY": lazy}) == {"grad": True}
