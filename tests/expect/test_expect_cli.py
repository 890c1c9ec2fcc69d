"""The expectations gate end to end: the real CLI, real workers, `selftest` cases (instant).

The ratchet: one injected regression and one unexpected pass exit 1 and are both named; after
`--update-expect` the same run exits 0 and the file's comments and links are still there. Flaky
cases show up under `--repeat`. A bad file is one line and exit 2, before any work.
"""

from __future__ import annotations

import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import assert_one_line_error, load_json

CPU = ("--device", "cpu")
PLAN = ("selftest", "--plan", "ok*2,raise")  # 000-ok, 001-ok pass; 002-raise ends in `error`

# Yesterday's file: 000-ok was failing (a known bug, linked), 002-raise was passing (not listed).
STALE = """\
# owned by the backend team: do not edit by hand, run --update-expect
version: 1
devices:
  cpu:
    "2.12":  # written on the previous torch: the nearest-version fallback applies
      selftest/000-ok:
        status: fail_numeric   # the gelu bug
        reason: numeric
        link: https://example.org/issues/42
"""


def test_ratchet_regression_and_new_pass_exit_1_then_update_exits_0(cli, tmp_path: Path) -> None:
    f = tmp_path / "expect.yaml"
    f.write_text(STALE)
    p = cli(*CPU, *PLAN, "--expect", str(f), "--json", "s.json", "--junit", "j.xml", "--csv", "c.csv")
    assert p.returncode == 1, p.stderr[-2000:]
    assert "NEW FAILURE selftest/002-raise: expected pass, got error" in p.stdout
    assert "NEW PASS selftest/000-ok: expected fail_numeric, got pass (https://example.org/issues/42)" in p.stdout
    block = load_json(tmp_path / "s.json")["expectations"]
    assert block["counts"] == {"expected": 1, "new_failure": 1, "new_pass": 1, "flaky": 0}
    assert block["section"] == {"device": "cpu", "torch": "2.12"} and block["exit_code"] == 1
    cls = {c["case"]: c["class"] for c in block["cases"]}
    assert cls == {"selftest/000-ok": "new_pass", "selftest/001-ok": "expected", "selftest/002-raise": "new_failure"}
    tcs = {tc.get("name"): tc for tc in ET.parse(tmp_path / "j.xml").iter("testcase")}
    assert tcs["002-raise"].find("error") is not None
    assert "new pass" in (tcs["000-ok"].findtext("system-out") or "")
    rows = (tmp_path / "c.csv").read_text().splitlines()
    assert rows[0].endswith(",expectation") and any(r.endswith(",new_failure") for r in rows[1:])

    p = cli(*CPU, *PLAN, "--expect", str(f), "--update-expect")
    assert p.returncode == 0, p.stdout[-3000:]
    assert "this run exits 0" in p.stdout
    text = f.read_text()
    for kept in (
        "# owned by the backend team",
        "# the gelu bug",
        "https://example.org/issues/42",
        "# written on the previous torch",
    ):
        assert kept in text, text
    p = cli(*CPU, *PLAN, "--expect", str(f), "--strict", "--junit", "j2.xml")
    assert p.returncode == 0, p.stdout[-3000:]
    assert "0 new failure(s), 0 new pass(es), 0 flaky" in p.stdout
    tcs = {tc.get("name"): tc for tc in ET.parse(tmp_path / "j2.xml").iter("testcase")}
    skipped = tcs["002-raise"].find("skipped")
    assert skipped is not None and "expected failure (other)" in skipped.get("message", "")


def test_strict_turns_a_new_pass_into_exit_1(cli, tmp_path: Path) -> None:
    f = tmp_path / "expect.yaml"
    f.write_text(STALE)
    assert cli(*CPU, "selftest", "--plan", "ok", "--expect", str(f)).returncode == 0
    p = cli(*CPU, "selftest", "--plan", "ok", "--expect", str(f), "--strict")
    assert p.returncode == 1 and "NEW PASS selftest/000-ok" in p.stdout


