"""Bad input to report / compare / run: exit 2, one line on stderr, no traceback, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli
from tests.report.conftest import build_store


@pytest.fixture
def bringup(bringup_inproc):
    """`bringup ARGS` in-process with cwd = tmp_path (report/compare touch no device; tests/conftest.py's
    runner); the real subprocess CLI is used once per command below (run_cli)."""
    return bringup_inproc


@pytest.fixture
def db_run(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "res" / "bringup.db"
    return db, build_store(db)


def _no_html_left(d: Path) -> None:
    assert not [p for p in d.rglob("*.html")] and not [p for p in d.rglob(".*.tmp")]


def test_report_unknown_run_real_cli(db_run, tmp_path: Path) -> None:
    db, _ = db_run
    assert_one_line_error(run_cli(["--db", str(db), "report", "no-such-run"], cwd=tmp_path), "no run")
    _no_html_left(tmp_path)


def test_report_no_database(bringup, tmp_path: Path) -> None:
    assert_one_line_error(bringup("--db", str(tmp_path / "nothing.db"), "report"), "no result database")
    assert not (tmp_path / "nothing.db").exists()


@pytest.mark.parametrize("content", [b"this is not sqlite at all" * 100, b"SQLite format 3\x00" + b"\xff" * 5000])
def test_report_corrupt_database(bringup, tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "bad.db"
    db.write_bytes(content)
    assert_one_line_error(bringup("--db", str(db), "report"), "database")
    _no_html_left(tmp_path)


def test_report_empty_database(bringup, tmp_path: Path) -> None:
    from bringup.store import Store

    Store(tmp_path / "e.db").close()
    assert_one_line_error(bringup("--db", str(tmp_path / "e.db"), "report"), "no runs")


@pytest.mark.parametrize("out", ["missing-dir/r.html", "."])
def test_report_unwritable_out(bringup, db_run, tmp_path: Path, out: str) -> None:
    db, run_id = db_run
    assert_one_line_error(bringup("--db", str(db), "report", run_id, "--out", out), "--out")
    _no_html_left(tmp_path)


def test_report_default_out_blocked(bringup, db_run) -> None:
    """The default path's run folder is a file: one line, not a traceback."""
    db, run_id = db_run
    (db.parent / run_id).write_text("in the way")
    assert_one_line_error(bringup("--db", str(db), "report", run_id), "cannot write the report")


def _bundles(bringup, tmp_path: Path, db: Path, run_id: str) -> dict[str, Path]:
    assert bringup("--db", str(db), "export", run_id, "--out", "good.json").returncode == 0
    good = (tmp_path / "good.json").read_text()
    data = json.loads(good)
    out = {
        "truncated": good[: len(good) // 2],
        "malformed": json.dumps({"format": "bringup-bundle", "version": 1, "run": {"run_id": "x"}, "cases": []}),
        "future": json.dumps({**data, "version": 99}),
        "not-a-bundle": json.dumps({"hello": "world"}),
        "bad-case": json.dumps({**data, "cases": [{"case_id": "x", "suite": "s", "name": "n", "status": "nope"}]}),
    }
    paths = {}
    for k, text in out.items():
        paths[k] = tmp_path / f"{k}.json"
        paths[k].write_text(text)
    paths["binary"] = tmp_path / "binary.json"
    paths["binary"].write_bytes(b"\xff\xfe\x00garbage")
    return paths


def test_compare_bad_bundles(bringup, db_run, tmp_path: Path) -> None:
    db, run_id = db_run
    bundles = _bundles(bringup, tmp_path, db, run_id)
    # once through the real CLI
    p = run_cli(["compare", "good.json", "truncated.json"], cwd=tmp_path)
    assert_one_line_error(p, "truncated")
    for kind, path in bundles.items():
        p = bringup("compare", "good.json", path.name, "--json", "cmp.json")
        assert_one_line_error(p, "bundle" if kind != "not-a-bundle" else "not a bringup bundle")
        assert not (tmp_path / "cmp.json").exists(), kind
        p = bringup("compare", path.name, "good.json")
        assert_one_line_error(p, "bundle" if kind != "not-a-bundle" else "not a bringup bundle")
        assert_one_line_error(bringup("report", path.name))  # and as the report's input
    _no_html_left(tmp_path)


def test_compare_missing_inputs_and_options(bringup, db_run) -> None:
    db, run_id = db_run
    assert_one_line_error(bringup("--db", str(db), "compare", run_id, "nope"), "no run 'nope'")
    assert_one_line_error(bringup("compare", "a.json", "b.json"), "does not exist")
    assert_one_line_error(bringup("--db", str(db), "compare", run_id, run_id, "--fail-on", "speed:2"), "--fail-on")
    p = bringup("--db", str(db), "compare", run_id, run_id, "--json", "no/such/dir.json")
    assert_one_line_error(p, "--json")
    assert bringup("--db", str(db), "compare", run_id).returncode == 2  # argparse: a missing positional


def test_run_bad_options(tmp_path: Path) -> None:
    assert_one_line_error(run_cli(["--device", "cpu", "run", "--skip", "bogus"], cwd=tmp_path), "unknown suite")
    assert not (tmp_path / "bringup-results").exists()  # nothing ran, no run was stored


def test_run_bad_options_inproc(bringup, tmp_path: Path) -> None:
    assert_one_line_error(bringup("--device", "cpu", "run", "--only", "smoke,nope"), "unknown suite")
    assert_one_line_error(bringup("--device", "cpu", "run", "--only", "smoke", "--port", "no/such/path"), "--port")
    assert_one_line_error(bringup("--device", "cpu", "run", "--only", "smoke", "--out", "no/dir/r.html"), "--out")
    assert_one_line_error(
        bringup("--device", "cpu", "run", "--skip", "smoke,probe,train,flex,zoo,ops,profile,port"), "nothing to do"
    )
    assert bringup("--device", "cpu", "run", "--quick", "--full").returncode == 2
    assert not (tmp_path / "bringup-results").exists()
