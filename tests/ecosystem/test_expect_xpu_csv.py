"""`bringup expect import` / `expect export` (issue 45, item 3): torch-xpu-ops-style expected-accuracy CSVs in and
out of the expectations file. The fixture is written in that format (a header of precisions, `#` comment rows
with issue links above a model's row; statuses as in torch-xpu-ops' .github/ci_expected_accuracy/*.csv). An
import gives entries the gate reads with the statuses mapped, an export gives the file back (comments and links
kept), an accepted change shows in its column only, and what cannot map is named."""

from __future__ import annotations

from pathlib import Path

from bringup.case import Status
from bringup.expect.file import ExpectFile
from bringup.expect.xpu_csv import CANNOT_OUT, STATUS_IN, STATUS_OUT
from tests.conftest import assert_one_line_error

CSV = Path(__file__).resolve().parent / "fixtures" / "inductor_huggingface_training.csv"


def test_import_maps_statuses_and_export_gives_the_file_back(bringup_inproc, tmp_path: Path) -> None:
    p = bringup_inproc("expect", "import", str(CSV), "--out", "e.yaml", "--device", "xpu", "--torch", "2.13")
    assert p.returncode == 0, p.stderr
    assert "imported 7 row(s)" in p.stdout and "cannot map XLNetLMHeadModel float32=eager_two_runs_differ" in p.stdout
    f = ExpectFile.load(tmp_path / "e.yaml")  # a valid expectations file
    got = f.expectations(f.select("xpu:0", "2.13.0+xpu"))
    assert {k: v.status.value for k, v in got.items()} == {
        "zoo/AlbertForMaskedLM": "pass",
        "zoo/BlenderbotForCausalLM": "pass",
        "zoo/DebertaV2ForQuestionAnswering": "fail_numeric",
        "zoo/GoogleFnet": "crash",
        "zoo/MT5ForConditionalGeneration": "fail_compile",
        "zoo/Speech2Text2ForCausalLM": "ref_fail",
        "zoo/XLNetLMHeadModel": "crash",
    }
    deb = got["zoo/DebertaV2ForQuestionAnswering"]
    assert deb.reason == "numeric" and deb.link == "https://github.com/intel/torch-xpu-ops/issues/1216"
    assert got["zoo/Speech2Text2ForCausalLM"].reason == "config"
    assert got["zoo/AlbertForMaskedLM"].link.endswith("/issues/1768")

    p = bringup_inproc(
        "expect", "export", "--expect", "e.yaml", "--out", "back.csv", "--device", "xpu", "--torch", "2.13"
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "back.csv").read_text() == CSV.read_text()  # the round trip: comments, links, every column

    # the maintainer accepts a change (--update-expect would write this): only that column moves
    text = (tmp_path / "e.yaml").read_text()
    i = text.index("zoo/DebertaV2ForQuestionAnswering:")
    j = text.index("status: fail_numeric", i)
    (tmp_path / "e.yaml").write_text(text[:j] + "status: unsupported" + text[j + len("status: fail_numeric") :])
    p = bringup_inproc(
        "expect", "export", "--expect", "e.yaml", "--out", "b2.csv", "--device", "xpu", "--torch", "2.13"
    )
    assert "cannot map DebertaV2ForQuestionAnswering float32: unsupported -> fail_to_run" in p.stdout
    lines = (tmp_path / "b2.csv").read_text().splitlines()
    assert "DebertaV2ForQuestionAnswering,fail_to_run,fail_accuracy,fail_accuracy,pass,pass" in lines
    assert any(ln.startswith("# bringup: DebertaV2ForQuestionAnswering float32: unsupported") for ln in lines)


def test_the_status_maps_round_trip_and_a_wrong_one_would_show() -> None:
    for status, xpu in STATUS_OUT.items():
        assert STATUS_IN[xpu] is status  # export then import gives the same status back
    assert set(STATUS_OUT) | set(CANNOT_OUT) == set(Status)  # every bringup status is written somehow
    assert STATUS_IN["fail_accuracy"] is Status.FAIL_NUMERIC and STATUS_IN["pass_due_to_skip"] is Status.PASS


def test_bad_csv_is_one_line_and_nothing_written(bringup_inproc, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    for text, needle in (
        ("model,float32\nA,pass\n", "header must start with 'name'"),
        ("name,float32,fp8\nA,pass,pass\n", "unknown column 'fp8'"),
        ("name,float32,bfloat16\nA,pass\n", "bad.csv:2: 2 cells"),
    ):
        bad.write_text(text)
        assert_one_line_error(bringup_inproc("expect", "import", str(bad), "--out", "x.yaml"), needle)
    assert_one_line_error(bringup_inproc("expect", "import", "nope.csv", "--out", "x.yaml"), "no such file")
    assert_one_line_error(bringup_inproc("expect", "import", str(CSV), "--out", "x.yaml", "--dtype", "fp8"), "--dtype")
    assert not (tmp_path / "x.yaml").exists()