def test_repeat_finds_the_flaky_case_and_update_records_it(cli, tmp_path: Path) -> None:
    f = tmp_path / "expect.yaml"
    p = cli(
        *CPU,
        "selftest",
        "--plan",
        "ok,flip",
        "--expect",
        str(f),
        "--repeat",
        "2",
        "--update-expect",
        "--json",
        "s.json",
    )
    assert p.returncode == 0, p.stdout[-3000:]
    assert "FLAKY selftest/001-flip: differs across 2 runs: pass x1, fail_numeric x1" in p.stdout
    assert "FLAKY selftest/000-ok" not in p.stdout
    assert load_json(tmp_path / "s.json")["expectations"]["counts"]["flaky"] == 1
    assert "flaky: [fail_numeric, pass]" in f.read_text()
    # the flake is now known: --strict passes over it
    p = cli(*CPU, "selftest", "--plan", "ok,flip", "--expect", str(f), "--repeat", "2", "--strict")
    assert p.returncode == 0, p.stdout[-3000:]
    assert "known flaky" not in p.stdout  # not listed among the problems
    # each repeat is a run of its own, pointing at the first
    db = sqlite3.connect(tmp_path / "bringup-results" / "bringup.db")
    infos = [r[0] for r in db.execute("SELECT info FROM runs")]
    assert sum('"repeat_of"' in i for i in infos) == 2


def test_unknown_flake_without_the_file_saying_so_is_flaky_and_strict_fails(cli, tmp_path: Path) -> None:
    f = tmp_path / "expect.yaml"
    f.write_text("version: 1\ndevices: {}\n")
    p = cli(*CPU, "selftest", "--plan", "flip", "--expect", str(f), "--repeat", "2", "--strict")
    assert p.returncode == 1 and "FLAKY selftest/000-flip" in p.stdout


def test_bad_expectations_are_one_line_exit_2_before_any_work(cli, bringup_inproc, tmp_path: Path) -> None:
    """In-process (bringup_inproc) but the last, a real subprocess."""
    bad = tmp_path / "bad.yaml"
    entry = "selftest/000-ok: {status: fail_numeric, reason: gremlins}"
    bad.write_text(f"version: 1\ndevices:\n  cpu:\n    '2.13':\n      {entry}\n")
    inproc = bringup_inproc
    assert_one_line_error(inproc(*CPU, "selftest", "--plan", "ok", "--expect", str(bad)), "bad.yaml:5: case")
    assert_one_line_error(inproc(*CPU, "selftest", "--plan", "ok", "--expect", "nope.yaml"), "no such file")
    assert_one_line_error(inproc(*CPU, "selftest", "--plan", "ok", "--strict"), "--strict needs --expect")
    assert_one_line_error(inproc(*CPU, "selftest", "--plan", "ok", "--repeat", "0", "--expect", str(bad)), "positive")
    bad.write_text("version: 1\ndevices: [\n")
    assert_one_line_error(cli(*CPU, "--expect", str(bad), "selftest", "--plan", "ok"), "not valid YAML")
    assert not (tmp_path / "bringup-results" / "bringup.db").exists()  # nothing ran, nothing was stored


def test_expect_init_and_check_from_a_stored_run(cli, bringup_inproc, tmp_path: Path) -> None:
    """`expect init` / `expect check` read a stored run and touch no device: in process (bringup_inproc) but
    the first check, a real subprocess."""
    assert cli(*CPU, "selftest", "--plan", "ok,raise,unsupported").returncode == 1
    inproc = bringup_inproc
    p = inproc("expect", "init", "--out", "e.yaml")
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "e.yaml").read_text()
    assert "selftest/001-raise:\n        status: error\n        reason: other" in text
    assert "reason: unsupported-feature" in text and "000-ok" not in text
    assert cli("expect", "check", "--expect", "e.yaml").returncode == 0
    assert_one_line_error(inproc("expect", "init", "--out", "e.yaml"), "exists")
    # the same run against a file that expects everything to pass: exit 1, both named
    (tmp_path / "empty.yaml").write_text("version: 1\ndevices: {}\n")
    p = inproc("expect", "check", "--expect", "empty.yaml")
    assert p.returncode == 1 and "NEW FAILURE selftest/001-raise" in p.stdout
    assert "NEW FAILURE selftest/002-unsupported" in p.stdout
    assert inproc("expect", "check", "--expect", "empty.yaml", "--allow-unsupported").returncode == 1
    p = inproc("expect", "check", "--expect", "empty.yaml", "--update")
    assert p.returncode == 0 and "exits 0" in p.stdout


def test_run_takes_expect_and_the_scorecard_shows_the_classes(cli, tmp_path: Path) -> None:
    f = tmp_path / "expect.yaml"
    f.write_text('version: 1\ndevices:\n  cpu:\n    "*":\n      smoke/gemm: {status: fail_numeric, reason: numeric}\n')
    p = cli(*CPU, "run", "--only", "smoke", "--expect", str(f), "--strict")
    assert p.returncode == 1 and "NEW PASS smoke/gemm: expected fail_numeric, got pass" in p.stdout, p.stdout[-3000:]
    report = next((tmp_path / "bringup-results").glob("*/report.html")).read_text()
    assert 'id="sec-expectations"' in report and "smoke/gemm: expected fail_numeric, got pass" in report
