"""`bringup export --format benchmark-records` (issue 45, item 4): the run's figures as PyTorch's benchmark
database records, checked against the record as its documentation gives it (the wiki's "benchmark results
format" and test-infra's oss_ci_benchmark_v3 table: every field typed, names required where it says so,
extra_info a string map, counts unsigned). The input is the committed sample run (docs/sample/
run-quick-cpu.json, a real `run --quick` on cpu); the checker is shown to catch broken records."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bringup.bundle import load_bundle
from bringup.report.exports.benchmark import records
from tests.conftest import REPO, assert_one_line_error

SAMPLE = REPO / "docs" / "sample" / "run-quick-cpu.json"

# The documented record. (type, required); dict: nested tuple; [x]: an array of x; MAP: Map(String, String).
STR, FLOAT, UINT, MAP = "String", "Float32", "UInt32", "Map(String, String)"
RUNNER = {
    "name": (STR, False),
    "type": (STR, False),
    "cpu_info": (STR, False),
    "cpu_count": (UINT, False),
    "mem_info": (STR, False),
    "avail_mem_in_gb": (UINT, False),
    "gpu_info": (STR, False),
    "gpu_count": (UINT, False),
    "gpu_mem_info": (STR, False),
    "avail_gpu_mem_in_gb": (UINT, False),
    "extra_info": (MAP, False),
}
RECORD: dict[str, Any] = {
    "benchmark": ({"name": (STR, True), "mode": (STR, False), "dtype": (STR, False), "extra_info": (MAP, False)}, True),
    "model": ({"name": (STR, True), "type": (STR, False), "backend": (STR, False), "origins": ([STR], False),
               "extra_info": (MAP, False)}, True),
    "inputs": (("map", {"dtype": (STR, False), "extra_info": (MAP, False)}), False),
    "dependencies": (("map", {"repo": (STR, False), "branch": (STR, False), "sha": (STR, False),
                              "version": (STR, False), "extra_info": (MAP, False)}), False),
    "metric": ({"name": (STR, True), "benchmark_values": ([FLOAT], True), "target_value": (FLOAT, False),
                "extra_info": (MAP, False)}, True),
    "runners": ([RUNNER], False),
}  # fmt: skip


def check(value: Any, schema: Any, where: str = "record") -> list[str]:
    """Every way `value` breaks `schema`, as 'where: what'."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        errs = [f"{where}.{k}: not in the format" for k in value if k not in schema]
        for k, (sub, required) in schema.items():
            if k in value:
                errs += check(value[k], sub, f"{where}.{k}")
            elif required:
                errs.append(f"{where}.{k}: required")
        return errs
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{where}: not an array"]
        return [e for i, v in enumerate(value) for e in check(v, schema[0], f"{where}[{i}]")]
    if isinstance(schema, tuple):  # ("map", tuple schema)
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            return [f"{where}: not a map"]
        return [e for k, v in value.items() for e in check(v, schema[1], f"{where}[{k}]")]
    ok = {
        STR: isinstance(value, str),
        FLOAT: isinstance(value, (int, float)) and not isinstance(value, bool) and value == value,
        UINT: isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32,
        MAP: isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
    }[schema]
    return [] if ok else [f"{where}: not {schema}: {value!r}"]


def test_sample_run_gives_records_in_the_documented_format() -> None:
    run, results = load_bundle(SAMPLE)
    recs = json.loads(json.dumps(records(run, results)))
    assert [e for r in recs for e in check(r, RECORD)] == []
    got = {(r["model"]["extra_info"]["case"], r["metric"]["name"]): r["metric"]["benchmark_values"][0] for r in recs}
    eager = next(c for c in results if c.suite == "train" and c.name == "eager")
    assert got[("eager", "tokens_per_second")] == pytest.approx(eager.value("tokens_per_s"))
    assert got[("eager", "mfu_percent")] == pytest.approx(100 * eager.value("mfu"))
    assert got[("eager", "time_to_first_step_s")] == pytest.approx(eager.value("ttfs_s"))
    assert got[("eager", "peak_memory_gb")] == pytest.approx(eager.value("peak_mem_bytes") / 1e9)
    cold = next(c for c in results if c.suite == "train" and c.name == "compile-cold")
    assert got[("compile-cold", "compilation_latency_s")] == pytest.approx(cold.value("compile_s"))
    assert got[("compile-cold", "compilation_latency_s")] > 0
    rec = next(r for r in recs if r["model"]["extra_info"]["case"] == "compile-cold")
    assert rec["benchmark"]["mode"] == "training" and rec["benchmark"]["dtype"] == "fp32"
    assert rec["model"]["backend"] == "inductor" and rec["benchmark"]["extra_info"]["use_compile"] == "true"
    runner = rec["runners"][0]
    assert runner["name"] == "cpu" and runner["extra_info"]["torch"] == "2.13.0+cpu"
    assert runner["extra_info"]["torch_git"] and runner["extra_info"]["transformers"]
    assert rec["dependencies"]["torch"]["version"] == "2.13.0+cpu"
    statuses = {r["model"]["extra_info"]["status"] for r in recs}
    assert statuses <= {"pass", "fallback"}  # failed cases give no figure


def test_the_checker_catches_broken_records() -> None:
    run, results = load_bundle(SAMPLE)
    good = json.loads(json.dumps(records(run, results)[0]))
    breaks = [
        lambda r: r["benchmark"]["extra_info"].__setitem__("batch", 2),  # a number in a string map
        lambda r: r["metric"].pop("name"),
        lambda r: r["metric"].__setitem__("benchmark_values", 708.1),  # not a list
        lambda r: r["runners"][0].__setitem__("gpu_count", -1),
        lambda r: r.__setitem__("status", "pass"),  # not a field of the format
        lambda r: r["model"].__setitem__("origins", "bringup"),
    ]
    for brk in breaks:
        bad = copy.deepcopy(good)
        brk(bad)
        assert check(bad, RECORD) != []


def test_cli_writes_records_and_refuses_bad_input(bringup_inproc, tmp_path: Path) -> None:
    p = bringup_inproc("export", str(SAMPLE), "--format", "benchmark-records", "--out", "r.json")
    assert p.returncode == 0, p.stderr
    assert "as benchmark-records" in p.stdout and isinstance(json.loads((tmp_path / "r.json").read_text()), list)
    assert_one_line_error(bringup_inproc("export", str(SAMPLE), "--format", "hud", "--out", "x.json"), "--format")
    assert_one_line_error(
        bringup_inproc("export", "nope.json", "--format", "benchmark-records", "--out", "x.json"), "does not exist"
    )
    assert_one_line_error(
        bringup_inproc("--db", "none.db", "export", "--format", "benchmark-records", "--out", "x.json"),
        "no result database",
    )
    assert not (tmp_path / "x.json").exists()
