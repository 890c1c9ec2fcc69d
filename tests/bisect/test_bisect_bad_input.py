"""`bringup bisect` with bad input: one line on stderr, exit 2, nothing stored (no database, no env made).
In-process (`bringup_inproc`), plus one real subprocess for the process-level contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bisect.fakeplugin import versions, write_repro, write_wheels
from tests.conftest import assert_one_line_error, run_cli

PKG = "bringup-fakeplugin"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_wheels(tmp_path / "wheels", versions(3), fault_from="0.2.0")
    write_repro(tmp_path / "repro.py")
    monkeypatch.setenv("BRINGUP_ENV_CACHE", str(tmp_path / "envs"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    return tmp_path


CASES = [
    (["bisect", "--wheels", "wheels"], "give a TARGET"),
    (["bisect", "missing.py", "--wheels", "wheels"], "no such file"),
    (["bisect", "0123456789abcdef", "--wheels", "wheels"], "no result database"),
    (["bisect", "repro.py", "--wheels", "nowhere"], "not a directory"),
    (["bisect", "repro.py", "--set", "torch===", "--set", "torch==2.9.0"], "is not a requirement"),
    (["bisect", "repro.py", "--set", "torch==2.9.0"], "needs two or more"),
    (["bisect", "repro.py", "--set", "torch==2.9.0", "--set", "Torch == 2.9.0"], "given twice"),
    (["bisect", "repro.py", "--wheels", "wheels", "--set", "torch==2.9.0"], "one way"),
    (["bisect", "repro.py"], "one way"),
    (["bisect", "repro.py", "--wheels", "wheels", "--between", f"{PKG}==0.2.0", f"{PKG}==0.2.0"], "two different"),
    (["bisect", "repro.py", "--wheels", "wheels", "--between", f"{PKG}==0.1.0", f"{PKG}==0.9.0"], "no wheel of"),
    (["bisect", "repro.py", "--wheels", "wheels", "--between", "torch==2.9.0", "torch==2.13.0"], "the wheels are"),
    (["bisect", "repro.py", "--between", "torch>=2.9", "torch==2.13.0"], "NAME==VERSION"),
    (["bisect", "repro.py", "--between", "torch==2.9.0", "numpy==2.0.0"], "two packages"),
    (["bisect", "repro.py", "--wheels", "wheels", "--repeat", "0"], ""),
    (["bisect", "repro.py", "--wheels", "wheels", "--json", "no/such/dir/a.json"], "--json"),
    (["bisect", "repro.py", "--wheels", "wheels", "--env-cache", "/proc/bringup-envs"], "--env-cache"),
]


@pytest.mark.parametrize(("args", "needle"), CASES, ids=[n or "argparse" for _, n in CASES])
def test_bad_input_is_one_line_and_exit_2(setup: Path, bringup_inproc, args: list[str], needle: str) -> None:
    p = bringup_inproc(*args)
    assert_one_line_error(p, needle)
    assert not (setup / "bringup-results").exists()  # nothing stored
    assert not (setup / "envs").exists() or not any((setup / "envs").iterdir())  # no env made


def test_a_stored_run_without_that_case(setup: Path, bringup_inproc) -> None:
    from bringup.store import Store

    db = setup / "bringup-results" / "bringup.db"
    with Store(db) as st:
        st.end_run(st.new_run("smoke", ["smoke"], "cpu", "cpu", {}), "finished")
    p = bringup_inproc("bisect", "smoke/nope", "--wheels", "wheels")
    assert_one_line_error(p, "neither a file nor a case id")
    with Store(db, create=False) as st:
        assert [r.command for r in st.runs()] == ["smoke"]  # no bisect run row
    p = bringup_inproc("--resume", "nope", "bisect")
    assert_one_line_error(p, "no run")


def test_resuming_a_run_that_is_not_a_bisection(setup: Path, bringup_inproc) -> None:
    from bringup.store import Store

    db = setup / "bringup-results" / "bringup.db"
    with Store(db) as st:
        rid = st.new_run("bisect", ["bisect"], "cpu", "cpu", {})  # a bisect row without its spec
    assert_one_line_error(bringup_inproc("--resume", rid), "not a bisection")


def test_one_real_process(setup: Path) -> None:
    p = run_cli(["bisect", "repro.py", "--wheels", "wheels", "--between", f"{PKG}==0.3.0", f"{PKG}==0.3.0"], setup)
    assert_one_line_error(p, "two different")
    assert not (setup / "bringup-results").exists()
