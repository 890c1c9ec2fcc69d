"""The profile summary's pure functions on small hand-made traces and event trees: the only way to
check the device busy/idle/host split on a machine whose device emits no device events."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from bringup.profile import analysis as bp


def ev(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def steps2(*events: dict[str, Any]) -> dict[str, Any]:
    """Two 100 us steps at [0, 100] and [100, 200] around `events`."""
    return {
        "traceEvents": [
            ev("ProfilerStep#1", 0, 100, "user_annotation"),
            ev("ProfilerStep#2", 100, 100, "user_annotation"),
            *events,
        ]
    }


# ---- interval arithmetic -------------------------------------------------------------------------
def test_merge_intersect_length() -> None:
    assert bp.merge([(5, 7), (0, 2), (1, 3), (3, 4), (9, 9)]) == [(0, 4), (5, 7)]
    assert bp.intersect([(0, 4), (5, 7)], [(3, 6)]) == [(3, 4), (5, 6)]
    assert bp.intersect([(0, 1)], [(1, 2)]) == []
    assert bp.length([(0, 4), (5, 7)]) == 6


# ---- the busy / idle / host split ----------------------------------------------------------------
def test_split_from_hand_made_device_events() -> None:
    trace = steps2(
        ev("aten::mm", 0, 30),
        ev("aten::add", 60, 10),
        ev("aten::mm", 100, 30),  # host in ops: 70 us
        ev("gemm_kernel", 20, 30, "kernel", tid=7),
        ev("gemm_kernel", 120, 30, "kernel", tid=7),
        ev("Memcpy DtoH (Device -> Pinned)", 160, 10, "gpu_memcpy", tid=7, bytes=4096),
    )
    s = bp.timeline_split(bp.spans(trace))
    # busy: 30 + 30 + 10 = 70; host (ops while the device is idle): 70 - overlap 20 = 50;
    # idle: 200 - 70 - 50 = 80. Two steps, so per step half of each, in seconds.
    assert s.steps == 2 and s.device_events == 3
    assert s.step_s == pytest.approx(100e-6)
    assert s.busy_s == pytest.approx(35e-6)
    assert s.host_s == pytest.approx(25e-6)
    assert s.idle_s == pytest.approx(40e-6)
    assert s.ops_s == pytest.approx(35e-6)
    assert s.busy_s + s.host_s + s.idle_s == pytest.approx(s.step_s)


def test_split_clips_device_work_outside_the_steps() -> None:
    s = bp.timeline_split(bp.spans(steps2(ev("k", 190, 40, "kernel", tid=7), ev("k", 250, 10, "kernel", tid=7))))
    assert s.busy_s == pytest.approx(5e-6)  # only [190, 200] of 2 steps
    assert s.host_s == 0 and s.idle_s == pytest.approx(95e-6)


def test_split_without_device_events_is_none_not_zero() -> None:
    s = bp.timeline_split(bp.spans(steps2(ev("aten::mm", 10, 50), ev("cudaLaunchKernel", 20, 5, "cuda_runtime"))))
    assert s.busy_s is None and s.idle_s is None and s.host_s is None
    assert s.device_events == 0
    assert s.step_s == pytest.approx(100e-6) and s.ops_s == pytest.approx(25e-6)


def test_overlapping_device_streams_count_once() -> None:
    s = bp.timeline_split(bp.spans(steps2(ev("a", 10, 50, "kernel", tid=7), ev("b", 30, 50, "kernel", tid=8))))
    assert s.busy_s == pytest.approx(35e-6)  # [10, 80] = 70 us over 2 steps


def test_trace_without_step_markers_is_one_step() -> None:
    sp = bp.spans({"traceEvents": [ev("aten::mm", 10, 20), ev("aten::add", 50, 10)]})
    s = bp.timeline_split(sp)
    assert s.steps == 1 and s.step_s == pytest.approx(50e-6) and s.ops_s == pytest.approx(30e-6)


# ---- self time, top ops, kernels, compiled regions -----------------------------------------------
def test_self_times_subtract_direct_children_on_the_same_thread() -> None:
    sp = bp.spans(
        {"traceEvents": [ev("A", 0, 100), ev("B", 10, 30), ev("C", 20, 10), ev("D", 50, 10), ev("E", 0, 100, tid=2)]}
    )
    got = {s.name: v for s, v in bp.self_times(sp)}
    assert got == {"A": 60, "B": 20, "C": 10, "D": 10, "E": 100}


def test_top_ops_rank_by_self_time_per_step() -> None:
    trace = steps2(
        ev("aten::linear", 0, 60),
        ev("aten::mm", 5, 50),
        ev("aten::linear", 100, 60),
        ev("aten::mm", 105, 50),
        ev("aten::relu", 170, 15),
        ev("## Call CompiledFxGraph abc ##", 60, 30, "user_annotation"),
    )
    rows = bp.top_ops(bp.spans(trace), n=3)
    assert [r["name"] for r in rows] == ["aten::mm", "## Call CompiledFxGraph abc ##", "aten::linear"]
    mm = rows[0]
    assert mm["calls"] == 1 and mm["self_s"] == pytest.approx(50e-6) and mm["pct"] == pytest.approx(50.0)
    assert rows[1]["kind"] == "annotation" and rows[1]["calls"] == 0.5
    assert rows[2]["self_s"] == pytest.approx(10e-6) and rows[2]["total_s"] == pytest.approx(60e-6)
    assert not any(r["name"].startswith("ProfilerStep") for r in bp.top_ops(bp.spans(trace), n=50))


def test_top_kernels() -> None:
    assert bp.top_kernels(bp.spans(steps2(ev("aten::mm", 0, 10)))) is None
    rows = bp.top_kernels(
        bp.spans(
            steps2(ev("sgemm", 0, 30, "kernel"), ev("sgemm", 100, 30, "kernel"), ev("memset", 50, 20, "gpu_memset"))
        )
    )
    assert rows is not None
    assert [(r["name"], r["kind"], r["calls"]) for r in rows] == [("sgemm", "kernel", 1), ("memset", "gpu_memset", 0.5)]
    assert rows[0]["time_s"] == pytest.approx(30e-6) and rows[0]["pct_busy"] == pytest.approx(75.0)


def test_compiled_regions_are_listed_and_their_share_counted_once() -> None:
    trace = {
        "traceEvents": [
            ev("ProfilerStep#0", 0, 100, "user_annotation"),
            ev("Torch-Compiled Region: 0/0", 10, 40),
            ev("CompiledFunction", 15, 30),
            ev("autograd::engine::evaluate_function: CompiledFunctionBackward", 58, 24),
            ev("CompiledFunctionBackward", 60, 20),
            ev("aten::mm", 90, 5),
        ]
    }
    rows, inside = bp.compiled_regions(bp.spans(trace))
    assert {r["name"]: r["calls"] for r in rows} == {
        "Torch-Compiled Region: 0/0": 1,
        "CompiledFunction": 1,
        "CompiledFunctionBackward": 1,
    }
    assert inside == pytest.approx(60e-6)  # [10, 50] + [60, 80]
    assert bp.summarize_trace(steps2(ev("aten::mm", 0, 10)))["compiled_s"] is None


# ---- transfers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Memcpy HtoD (Pageable -> Device)", "h2d"),
        ("Memcpy DtoH (Device -> Pinned)", "d2h"),
        ("Memcpy DtoD (Device -> Device)", "d2d"),
        ("Memcpy PtoP (Device -> Device)", "d2d"),
        ("CopyHostToDevice", "h2d"),
        ("Memcpy M2D", "h2d"),
        ("Memcpy D2M", "d2h"),
        ("Memset (Device)", None),
    ],
)
def test_memcpy_direction(name: str, kind: str | None) -> None:
    assert bp.memcpy_direction(name) == kind


def test_device_memcpy_counts_bytes_and_time() -> None:
    assert bp.device_memcpy(bp.spans(steps2(ev("aten::mm", 0, 10)))) is None
    h2d, d2h = "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"
    got = bp.device_memcpy(
        bp.spans(
            steps2(
                ev(h2d, 0, 4, "gpu_memcpy", bytes=1000),
                ev(h2d, 100, 6, "gpu_memcpy", bytes=3000),
                ev(d2h, 150, 2, "gpu_memcpy", bytes=8),
            )
        )
    )
    assert got is not None
    assert got["h2d"] == {"count": 1, "bytes": 2000, "time_s": pytest.approx(5e-6)}
    assert got["d2h"]["count"] == 0.5 and got["d2d"]["count"] == 0 and "other" not in got


@pytest.mark.parametrize(
    ("src", "dst", "kind"),
    [
        ("cpu", "cpu", None),
        ("cpu", "cuda:0", "h2d"),
        ("testdev:0", "cpu", "d2h"),
        ("cuda:0", "cuda:1", "d2d"),
        ("cuda", "cuda:0", None),
        ("xpu:0", "xpu:0", None),
        ("cpu", "meta", None),
        ("neuron:0", None, "unknown"),
        ("cpu", None, None),
    ],
)
def test_transfer_kind(src: str, dst: str | None, kind: str | None) -> None:
    assert bp.transfer_kind(src, dst) == kind


def test_count_transfers_per_step_and_time_source() -> None:
    recs = [
        bp.CopyRecord("aten::copy_", "cpu", "cuda:0", 1024, 10.0),
        bp.CopyRecord("aten::copy_", "cpu", "cuda:0", 2048, 20.0),
        bp.CopyRecord("aten::copy_", "cuda:0", "cpu", 8, 4.0),
        bp.CopyRecord("aten::copy_", "cpu", "cpu", 99999, 50.0),  # host copy: no transfer
        bp.CopyRecord("aten::copy_", "cuda:0", "cuda:0", 99999, 50.0),
    ]  # same device: no transfer
    out = bp.count_transfers(recs, steps=1)
    assert out["h2d"] == {
        "count": 2,
        "bytes": 3072,
        "host_s": pytest.approx(30e-6),
        "time_s": pytest.approx(30e-6),
        "time_from": "host",
    }
    assert (out["d2h"]["count"], out["d2h"]["bytes"]) == (1, 8)
    assert (out["d2d"]["count"], out["d2d"]["bytes"]) == (0, 0)
    assert "unknown" not in out
    memcpy = {"h2d": {"count": 2, "bytes": 3072, "time_s": 1e-6}}
    per2 = bp.count_transfers(recs, steps=2, memcpy=memcpy)
    assert per2["h2d"]["count"] == 1 and per2["h2d"]["bytes"] == 1536
    assert per2["h2d"]["time_s"] == 1e-6 and per2["h2d"]["time_from"] == "device"
    assert per2["d2h"]["time_from"] == "host"


def tmeta(device: str, sizes: list[int], dtype: torch.dtype = torch.float32) -> SimpleNamespace:
    return SimpleNamespace(device=torch.device(device) if device != "testdev:0" else device, sizes=sizes, dtype=dtype)


def node(name: str, inputs: list[Any], children: list[Any] | None = None, ns: int = 1000) -> SimpleNamespace:
    return SimpleNamespace(
        name=name, extra_fields=SimpleNamespace(inputs=inputs), children=children or [], duration_time_ns=ns
    )


def test_copy_records_count_the_outermost_cross_device_copy_once() -> None:
    # A PrivateUse1 `.to(dev)`: _to_copy -> copy_(dst dev, src cpu) -> _copy_from(src, dst) -> cpu copy_.
    h2d = node(
        "aten::to",
        [tmeta("cpu", [4, 4])],
        [
            node(
                "aten::_to_copy",
                [tmeta("cpu", [4, 4]), 6, None, None],
                [
                    node("aten::empty_strided", [None]),
                    node(
                        "aten::copy_",
                        [tmeta("testdev:0", [4, 4]), tmeta("cpu", [4, 4]), False],
                        [
                            node(
                                "aten::_copy_from",
                                [tmeta("cpu", [4, 4]), tmeta("testdev:0", [4, 4]), False],
                                [node("aten::copy_", [tmeta("cpu", [4, 4]), tmeta("cpu", [4, 4]), False])],
                            )
                        ],
                    ),
                ],
            )
        ],
    )
    host = node("aten::copy_", [tmeta("cpu", [8], torch.float64), tmeta("cpu", [8]), False])
    to_cpu = node("aten::_to_cpu", [[tmeta("testdev:0", [3], torch.int64), tmeta("testdev:0", [2, 5])]])
    item = node("aten::item", [tmeta("testdev:0", [])], [node("aten::_local_scalar_dense", [tmeta("testdev:0", [])])])
    own = node("aten::_to_copy", [tmeta("testdev:0", [10], torch.bfloat16), 15])  # backend's own _to_copy
    recs = bp.copy_records([h2d, host, to_cpu, item, own])
    got = [(r.op, r.src, r.dst, r.nbytes) for r in recs]
    assert got == [
        ("aten::copy_", "cpu", "testdev:0", 64),
        ("aten::_to_cpu", "testdev:0", "cpu", 24),
        ("aten::_to_cpu", "testdev:0", "cpu", 40),
        ("aten::_local_scalar_dense", "testdev:0", "cpu", 4),
        ("aten::_to_copy", "testdev:0", None, 20),
    ]
    t = bp.count_transfers(recs)
    assert (t["h2d"]["count"], t["h2d"]["bytes"]) == (1, 64)
    assert (t["d2h"]["count"], t["d2h"]["bytes"]) == (3, 68)
    assert t["unknown"]["count"] == 1


def test_cpu_copies_are_seen_but_are_not_transfers() -> None:
    """A real profile on cpu: the copies are in the event tree, and none of them is a transfer."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        x.to(torch.float64)
        torch.empty(32, 32).copy_(x)
        x.to("meta")
    recs = bp.copy_records(prof.profiler.kineto_results.experimental_event_tree())
    assert recs == []  # looked through: cpu->cpu and cpu->meta copies are no transfers
    t = bp.count_transfers(recs)
    assert all(t[d]["count"] == 0 and t[d]["bytes"] == 0 for d in bp.DIRECTIONS)


