"""The store and the spine's pure parts: schema migration, case_id stability, device resolution,
databases that are not ours (left untouched), and concurrent writers (processes, not threads)."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.case import Case, CaseResult, Status, make_case_id
from bringup.errors import BadInput
from bringup.store import MIGRATIONS, SCHEMA_VERSION, Store


# ---- migration ---------------------------------------------------------------------------------------
def test_v1_database_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    c = sqlite3.connect(db)
    c.executescript(MIGRATIONS[0])
    c.execute("PRAGMA user_version = 1")
    c.execute(
        "INSERT INTO runs (run_id, command, argv, device, started_at, status) VALUES"
        " ('r1', 'smoke', '[\"smoke\"]', 'cpu', 1.0, 'finished')"
    )
    c.execute(
        "INSERT INTO cases (run_id, case_id, suite, name, params, status, reason, error, wall_s,"
        " finished_at) VALUES ('r1', 'c1', 'smoke', 'gemm', '{\"n\": 8}', 'pass', '', '', 0.5, 2.0)"
    )
    c.execute("INSERT INTO metrics VALUES ('r1', 'c1', 'max_abs_err', 1e-6, '')")
    c.commit()
    c.close()

    with Store(db) as st:
        assert st.version == SCHEMA_VERSION > 1
        (r,) = st.results("r1")
        assert (r.case_id, r.status, r.params, r.fields) == ("c1", Status.PASS, {"n": 8}, {})
        assert r.metrics["max_abs_err"].value == 1e-6
        run = st.get_run("r1")
        assert run.command == "smoke" and run.info == {}
        # the new tables work on the migrated file
        case = Case("smoke", "mlp", {"n": 9}, "m:f")
        st.plan("r1", [case])
        st.record("r1", CaseResult.for_case(case, Status.PASS))
        assert [k.case_id for k in st.pending("r1")] == []
        assert {x.case_id for x in st.results("r1")} == {"c1", case.case_id}
    with Store(db) as st:  # opening again is a no-op
        assert st.version == SCHEMA_VERSION


def test_databases_that_are_not_ours_are_refused_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "app.db"
    c = sqlite3.connect(foreign)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    newer = tmp_path / "newer.db"
    c = sqlite3.connect(newer)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.execute("CREATE TABLE future (x)")
    c.commit()
    c.close()
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    for path, needle in (
        (foreign, "not a bringup database"),
        (newer, "newer than this bringup"),
        (corrupt, "not a usable bringup database"),
    ):
        before = path.read_bytes()
        with pytest.raises(BadInput, match=needle):
            Store(path)
        assert path.read_bytes() == before, f"{path.name} was modified"  # e.g. not switched to WAL
        assert not Path(f"{path}-wal").exists()


# ---- case ids ----------------------------------------------------------------------------------------
def test_case_id_is_stable_and_depends_only_on_suite_and_params() -> None:
    params = {"i": 0, "op": "ok", "arg": None, "tag": "", "phase_budget": 1.0}
    # frozen values: a change here silently breaks --resume of every stored run and every baseline
    assert make_case_id("selftest", params) == "91543ebb02fb5ccc"
    assert make_case_id("zoo", {"model": "resnet18", "dtype": "fp32", "batch": 2}) == "e6221dabd743470a"
    shuffled = dict(reversed(list(params.items())))
    a = Case("selftest", "000-ok", params, "bringup.selftest.suite:run_item", 60.0)
    b = Case("selftest", "renamed", shuffled, "other.module:fn", 5.0, isolated=True, env={"X": "1"})
    assert a.case_id == b.case_id == "91543ebb02fb5ccc"
    assert Case.from_json(json.loads(json.dumps(a.to_json()))).case_id == a.case_id
    assert make_case_id("smoke", params) != a.case_id
    assert make_case_id("selftest", {**params, "i": 1}) != a.case_id
    assert make_case_id("selftest", {**params, "arg": 0}) != a.case_id  # None vs 0


# ---- device resolution -------------------------------------------------------------------------------
def test_device_resolution_including_unknown_names() -> None:
    from bringup.device import resolve_device

    assert resolve_device("cpu").name == "cpu"
    assert resolve_device("cpu:0").name == "cpu"
    assert resolve_device(None).type == resolve_device("auto").type
    import torch

    if torch.accelerator.current_accelerator() is None:
        assert resolve_device("auto").name == "cpu"
    for bad, needle in (
        ("nosuch", "unknown device"),
        ("nosuch:0", "unknown device"),
        ("cpu:x", "bad device"),
        ("cuda:-1", "bad device"),
        (":0", "bad device"),
        ("cpu:3", "no index"),
        ("meta", "holds no data"),
        ("cpu cuda", "bad device"),
    ):
        with pytest.raises(BadInput, match=needle):
            resolve_device(bad)
    if not torch.cuda.is_available():  # cuda-ok: the test asks whether this machine has one
        with pytest.raises(BadInput, match="not available"):
            resolve_device("cuda")


# ---- concurrency -------------------------------------------------------------------------------------
def _writer(db: str, tag: str, n: int) -> None:
    with Store(db) as st:
        run_id = st.new_run("selftest", [tag], "cpu", "cpu", {"tag": tag})
        cases = [Case("selftest", f"{tag}-{i}", {"tag": tag, "i": i}, "m:f") for i in range(n)]
        st.plan(run_id, cases)
        for c in cases:
            r = CaseResult.for_case(c, Status.PASS)
            r.metric("i", c.params["i"])
            r.series["loss"] = [(s, 1.0 / (s + 1)) for s in range(20)]
            st.record(run_id, r)
        st.end_run(run_id, "finished")


def test_many_processes_write_one_fresh_database(tmp_path: Path) -> None:
    db = str(tmp_path / "shared.db")  # does not exist yet: creation and migration race too
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(db, f"w{k}", 30)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert c.execute("SELECT count(*), count(DISTINCT run_id) FROM cases").fetchone() == (90, 3)
        assert c.execute("SELECT count(*) FROM series").fetchone() == (90 * 20,)
        assert c.execute("SELECT DISTINCT status FROM runs").fetchall() == [("finished",)]


def test_two_bringup_processes_one_database(tmp_path: Path) -> None:
    """Two real CLI sweeps at once on the same (new) database: both finish, nothing lost or mixed."""
    db = tmp_path / "res" / "both.db"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bringup.cli",
                "--db",
                str(db),
                "--workers",
                "2",
                "selftest",
                "--plan",
                "ok*6,sleep:0.3*4",
                "--tag",
                tag,
            ],
            cwd=tmp_path,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for tag in ("a", "b")
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        runs = c.execute("SELECT run_id, status FROM runs").fetchall()
        assert len(runs) == 2 and {s for _, s in runs} == {"finished"}
        per_run = c.execute("SELECT run_id, count(*), count(DISTINCT case_id) FROM cases GROUP BY run_id").fetchall()
        assert sorted(n for _, n, _ in per_run) == [10, 10] and all(n == d for _, n, d in per_run)
