"""A post-run step from a plugin: docs/examples/bringup_step_summary.py, loaded with `--import`, registers one
PostRun (one call): its option is taken globally and after the sub-command, a bad value is one line and exit 2
before any work, and after the run it writes its Markdown and adds its key to summary.json. It nests with the
built-in expectations gate, which still has the last word on the exit code."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import assert_one_line_error, load_json, run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
ENV = {"PYTHONPATH": os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")])}
PLUGIN = ["--import", "bringup_step_summary", "--device", "cpu"]
PLAN = ["selftest", "--plan", "ok*2,unsupported"]  # 000-ok, 001-ok pass; 002-unsupported is a gap


def test_the_step_writes_its_summary_after_the_run(tmp_path: Path) -> None:
    p = run_cli([*PLUGIN, *PLAN, "--step-summary", "s.md", "--json", "r.json"], tmp_path, env=ENV, check_rc=1)
    text = (tmp_path / "s.md").read_text()
    assert "| selftest | 3 | 2 | 1 |" in text
    assert "`selftest/002-unsupported`: **unsupported** NotImplementedError" in text
    assert "`selftest/000-ok`" not in text  # passing cases are only counted
    assert load_json(tmp_path / "r.json")["step_summary"] == "s.md"
    # after the suite's table (finish runs after the suites' summaries)
    assert p.stdout.index("002-unsupported") < p.stdout.index("step summary: s.md")
    # given before the sub-command too; appends
    run_cli([*PLUGIN, "--step-summary", "s.md", "--allow-unsupported", *PLAN], tmp_path, env=ENV, check_rc=0)
    assert (tmp_path / "s.md").read_text().count("| selftest | 3 | 2 | 1 |") == 2


def test_a_bad_value_is_one_line_before_any_work(tmp_path: Path) -> None:
    p = run_cli([*PLUGIN, *PLAN, "--step-summary", "no/such/dir/s.md"], tmp_path, env=ENV)
    assert_one_line_error(p, "--step-summary no/such/dir/s.md")
    assert not (tmp_path / "bringup-results").exists()  # nothing stored


def test_without_the_plugin_there_is_no_such_option(tmp_path: Path) -> None:
    assert_one_line_error(run_cli(["--device", "cpu", *PLAN, "--step-summary", "s.md"], tmp_path), "--step-summary")


def test_it_nests_with_the_expectations_gate(tmp_path: Path) -> None:
    """The gate (first in order) judges last: the unsupported case is expected, so the run exits 0, and the
    plugin's step still wrote its summary of the same results."""
    f = tmp_path / "expect.yaml"
    f.write_text(
        'version: 1\ndevices:\n  cpu:\n    "*":\n      selftest/002-unsupported:\n'
        "        status: unsupported\n        reason: unsupported-feature\n"
    )
    p = run_cli(
        [*PLUGIN, *PLAN, "--expect", str(f), "--step-summary", "s.md", "--json", "r.json"],
        tmp_path,
        env=ENV,
        check_rc=0,
    )
    assert p.stdout.index("step summary: s.md") < p.stdout.index("expectations (")
    data = load_json(tmp_path / "r.json")
    assert data["step_summary"] == "s.md" and data["expectations"]["exit_code"] == 0
    assert "| selftest | 3 | 2 | 1 |" in (tmp_path / "s.md").read_text()
