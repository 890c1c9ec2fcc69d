"""--junit and --csv: valid XML with the right counts; a CSV header and one row per case."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from pathlib import Path

from bringup.case import Status
from bringup.report import ci
from bringup.store import Store
from tests.report.conftest import XSS, build_store, fixture_results


def _run(db: Path, run_id: str):
    with Store(db) as st:
        return st.get_run(run_id), st.results(run_id)


def test_junit_counts_and_escaping(fixture_store, tmp_path: Path) -> None:
    db, run_id = fixture_store
    run, results = _run(db, run_id)
    results[0].error = "ANSI \x1b[31mred\x1b[0m and a NUL \x00"  # invalid in XML 1.0: must be replaced
    out = tmp_path / "j.xml"
    ci.write_junit(out, run, results)
    root = ET.parse(out).getroot()  # parses: valid XML
    n = len(results)
    fails = sum(r.status not in (Status.PASS, Status.REF_FAIL, Status.ERROR) for r in results)
    errors = sum(r.status is Status.ERROR for r in results)
    skipped = sum(r.status is Status.REF_FAIL for r in results)
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        str(n),
        str(fails),
        str(errors),
        str(skipped),
    )
    assert len(root.findall(".//testcase")) == n
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert suites["bringup.flex"].get("failures") == "2" and suites["bringup.zoo"].get("skipped") == "1"
    evil = next(tc for tc in root.iter("testcase") if tc.get("name") == "evil<model>")
    f = evil.find("failure")
    assert f is not None and f.get("message") == f"fail_numeric: grad max rel err 0.05 {XSS}"
    assert f.get("type") == "fail_numeric" and "Traceback" in (f.text or "")
    assert evil.get("classname") == "bringup.zoo"
    assert root.find(".//testcase[@name='torchao']/error") is not None


def test_junit_allow_unsupported_skips_them(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    run_id = build_store(db)
    run, results = _run(db, run_id)
    run.info["options"] = {"allow_unsupported": True}
    root = ET.fromstring(ci.junit_xml(run, results).split("\n", 1)[1])
    unsupported = sum(r.status is Status.UNSUPPORTED for r in results)
    assert int(root.get("skipped")) == 1 + unsupported


def test_csv_header_and_rows(fixture_store, tmp_path: Path) -> None:
    db, run_id = fixture_store
    run, results = _run(db, run_id)
    out = tmp_path / "c.csv"
    ci.write_csv(out, run, results)
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    cols = list(rows[0].keys())
    assert cols[: len(ci.CSV_COLUMNS)] == list(ci.CSV_COLUMNS)  # the harness's columns, then bringup's own
    # then the other catalogued metrics the cases recorded (flex's TFLOP/s, train's first/steady ratio ...)
    assert cols == ci.csv_columns(results) and {"tflops", "first_over_steady", "sparsity"} <= set(cols)
    assert "fwd_ms" not in cols and "step_s" not in cols  # shown as abs_latency already
    assert len(rows) == len(results) == len(fixture_results())
    by = {(r["suite"], r["name"]): r for r in rows}
    cold = by[("train", "compile/cold")]
    assert cold["dev"] == "cpu" and cold["accuracy"] == "pass"
    assert float(cold["speedup"]) == 1.05  # eager steady 0.21 s / compiled 0.20 s
    assert float(cold["abs_latency"]) == 200.0  # ms
    assert abs(float(cold["compilation_latency"]) - 21.7 * 0.85) < 1e-3  # sum of the compile phases
    assert float(cold["peak_mem_gb"]) == 1.5
    assert by[("flex", "causal/b4/s8192")]["accuracy"] == "budget"
    assert by[("flex", "causal/b4/s8192")]["batch_size"] == "4"
    assert by[("zoo", "qwen3")]["graph_breaks"] == "2"
    assert by[("zoo", "llama")]["compilation_latency"] == "11"
    assert float(by[("flex", "noop/b1/s1024")]["tflops"]) == 0.4


def test_csv_cells_cannot_be_formulas() -> None:
    assert ci._cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and ci._cell("a\nb") == "a b"
    assert ci._cell(-1.5) == "-1.5" and ci._cell(float("nan")) == "" and ci._cell(None) == ""


def test_cli_writes_junit_csv_json_on_a_suite_command(cli, tmp_path: Path) -> None:
    cli("--device", "cpu", "smoke", "--junit", "s.xml", "--csv", "s.csv", "--json", "s.json", check_rc=0)
    root = ET.parse(tmp_path / "s.xml").getroot()
    assert root.get("tests") == "2" and root.get("failures") == "0"
    rows = list(csv.DictReader(io.StringIO((tmp_path / "s.csv").read_text())))
    assert [r["name"] for r in rows] == ["gemm", "mlp_step"] and all(r["accuracy"] == "pass" for r in rows)
    assert (tmp_path / "s.json").is_file()