# ---- fallbacks, activities, trace files ----------------------------------------------------------
def test_fallback_marks_match_op_names_across_spellings() -> None:
    assert bp.op_key("aten::add_.Tensor") == bp.op_key("aten.add_.Tensor") == bp.op_key("add_") == "add_"
    rows = [
        {"name": "aten::cumsum", "kind": "op"},
        {"name": "aten::mm", "kind": "op"},
        {"name": "cumsum", "kind": "annotation"},
    ]
    marked = bp.mark_fallbacks(rows, {"aten::cumsum.default": 3})
    assert [r["fallback"] for r in marked] == [True, False, False]


def test_activities() -> None:
    acts, note = bp.activities_for("cpu")
    assert [str(a).rsplit(".", 1)[-1] for a in acts] == ["CPU"] and note == ""
    acts, note = bp.activities_for("nosuchdevice")
    assert len(acts) == 1 and "host events only" in note


def test_load_trace_formats_and_errors(tmp_path: Path) -> None:
    events = [ev("aten::mm", 0, 1)]
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    (tmp_path / "b.json").write_text(json.dumps(events))
    (tmp_path / "c.json").write_text("{not json")
    (tmp_path / "d.json").write_text(json.dumps({"events": []}))
    assert bp.load_trace(tmp_path / "a.json.gz")["traceEvents"] == events
    assert bp.load_trace(tmp_path / "b.json")["traceEvents"] == events
    for bad in ("c.json", "d.json"):
        with pytest.raises(ValueError, match="not a Chrome trace"):
            bp.load_trace(tmp_path / bad)


def test_spans_skip_non_complete_and_malformed_events() -> None:
    bad = [
        {"ph": "M", "name": "process_name"},
        {"ph": "X", "name": "b"},
        {"ph": "X", "name": "c", "ts": "x"},
        {"ph": "i", "name": "d", "ts": 1},
        {"ph": "X", "name": "e", "ts": 1, "dur": -1},
        "junk",
    ]
    trace = {"traceEvents": [ev("a", 0, 1), *bad]}
    assert [s.name for s in bp.spans(trace)] == ["a"]
