"""`bringup zoo` bad inputs: one line on stderr, exit 2, no traceback, no run started.

The cases run the real `bringup.cli.main` in this process (tests/conftest.py: bringup_inproc); one goes
through a real subprocess too (the process-level contract: exit code, stderr)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli


@pytest.fixture
def zoo(bringup_inproc):
    return lambda *args: bringup_inproc("--device", "cpu", "zoo", *args)


def test_bad_option_real_process(tmp_path: Path) -> None:
    p = run_cli(["--device", "cpu", "zoo", "--source", "nope"], cwd=tmp_path, timeout=300)
    assert_one_line_error(p, "unknown --source")
    assert not (tmp_path / "bringup-results").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--source", "nope"], "unknown --source"),
        (["--filter", "("], "argument --filter: bad regex"),
        (["--filter", "^no_such_model_type$"], "matches --filter"),
        (["--limit", "0"], "--limit"),
        (["--steps", "0"], "--steps"),
        (["--steps", "x"], "argument --steps: expected a positive integer"),
        (["--compile-backend", "no_such_backend"], "unknown --compile-backend"),
        (["--dtype", "fp8"], "unknown dtype"),
        (["--dtype", "fp64"], "--dtype"),
        (["--case-budget", "0"], "argument --case-budget: expected a positive number of seconds"),
        (["--timeout", "9"], "--timeout is no longer accepted here: use --case-budget"),  # the old spelling
        (["--seed", "-1"], "argument --seed"),
        (["--limit", "x"], "argument --limit: expected a positive integer"),
        # checked by their types at parse time (issue 46 item 2), not by hand in the planner
        (["--batch", "0"], "argument --batch: expected a positive integer"),
        (["--seq", "-3"], "argument --seq: expected a positive integer"),
        (["--hub-workers", "0"], "argument --hub-workers: expected a positive integer"),
        (["--noise-seeds", "-1"], "argument --noise-seeds: expected an integer >= 0"),
        (["--source", "hub:org/name@"], "is not a Hub model id"),  # an empty revision: refused, no network
    ],
)
def test_bad_option(zoo, tmp_path: Path, args: list[str], needle: str) -> None:
    p = zoo(*args)
    assert_one_line_error(p, needle)
    assert not (tmp_path / "bringup-results").exists() or not list((tmp_path / "bringup-results").glob("2*"))


def _bundle(**over: object) -> dict:
    b = {
        "format": "bringup-bundle",
        "version": 1,
        "run": {"run_id": "r1", "command": "zoo", "device": "cuda"},
        "cases": [],
    }
    b.update(over)
    return b


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps(_bundle())[:40], "not valid JSON"),  # truncated
        (json.dumps({"hello": 1}), "not a bringup bundle"),
        (json.dumps(_bundle(version=99)), "newer than this bringup"),
        (json.dumps(_bundle(cases=[{"suite": "zoo"}])), "malformed"),
        (json.dumps(_bundle()), "no zoo results"),
    ],
)
def test_bad_baseline_bundle(zoo, tmp_path: Path, content: str, needle: str) -> None:
    f = tmp_path / "bundle.json"
    f.write_text(content)
    assert_one_line_error(zoo("--filter", "^llama$", "--baseline", str(f)), needle)


def test_missing_baseline_and_unreadable_file(zoo, tmp_path: Path) -> None:
    assert_one_line_error(zoo("--baseline", str(tmp_path / "nope.json")), "does not exist")
    d = tmp_path / "adir"
    d.mkdir()
    assert_one_line_error(zoo("--source", str(d)), "cannot read")
    f = tmp_path / "models.txt"
    f.write_text("not a model line\n")
    assert_one_line_error(zoo("--source", str(f)), "neither module:function")
    f.write_text("# only a comment\n")
    assert_one_line_error(zoo("--source", str(f)), "no models listed")
    f.write_text("missing_config.json\n")
    assert_one_line_error(zoo("--source", str(f)), "does not exist")
    f.write_bytes(b"\xff\xfe\x00bad")
    assert_one_line_error(zoo("--source", str(f)), "cannot read")
