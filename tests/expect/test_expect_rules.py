"""Pure parts of the expectations gate: the file format, the version fallback, the classes, the update."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.expect.classify import Klass, classify, classify_one
from bringup.expect.file import Expectation, ExpectFile
from bringup.expect.taxonomy import REASONS, default_reason
from bringup.expect.update import apply


def _r(name: str, status: str, suite: str = "zoo", reason: str = "", **fields: object) -> CaseResult:
    return CaseResult(f"id-{suite}-{name}", suite, name, Status(status), reason, fields=dict(fields))


def _file(tmp_path: Path, text: str) -> ExpectFile:
    p = tmp_path / "expect.yaml"
    p.write_text(text)
    return ExpectFile.load(p)


SAMPLE = """\
# header: owned by the backend team
version: 1
devices:
  testdev:
    "2.12":
      zoo/llama:
        status: fail_numeric   # numerics of silu
        reason: numeric
        link: https://example.org/issues/1
    "2.14":
      zoo/gpt2:
        status: fail_compile
        reason: compile
  "*":
    "*":
      zoo/bert:
        status: unsupported
        reason: unsupported-feature
"""


def test_version_fallback_picks_exact_minor_wildcard_then_nearest(tmp_path: Path) -> None:
    f = _file(tmp_path, SAMPLE)
    assert f.select("testdev", "2.12.1+cpu") == ("testdev", "2.12")  # major.minor
    assert f.select("testdev:0", "2.14.0") == ("testdev", "2.14")
    assert f.select("testdev", "2.13.0+cpu") == ("testdev", "2.12")  # nearest: the newest older one
    assert f.select("testdev", "2.10.0") == ("testdev", "2.12")  # none older: the oldest newer one
    assert f.select("cuda:1", "2.13.0") == ("*", "*")  # unknown device type: the "*" device
    assert set(f.expectations(f.select("testdev", "2.13.0"))) == {"zoo/llama"}


def test_classes_and_exit_code() -> None:
    exp = {
        "zoo/a": Expectation("zoo/a", Status.FAIL_NUMERIC, "numeric"),
        "zoo/b": Expectation("zoo/b", Status.FAIL_NUMERIC, "numeric"),
        "zoo/d": Expectation("zoo/d", Status.PASS, "", graph_breaks=2),
    }
    results = [
        _r("a", "fail_numeric"),
        _r("b", "pass"),
        _r("c", "crash"),
        _r("d", "pass", graph_breaks=3),
        _r("e", "pass"),
    ]
    j = classify(results, [], exp, section=None, path="f")
    k = {o.key: o.klass for o in j.outcomes}
    assert k == {
        "zoo/a": Klass.EXPECTED,
        "zoo/b": Klass.NEW_PASS,
        "zoo/c": Klass.NEW_FAILURE,
        "zoo/d": Klass.NEW_FAILURE,
        "zoo/e": Klass.EXPECTED,
    }
    assert j.exit_code() == 1
    # a run where only the file is stale exits 0, and 1 under --strict
    only_stale = [_r("a", "fail_numeric"), _r("b", "pass")]
    assert classify(only_stale, [], exp, section=None, path="f").exit_code() == 0
    assert classify(only_stale, [], exp, section=None, path="f", strict=True).exit_code() == 1
    # a failure that changed its kind is a new failure
    assert classify_one("zoo/a", "x", [Status.CRASH], exp["zoo/a"], None, False).klass is Klass.NEW_FAILURE
    # fewer graph breaks than pinned: the file is stale
    assert classify_one("zoo/d", "x", [Status.PASS], exp["zoo/d"], 1, False).klass is Klass.NEW_PASS


def test_flaky_unless_known() -> None:
    seen = [Status.PASS, Status.FAIL_NUMERIC, Status.PASS]
    assert classify_one("s/x", "x", seen, None, None, False).klass is Klass.FLAKY
    known = Expectation("s/x", Status.PASS, "", flaky=frozenset({Status.FAIL_NUMERIC}))
    assert classify_one("s/x", "x", seen, known, None, False).klass is Klass.EXPECTED
    # a known flake that now also crashes is flaky again (not every status seen was allowed)
    assert classify_one("s/x", "x", [*seen, Status.CRASH], known, None, False).klass is Klass.FLAKY
    j = classify([_r("x", "pass", suite="s")], [[_r("x", "fail_numeric", suite="s")]], {}, section=None, path="f")
    assert j.by_class(Klass.FLAKY) and j.exit_code() == 0
    j.strict = True
    assert j.exit_code() == 1


def test_unjudged_suite_fails_unless_expected() -> None:
    rs = [_r("a", "ref_fail", reason="config: no"), _r("b", "ref_fail")]
    assert classify(rs, [], {}, section=None, path="f").exit_code() == 1
    exp = {k: Expectation(k, Status.REF_FAIL, "config") for k in ("zoo/a", "zoo/b")}
    assert classify(rs, [], exp, section=None, path="f").exit_code() == 0


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("version: 1\ndevices:\n  cpu:\n    '2.13':\n      zoo/x: {status: fail_numeric}\n", "needs a 'reason'"),
        (
            "version: 1\ndevices:\n  cpu:\n    '2.13':\n      zoo/x: {status: broken, reason: numeric}\n",
            "unknown status",
        ),
        ("version: 1\ndevices:\n  cpu:\n    '2.13':\n      zoo/x: {status: crash, reason: gremlins}\n", "not one of"),
        ("version: 1\ndevices:\n  cpu:\n    banana:\n      zoo/x: {status: pass}\n", "torch version key"),
        ("version: 2\ndevices: {}\n", "'version' must be 1"),
        ("version: 1\ndevices:\n  cpu:\n    '2.13':\n      zoo/x: {status: pass, colour: red}\n", "unknown key"),
        ("version: 1\ndevices:\n  cpu:\n    '2.13':\n      zoo/x: {status: pass, graph_breaks: -1}\n", "graph_breaks"),
        ("version: 1\ndevices: [\n", "not valid YAML"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_bad_files_are_one_clear_error(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(BadInput) as e:
        ExpectFile.load(p)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and str(p) in msg


def test_update_keeps_comments_links_and_other_sections(tmp_path: Path) -> None:
    f = _file(tmp_path, SAMPLE)
    sel = f.select("testdev", "2.12.0")
    results = [
        _r("llama", "pass"),
        _r("qwen", "fail_numeric", reason="max rel err 3e-2"),
        _r("opt", "pass", graph_breaks=4),
    ]
    n = apply(f, results, [], "testdev", "2.12.0", sel)
    f.save()
    text = f.path.read_text()
    assert "# header: owned by the backend team" in text
    assert "# numerics of silu" in text
    assert "https://example.org/issues/1" in text  # the fixed case keeps its link, now `status: pass`
    g = ExpectFile.load(f.path)
    e = g.expectations(g.select("testdev", "2.12.0"))
    assert e["zoo/llama"].status is Status.PASS and e["zoo/llama"].link
    assert e["zoo/qwen"].status is Status.FAIL_NUMERIC and e["zoo/qwen"].reason == "numeric"
    assert e["zoo/opt"].graph_breaks == 4
    assert g.expectations(("testdev", "2.14"))["zoo/gpt2"].status is Status.FAIL_COMPILE  # untouched
    assert n == {"added": 2, "changed": 1, "removed": 0}
    # and the run, judged against the updated file, is all expected
    assert classify(results, [], e, section=None, path="f").exit_code() == 0


def test_update_from_a_fallback_section_writes_a_new_one(tmp_path: Path) -> None:
    f = _file(tmp_path, SAMPLE)
    sel = f.select("testdev", "2.13.0")
    assert sel == ("testdev", "2.12")
    apply(f, [_r("llama", "fail_numeric")], [], "testdev", "2.13.0", sel)
    f.save()
    g = ExpectFile.load(f.path)
    assert g.select("testdev", "2.13.0") == ("testdev", "2.13")
    assert g.expectations(("testdev", "2.13"))["zoo/llama"].link == "https://example.org/issues/1"
    assert "# numerics of silu" in f.path.read_text().split('"2.14"')[0]


def test_taxonomy_is_closed_and_defaults() -> None:
    assert len(REASONS) == 10
    assert default_reason(_r("x", "fail_numeric")) == "numeric"
    assert default_reason(_r("x", "oom")) == "memory"
    assert default_reason(_r("x", "unsupported", reason="NotImplementedError: bfloat16 matmul")) == "dtype"
    assert default_reason(_r("x", "error", reason="RuntimeError: gloo process group failed")) == "distributed"
    assert default_reason(_r("x", "ref_fail", reason="config: bad head dim")) == "config"
    for s in Status:
        assert default_reason(_r("x", s.value)) in (*REASONS, "")


def test_html_section_shows_classes_per_area_and_escapes() -> None:
    from bringup.expect.html import section_html

    exp = {"zoo/a": Expectation("zoo/a", Status.FAIL_NUMERIC, "numeric", link="https://x.org/?q=<b>")}
    j = classify([_r("a", "pass"), _r("<script>", "crash")], [], exp, section=("cpu", "2.13"), path="e.yaml")
    h = section_html(j.block())
    assert 'id="sec-expectations"' in h and "<td>zoo</td><td>0</td><td>1</td><td>1</td><td>0</td>" in h
    assert "<script>" not in h and "&lt;script&gt;" in h and "https://x.org/?q=&lt;b&gt;" in h
