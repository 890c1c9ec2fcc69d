"""Upstream's verdict beside bringup's (bringup/expect/upstream.py), pure: an imported torch-xpu-ops row keeps its
cells in the entry's note, and the gate's judgement puts, per case of that name, the upstream cell at the case's
precision beside the status the run gave it. A regression shows as `differs` (and the gate's new failure), a model
this transformers lacks as `not judged`, a row no case ran as `not run`."""

from __future__ import annotations

from pathlib import Path

from bringup.case import CaseResult, Status
from bringup.expect.classify import classify
from bringup.expect.file import ExpectFile
from bringup.expect.html import section_html
from bringup.expect.upstream import counts, verdict

CSV = """\
name,float32,bfloat16,float16,amp_bf16,amp_fp16
AlbertForMaskedLM,pass,pass,pass,pass,pass
# https://github.com/intel/torch-xpu-ops/issues/1216
DebertaV2ForQuestionAnswering,fail_accuracy,fail_accuracy,fail_accuracy,pass,pass
GoogleFnet,pass,pass,pass,pass,pass
Speech2Text2ForCausalLM,pass_due_to_skip,pass,pass,pass,pass
T5Small,pass,pass,pass,pass,pass
"""


def _r(name: str, status: str, dtype: str = "fp32") -> CaseResult:
    return CaseResult(f"id-{name}", "zoo", name, Status(status), params={"dtype": dtype, "source": "hf-class"})


def _imported(tmp_path: Path) -> ExpectFile:
    from bringup.expect.xpu_csv import import_csv

    (tmp_path / "x.csv").write_text(CSV)
    f = ExpectFile.new(tmp_path / "e.yaml")
    from ruamel.yaml.comments import CommentedMap

    f.doc["devices"]["*"] = CommentedMap({"*": CommentedMap()})
    import_csv(tmp_path / "x.csv", f.doc["devices"]["*"]["*"], "fp32", "zoo")
    f.save()
    return ExpectFile.load(tmp_path / "e.yaml")


def test_rows_put_the_upstream_cell_beside_the_status_of_the_same_name(tmp_path: Path) -> None:
    f = _imported(tmp_path)
    exp = f.expectations(("*", "*"))
    assert exp["zoo/AlbertForMaskedLM"].note.startswith("torch-xpu-ops: float32=pass")  # the row, kept
    results = [
        _r("AlbertForMaskedLM", "fail_numeric"),  # a regression on this device
        _r("DebertaV2ForQuestionAnswering", "fail_numeric"),  # fails as upstream's does
        _r("GoogleFnet", "pass"),
        _r("Speech2Text2ForCausalLM", "ref_fail"),  # this transformers has no such class
        _r("llama", "pass"),  # not an imported row: not in the comparison
    ]
    j = classify(results, [], exp, section=("*", "*"), path="e.yaml")
    got = {r["case"]: (r["upstream"], r["status"], r["verdict"], r["class"]) for r in j.upstream}
    assert got == {
        "zoo/AlbertForMaskedLM": ("pass", "fail_numeric", "differs", "new_failure"),
        "zoo/DebertaV2ForQuestionAnswering": ("fail_accuracy", "fail_numeric", "same", "expected"),
        "zoo/GoogleFnet": ("pass", "pass", "same", "expected"),
        "zoo/Speech2Text2ForCausalLM": ("pass_due_to_skip", "ref_fail", "not judged", "expected"),
        "zoo/T5Small": ("pass", None, "not run", "not_run"),
    }
    assert counts(j.upstream) == {"same": 2, "differs": 1, "not judged": 1, "not run": 1}
    assert j.exit_code() == 1  # the gate decides the exit code; the comparison is beside it
    assert j.block()["upstream"] == j.upstream
    page = section_html(j.block())
    assert "upstream vs bringup (5 imported row(s), float32)" in page and "<td>differs</td>" in page


def test_the_column_is_the_cases_precision_and_a_run_without_imports_has_no_rows(tmp_path: Path) -> None:
    exp = _imported(tmp_path).expectations(("*", "*"))
    j = classify([_r("DebertaV2ForQuestionAnswering", "pass", "amp-bf16")], [], exp, section=None, path="e.yaml")
    row = next(r for r in j.upstream if r["case"] == "zoo/DebertaV2ForQuestionAnswering")
    assert row["column"] == "amp_bf16" and row["upstream"] == "pass" and row["verdict"] == "same"
    assert classify([_r("GoogleFnet", "pass")], [], {}, section=None, path="-").upstream == []


def test_verdict_words() -> None:
    assert verdict("pass", Status.PASS) == "same"
    assert verdict("pass_due_to_skip", Status.PASS) == "same"
    assert verdict("fail_accuracy", Status.FAIL_NUMERIC) == "same"
    assert verdict("fail_to_run", Status.FAIL_COMPILE) == "same"
    assert verdict("pass", Status.FAIL_NUMERIC) == "differs"
    assert verdict("fail_accuracy", Status.PASS) == "differs"
    assert verdict("pass", Status.FALLBACK) == "differs"  # ran, but only through the CPU fallback
    assert verdict("model_fail_to_load", Status.REF_FAIL) == "same"
    assert verdict("pass", Status.REF_FAIL) == "not judged"
    assert verdict("pass", None) == "not run"
