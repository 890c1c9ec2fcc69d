"""The spine's bad-input catalogue: devices, plugins, workers, memory caps, budgets, executors, flags,
output paths, databases, resume, bundles. Each: exit 2, ONE line on stderr (`bringup: error: ...`), no
traceback, and nothing half-written (no output file, no temp file, no new database, no new run row,
foreign files byte-for-byte unchanged).

Most cases call the CLI's main() in this process (the same code path, without a torch import per case);
the ones marked `real` also go through a real subprocess for the process-level contract.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bringup.bundle import load_bundle, make_bundle
from bringup.errors import BadInput
from bringup.files import dumps
from bringup.store import SCHEMA_VERSION, Store
from tests.conftest import assert_one_line_error, run_cli, run_main

PLUGIN = "bringup_test_plugin_that_raises"

# (id, argv, needle in the error line, run also as a real subprocess?)
# "RUN" in argv is replaced by the id of the one run in good.db.
CATALOGUE: list[tuple[str, list[str], str, bool]] = [
    ("unknown-device", ["--device", "nosuch", "selftest"], "unknown device 'nosuch'", True),
    ("unknown-device-indexed", ["--device", "nosuch:1", "selftest"], "unknown device", False),
    ("cuda-on-cpu-only-machine", ["--device", "cuda", "selftest"], "not available", False),
    ("bad-device-syntax", ["--device", "cpu:x", "selftest"], "bad device", False),
    ("bad-device-negative-index", ["--device", "cuda:-1", "selftest"], "bad device", False),
    ("cpu-has-no-index-1", ["--device", "cpu:1", "selftest"], "no index", False),
    ("import-missing-module", ["--import", "nosuchmod_xyz", "selftest"], "--import nosuchmod_xyz", False),
    ("import-module-that-raises", ["--import", PLUGIN, "selftest"], f"--import {PLUGIN}: RuntimeError", True),
    ("import-empty-name", ["--import", "", "selftest"], "--import", False),
    ("workers-zero", ["--workers", "0", "selftest"], "positive integer", False),
    ("workers-negative", ["--workers", "-1", "selftest"], "positive integer", False),
    ("workers-not-a-number", ["selftest", "--workers", "abc"], "positive integer", False),
    ("max-rss-zero", ["--max-rss-gb", "0", "selftest"], "positive number", False),
    ("max-rss-negative", ["--max-rss-gb", "-2", "selftest"], "positive number", False),
    ("max-rss-nan", ["--max-rss-gb", "nan", "selftest"], "positive number", False),
    ("budget-negative", ["selftest", "--case-budget", "-1"], "--case-budget", False),
    ("budget-zero", ["selftest", "--case-budget", "0"], "--case-budget", False),
    ("budget-not-a-number", ["selftest", "--case-budget", "abc"], "--case-budget", False),
    ("budget-nan", ["selftest", "--case-budget", "nan"], "--case-budget", False),
    ("budget-inf", ["selftest", "--case-budget", "inf"], "--case-budget", False),
    (
        "budget-old-spelling",
        ["selftest", "--budget", "0"],
        "--budget is no longer accepted here: use --case-budget",
        False,
    ),
    ("phase-budget-zero", ["selftest", "--phase-budget", "0"], "argument --phase-budget: expected a positive", False),
    ("selftest-bad-plan-item", ["selftest", "--plan", "ok,explode"], "plan item 'explode'", False),
    ("unknown-executor", ["--executor", "nope", "selftest"], "invalid choice", False),
    ("ray-address-without-ray", ["--ray-address", "127.0.0.1:6379", "selftest"], "needs --executor ray", False),
    (
        "ray-address-bad-syntax",
        ["--db", "good.db", "--executor", "ray", "--ray-address", "nonsense", "selftest"],
        "HOST:PORT",
        False,
    ),
    (
        "ray-address-unreachable",
        ["--db", "good.db", "--executor", "ray", "--ray-address", "127.0.0.1:1", "selftest"],
        "cannot reach",
        False,  # in-process only: a real process pays Ray's connection timeout again (~15 s) to prove no more
    ),
    ("conflicting-quick-full", ["run", "--quick", "--full"], "not allowed with", False),
    ("unknown-command", ["nosuchcmd"], "invalid choice", False),
    ("json-is-a-directory", ["selftest", "--json", "adir"], "is a directory", False),
    ("json-missing-directory", ["selftest", "--json", "missing/out.json"], "does not exist", False),
    ("json-parent-is-a-file", ["selftest", "--json", "afile/out.json"], "does not exist", False),
    ("json-unwritable-directory", ["selftest", "--json", "/proc/bringup-out.json"], "writ", False),
    ("junit-is-a-directory", ["selftest", "--junit", "adir"], "is a directory", False),
    ("db-corrupt-file", ["--db", "corrupt.db", "selftest"], "not a usable bringup database", True),
    ("db-foreign-sqlite", ["--db", "foreign.db", "selftest"], "not a bringup database", False),
    ("db-newer-schema", ["--db", "newer.db", "selftest"], "newer than this bringup", False),
    ("db-is-a-directory", ["--db", "adir", "selftest"], "not a file", False),
    ("resume-unknown-run", ["--db", "good.db", "--resume", "no-such-run"], "no run 'no-such-run'", False),
    ("resume-without-database", ["--db", "none.db", "--resume", "x"], "no result database", True),
    ("resume-with-other-command", ["--db", "good.db", "--resume", "RUN", "smoke"], "not 'smoke'", False),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A directory with every kind of file the catalogue needs; returns it and good.db's run id."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    (tmp_path / "corrupt.db").write_bytes(b"SQLite format 3\x00" + b"\x13" * 500)
    c = sqlite3.connect(tmp_path / "foreign.db")
    c.execute("CREATE TABLE notes (x)")
    c.commit()
    c.close()
    c = sqlite3.connect(tmp_path / "newer.db")
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.commit()
    c.close()
    with Store(tmp_path / "good.db") as st:
        run_id = st.new_run("selftest", ["selftest"], "cpu", "cpu", {})
        st.end_run(run_id, "finished")
    (tmp_path / f"{PLUGIN}.py").write_text("raise RuntimeError('this plugin is broken')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BRINGUP_DB", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path, run_id


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _assert_nothing_written(d: Path, before: dict[str, bytes]) -> None:
    after = _snapshot(d)
    ignore = {p for p in after if "__pycache__" in p or p.startswith("good.db-")}  # SQLite's own WAL files
    new = sorted(set(after) - set(before) - ignore)
    assert not new, f"bad input left files behind: {new}"
    changed = [k for k in before if after.get(k) != before[k] and not k.startswith("good.db")]
    assert not changed, f"bad input modified: {changed}"
    c = sqlite3.connect(d / "good.db")
    try:
        assert c.execute("SELECT count(*) FROM runs").fetchone() == (1,)  # no new run row
        assert c.execute("SELECT count(*) FROM cases").fetchone() == (0,)
    finally:
        c.close()


@pytest.mark.parametrize("name,argv,needle,real", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_bad_input(name: str, argv: list[str], needle: str, real: bool, workdir, capsys) -> None:
    d, run_id = workdir
    if name == "cuda-on-cpu-only-machine":
        import torch

        if torch.accelerator.current_accelerator() is not None:
            pytest.skip("this machine has an accelerator")
    argv = [run_id if a == "RUN" else a for a in argv]
    before = _snapshot(d)
    assert_one_line_error(run_main(argv, capsys), needle)
    _assert_nothing_written(d, before)
    if real:
        p = run_cli(argv, cwd=d, env={"PYTHONPATH": str(d)}, timeout=300)
        assert_one_line_error(p, needle)
        _assert_nothing_written(d, before)


def test_bad_input_count() -> None:
    """The issue asks for at least 20 across the repo; the spine alone has this many."""
    assert len(CATALOGUE) >= 20


# ---- bundles -------------------------------------------------------------------------------------------
@pytest.fixture
def good_bundle(workdir) -> Path:
    d, run_id = workdir
    with Store(d / "good.db") as st:
        data = make_bundle(st, run_id)
    p = d / "good.bundle.json"
    p.write_text(dumps(data))
    return p


def _bad_bundles(good: Path) -> dict[str, tuple[str | bytes, str]]:
    data = json.loads(good.read_text())
    text = good.read_text()
    return {
        "not-json": ("this is not json\n", "not valid JSON"),
        "truncated": (text[: len(text) // 2], "not valid JSON"),
        "empty": ("", "not valid JSON"),
        "future-version": (json.dumps({**data, "version": 99}), "newer than this bringup"),
        "bad-version": (json.dumps({**data, "version": "one"}), "bad version"),
        "not-a-bundle": (json.dumps({"cases": []}), "not a bringup bundle"),
        "a-list": ("[1, 2, 3]", "not a bringup bundle"),
        "run-missing": (json.dumps({k: v for k, v in data.items() if k != "run"}), "malformed"),
        "cases-not-a-list": (json.dumps({**data, "cases": 5}), "malformed"),
        "bad-case-status": (
            json.dumps({**data, "cases": [{"case_id": "x", "suite": "s", "name": "n", "status": "exploded"}]}),
            "malformed",
        ),
        # a pickle is never unpickled: it is just not JSON
        "pickle-bytes": (b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00\x8c\x07posix\x94.", "JSON"),
    }


def test_load_bundle_rejects_every_malformed_kind(good_bundle: Path) -> None:
    d = good_bundle.parent
    run, cases = load_bundle(good_bundle)  # the good one loads
    assert run.command == "selftest" and cases == []
    for name, (content, needle) in _bad_bundles(good_bundle).items():
        p = d / f"{name}.json"
        (p.write_bytes if isinstance(content, bytes) else p.write_text)(content)  # type: ignore[operator]
        with pytest.raises(BadInput, match=needle):
            load_bundle(p)
    with pytest.raises(BadInput, match="does not exist"):
        load_bundle(d / "nope.json")


@pytest.mark.parametrize("kind", ["truncated", "future-version"])
def test_compare_with_bad_bundle_real_cli(kind: str, good_bundle: Path) -> None:
    d = good_bundle.parent
    content, needle = _bad_bundles(good_bundle)[kind]
    bad = d / f"{kind}.json"
    bad.write_text(str(content))
    before = _snapshot(d)
    p = run_cli(["compare", str(bad), str(good_bundle), "--json", "cmp.json"], cwd=d, timeout=300)
    assert_one_line_error(p, needle)
    _assert_nothing_written(d, before)
