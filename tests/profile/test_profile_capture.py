"""capture() with the real torch.profiler on cpu, and `bringup profile` end to end through the CLI."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from bringup.profile import analysis as bp
from tests.conftest import load_json


def test_capture_writes_a_gzip_chrome_trace_with_the_profiled_steps(tmp_path: Path) -> None:
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    calls = []

    def step() -> None:
        calls.append(1)
        (a @ b).relu().to(torch.float64).sum()

    cap = bp.capture(step, "cpu", steps=3, trace_path=tmp_path / "trace.json.gz")
    assert len(calls) == 4  # one profiler warm-up step + 3 recorded
    raw = cap.trace_path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"  # gzip
    trace = json.loads(gzip.decompress(raw))
    assert isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    steps = {e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}
    assert len(steps) == 3
    assert not list(tmp_path.glob(".*tmp*"))  # the atomic export left no temp file

    s = bp.summarize_capture(cap, top_n=5)
    assert s["steps"] == 3 and s["step_s"] > 0
    names = [o["name"] for o in s["top_ops"]]
    assert 0 < len(names) <= 5 and "aten::mm" in names
    assert s["busy_s"] is None and s["idle_s"] is None and s["host_s"] is None  # cpu: no device events
    assert s["top_kernels"] is None and s["device_memcpy"] is None
    assert s["transfers"] is not None and all(s["transfers"][d]["count"] == 0 for d in bp.DIRECTIONS)
    assert s["activities"] == ["CPU"] and s["trace"] == str(cap.trace_path)


def test_profile_cli_on_cpu(cli, tmp_path: Path) -> None:
    out = tmp_path / "prof" / "here"  # created by the run
    p = cli(
        "--device",
        "cpu",
        "profile",
        "--traced-steps",
        "2",
        "--untraced-steps",
        "1",
        "--batch",
        "2",
        "--seq",
        "32",
        "--override",
        "num_hidden_layers=2",
        "--top",
        "5",
        "--json",
        "out.json",
        "--out",
        str(out),
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "top ops by self time" in p.stdout and "device busy n/a" in p.stdout
    data = load_json(tmp_path / "out.json")
    for k in ("top_ops", "transfers", "busy_s", "idle_s", "host_s", "trace"):
        assert k in data, k
    assert data["busy_s"] is None and data["idle_s"] is None and data["host_s"] is None  # n/a, not 0
    assert 0 < len(data["top_ops"]) <= 5 and all(o["self_s"] >= 0 for o in data["top_ops"])
    assert data["transfers"]["h2d"]["count"] == 0  # cpu -> cpu is no transfer
    row = data["cases"][0]
    assert row["status"] == "pass" and row["step_s"] > 0 and row["top_ops"] == data["top_ops"]

    trace = tmp_path / data["trace"]
    assert trace.name == "trace.json.gz"
    assert json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    summary = load_json(trace.parent / "summary.json")
    assert summary["top_ops"] == data["top_ops"] and summary["model"] == "qwen3-tiny"
    assert sorted(x.name for x in out.iterdir()) == ["summary.json", "trace.json.gz"]
    assert (out / "trace.json.gz").read_bytes() == trace.read_bytes()

    import sqlite3

    db = sqlite3.connect(tmp_path / "bringup-results" / "bringup.db")
    arts = dict(db.execute("SELECT name, path FROM artifacts").fetchall())
    assert Path(arts["trace"]).name == "trace.json.gz" and Path(arts["summary"]).name == "summary.json"


def test_run_includes_a_short_eager_profile() -> None:
    from bringup.device import Device
    from bringup.profile import suite

    quick = suite.run_cases(Device("cpu"), quick=True)
    assert [(c.params["model"], c.params["mode"]) for c in quick] == [("qwen3-tiny", "eager")]
    assert quick[0].params["steps"] <= 3 and quick[0].isolated
    full = suite.run_cases(Device("cpu"), quick=False)
    assert {c.params["mode"] for c in full} == {"eager", "compile"}
    assert len({c.case_id for c in full}) == len(full)


@pytest.mark.slow
def test_profile_cli_regional_compile_shows_compiled_regions(cli, tmp_path: Path) -> None:
    p = cli(
        "--device",
        "cpu",
        "profile",
        "--mode",
        "regional",
        "--traced-steps",
        "1",
        "--untraced-steps",
        "1",
        "--batch",
        "1",
        "--seq",
        "16",
        "--override",
        "num_hidden_layers=1",
        "--json",
        "out.json",
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    case = load_json(tmp_path / "out.json")["cases"][0]
    names = [r["name"] for r in case["compiled_regions"]]
    assert any(n.startswith("Torch-Compiled Region") for n in names), names
    assert "CompiledFunctionBackward" in names
    assert 0 < case["compiled_s"] <= case["step_s"]
    assert "compiled regions" in p.stdout


def test_profile_amp_bf16_runs_under_autocast(cli, tmp_path: Path) -> None:
    """--dtype amp-bf16: fp32 weights, the steps under autocast; the trace shows the bf16 casts autocast adds."""
    p = cli(
        "--device",
        "cpu",
        "profile",
        "--dtype",
        "amp-bf16",
        "--traced-steps",
        "1",
        "--untraced-steps",
        "1",
        "--batch",
        "1",
        "--seq",
        "32",
        "--override",
        "num_hidden_layers=1",
        "--top",
        "40",
        "--json",
        "out.json",
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = load_json(tmp_path / "out.json")
    row = data["cases"][0]
    assert row["status"] == "pass" and row["dtype"] == "amp-bf16"
    trace = json.loads(gzip.decompress((tmp_path / data["trace"]).read_bytes()))
    assert any(e.get("name") == "aten::_to_copy" for e in trace["traceEvents"])  # autocast's casts to bf16
