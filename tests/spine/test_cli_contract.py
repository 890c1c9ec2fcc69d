"""The CLI's promises: the smoke suite end to end, the JSON contract, exit codes, one-line errors."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from bringup.case import Case, CaseResult, Status, is_failure
from tests.conftest import REPO, assert_one_line_error, load_json


def test_smoke_end_to_end_json_contract(cli, tmp_path: Path) -> None:
    p = cli("--device", "cpu", "smoke", "--json", "out.json", check_rc=0)
    data = load_json(tmp_path / "out.json")
    for key in ("run_id", "device", "torch", "summary", "cases"):
        assert key in data
    assert data["device"] == "cpu" and data["summary"] == {"pass": 2}
    names = {c["name"] for c in data["cases"]}
    assert names == {"gemm", "mlp_step"}
    for c in data["cases"]:
        for key in ("case_id", "name", "status", "reason", "wall_s"):
            assert key in c
        assert c["max_rel_err"] < 1e-4  # suite fields are flat in the row
    # summary.json in the run dir has the same contract; the store has the run and its cases
    summary = tmp_path / "bringup-results" / data["run_id"] / "summary.json"
    assert load_json(summary)["cases"] == data["cases"]
    con = sqlite3.connect(tmp_path / "bringup-results" / "bringup.db")
    assert con.execute("SELECT count(*) FROM cases WHERE run_id = ?", (data["run_id"],)).fetchone()[0] == 2
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
    assert "2 pass" in p.stdout


def test_devices_shows_calibrated_cpu_peak(cli, tmp_path: Path) -> None:
    p = cli("devices", "--json", "dev.json", check_rc=0)
    info = load_json(tmp_path / "dev.json")
    assert info["selected"] == "cpu" and info["default"] == "cpu"
    assert info["peak_flops"]["fp32"]["source"].startswith("calibrated")
    assert "inductor" in info["compile_backends"]
    assert "calibrated" in p.stdout and "inductor" in p.stdout


def test_failures_give_exit_1_and_unsupported_policy(cli, tmp_path: Path) -> None:
    cli("selftest", "--plan", "ok,raise", check_rc=1)
    assert is_failure(Status.UNSUPPORTED) and not is_failure(Status.UNSUPPORTED, allow_unsupported=True)
    assert not is_failure(Status.REF_FAIL) and not is_failure(Status.PASS)
    assert is_failure(Status.BUDGET) and is_failure(Status.FALLBACK)


def test_global_options_before_and_after_subcommand(cli, tmp_path: Path) -> None:
    cli("--workers", "2", "selftest", "--plan", "ok*2", check_rc=0)
    cli("selftest", "--plan", "ok*2", "--workers", "2", "--tag", "x", "--json", "a.json", check_rc=0)
    assert load_json(tmp_path / "a.json")["summary"] == {"pass": 2}


def test_bad_inputs_are_one_line_exit_2(cli, bringup_inproc, tmp_path: Path) -> None:
    assert_one_line_error(cli("--device", "nosuch", "run"), "unknown device")  # a real process; the rest in-process
    assert_one_line_error(bringup_inproc("--import", "nosuchmod", "devices"), "nosuchmod")
    assert_one_line_error(bringup_inproc("--device", "cuda", "smoke"), "not available")
    assert_one_line_error(bringup_inproc("smoke", "--json", "missing-dir/out.json"), "does not exist")
    assert not (tmp_path / "bringup-results").exists()  # nothing was created for a rejected command


def test_case_and_result_round_trip_json() -> None:
    c = Case("s", "n", {"b": 1, "a": [1, 2]}, "m:f", 5.0, True, {"X": "1"})
    assert Case.from_json(json.loads(json.dumps(c.to_json()))) == c
    r = CaseResult.for_case(c, Status.FAIL_NUMERIC, "off")
    r.metric("x", 1.5, "s")
    r.metric("skipped", None)
    r.series["loss"] = [(0, 2.0), (1, 1.5)]
    back = CaseResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back.to_json() == r.to_json() and "skipped" not in back.metrics
    row = r.flat()
    assert row["status"] == "fail_numeric" and row["x"] == 1.5 and row["a"] == [1, 2]


def test_cuda_build_without_a_gpu_defaults_to_cpu(cli, tmp_path: Path) -> None:
    """A CUDA build of torch with no GPU: `auto` is cpu, `devices` exits 0, `smoke` passes."""
    env = {"PYTHONPATH": str(REPO)}
    plugin = ("--import", "tests.spine.fake_cuda_build")
    p = cli(*plugin, "devices", "--no-calibrate", "--json", "dev.json", env=env, check_rc=0)
    info = load_json(tmp_path / "dev.json")
    assert info["auto"] == "cpu" and info["selected"] == "cpu"
    assert info["accelerators_built_in"] == ["cuda"] and info["built_in_no_device"] == ["cuda"]
    assert "built in, no device" in p.stdout and "Traceback" not in p.stderr
    cli(*plugin, "smoke", "--json", "s.json", env=env, check_rc=0)
    assert load_json(tmp_path / "s.json")["summary"] == {"pass": 2}
