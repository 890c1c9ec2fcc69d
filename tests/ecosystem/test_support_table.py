"""`bringup export --format support-table` (issue 45, item 2): per op and dtype supported / CPU fallback / not
supported / wrong, merged across `ops`, the zoo's (and any case's) fallback counts and `probe`, in Markdown and
CSV, each cell linked to its evidence. Checked on the report's fixture run (every suite, statuses planted) plus
a zoo model the backend's counter saw fall back, and on the committed sample run through the CLI."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from bringup.case import CaseResult, Status, make_case_id
from bringup.report.exports.support import support_table
from tests.conftest import REPO, assert_one_line_error, fake_run
from tests.report.conftest import fixture_results

SAMPLE = REPO / "docs" / "sample" / "run-quick-cpu.json"
RUN = fake_run(run_id="R1", argv=["run"], device="testdev", device_name="bringup testdev 0")


def _results() -> list[CaseResult]:
    rs = fixture_results()
    for r in rs:
        if r.suite == "ops" and r.params["op"] == "sin":
            r.fields |= {"fallback_ops": ["aten::sin"], "native_ops": ["aten::mul.Tensor"]}
        if r.suite == "ops" and r.params["op"] == "add":
            r.fields |= {"native_ops": ["aten::add.Tensor", "aten::_local_scalar_dense"]}
        if r.suite == "zoo":
            r.params["dtype"] = "fp32"  # as real zoo cases record it
    p = {"model": "llama", "source": "hf-causal", "dtype": "bf16"}
    rs.append(
        CaseResult(
            case_id=make_case_id("zoo", p),
            suite="zoo",
            name="llama-bf16",
            status=Status.PASS,
            params=p,
            fields={"backend_fallback_ops": {"aten::_fft_r2c": 2, "aten::sin": 5}},
        )
    )
    p = {"op": "a|b<c>", "dtype": "float32"}
    rs.append(
        CaseResult(
            case_id=make_case_id("ops", p),
            suite="ops",
            name="odd",
            status=Status.CRASH,
            params=p,
            reason="<script>x</script>",
        )
    )
    return rs


def test_cells_say_what_the_cases_found_and_link_their_evidence() -> None:
    results = _results()
    t = support_table(RUN, results)
    rows = {(r["part"], r["op"], r["dtype"]): r for r in csv.DictReader(t.csv().splitlines())}
    got = {k: v["support"] for k, v in rows.items()}
    assert got[("opinfo", "add", "float32")] == "supported" and got[("opinfo", "add", "bfloat16")] == "supported"
    assert got[("opinfo", "sin", "float32")] == "CPU fallback"
    assert got[("opinfo", "linalg.svd", "float32")] == "not supported"
    assert got[("opinfo", "mul", "float32")] == "wrong"
    assert got[("opinfo", "a|b<c>", "float32")] == "fails"
    assert got[("aten", "aten::sin", "float32")] == "CPU fallback"
    assert got[("aten", "aten::add.Tensor", "float32")] == "supported"
    assert ("aten", "aten::_local_scalar_dense", "float32") not in got  # a host read is no op support
    fft = rows[("aten", "aten::_fft_r2c", "float32")]  # the zoo's mamba (fp32): its own detector's count
    assert fft["support"] == "CPU fallback" and "3 calls" in fft["detail"] and "mamba" in fft["detail"]
    assert rows[("aten", "aten::_fft_r2c", "bfloat16")]["detail"] == "2 calls; 1 model: llama"  # the counter's
    assert got[("feature", "fp8_e4m3", "")] == "not supported" and got[("feature", "bf16", "")] == "supported"
    by_id = {r.case_id: r for r in results}
    for row in rows.values():  # the evidence says what the cell says
        ids = row["case_ids"].split()
        assert ids and all(i in by_id for i in ids)
        if row["part"] == "opinfo":
            assert by_id[ids[0]].params["op"] == row["op"]
    md = t.markdown()
    anchors = set(re.findall(r'<a id="case-([0-9a-f]+)"></a>', md))
    links = set(re.findall(r"\]\(#case-([0-9a-f]+)\)", md))
    assert links and links <= anchors  # every cell's link lands on its evidence
    assert "<script>" not in md and "a\\|b&lt;c&gt;" in md  # names and reasons cannot break the table


def test_a_wrong_mapping_would_show(monkeypatch) -> None:
    """The check above can fail: with fail_numeric mapped to 'supported', the wrong op reads as supported."""
    from bringup.report.exports import support

    monkeypatch.setitem(support.WORDS, Status.FAIL_NUMERIC, support.SUPPORTED)
    text = support_table(RUN, _results()).csv()
    rows = {(r["part"], r["op"]): r["support"] for r in csv.DictReader(text.splitlines())}
    assert rows[("opinfo", "mul")] == "supported"


def test_cli_on_the_sample_run_and_bad_input(bringup_inproc, tmp_path: Path) -> None:
    p = bringup_inproc("export", str(SAMPLE), "--format", "support-table", "--out", "support.md")
    assert p.returncode == 0, p.stderr
    md, rows = (tmp_path / "support.md").read_text(), list(csv.DictReader((tmp_path / "support.csv").open()))
    assert "# Op support on cpu" in md and "## OpInfo ops" in md and "## Features" in md
    opinfo = [r for r in rows if r["part"] == "opinfo"]
    assert len(opinfo) == 14 and {r["support"] for r in opinfo} == {"supported"}  # the quick run: 14 pass
    assert {r["support"] for r in rows if r["op"] == "sdpa.EFFICIENT_ATTENTION"} == {"not supported"}
    empty = tmp_path / "smoke-only.json"
    data = json.loads(SAMPLE.read_text())
    data["cases"] = [c for c in data["cases"] if c["suite"] == "smoke"]
    empty.write_text(json.dumps(data))
    assert_one_line_error(
        bringup_inproc("export", str(empty), "--format", "support-table", "--out", "s2.md"), "no op-level result"
    )
    assert not (tmp_path / "s2.md").exists() and not (tmp_path / "s2.csv").exists()
