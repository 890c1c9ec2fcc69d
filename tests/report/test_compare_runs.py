"""`bringup compare`: planted regressions are flagged (exit 1), identical runs pass (exit 0), bundles work."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bringup.case import Status
from bringup.errors import BadInput
from bringup.report import compare
from tests.conftest import run_cli
from tests.report.conftest import build_store, fixture_results


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, str, str, str]:
    db = tmp_path / "res" / "bringup.db"
    return db, build_store(db), build_store(db), build_store(db, regress=True)


def test_planted_regressions_exit_1(two_runs, tmp_path: Path) -> None:
    db, base, _, bad = two_runs
    p = run_cli(["--db", str(db), "compare", base, bad, "--json", "cmp.json", "--junit", "cmp.xml"], cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "regressions" in p.stdout
    data = json.loads((tmp_path / "cmp.json").read_text())
    reg = {c["name"]: c["regressions"] for c in data["cases"] if c["regressions"]}
    assert set(reg) == {"gpt2", "compile/cold", "compile/warm", "regional/cold", "gemm"}, reg
    assert reg["gpt2"] == ["status pass -> fail_numeric"]
    assert any("tokens_per_s throughput x0.60" in r for r in reg["compile/cold"])
    assert any("ttfs_s x2.00" in r for r in reg["regional/cold"])
    assert any("max_rel_err" in r or "max_abs_err" in r for r in reg["gemm"])
    assert data["summary"]["regressions"] == 5 and data["summary"]["status_changes"] == 1
    root = ET.parse(tmp_path / "cmp.xml").getroot()
    assert root.get("failures") == "5" and int(root.get("tests")) == len(fixture_results())


def test_identical_runs_exit_0(two_runs, bringup_inproc) -> None:
    db, base, same, _ = two_runs
    p = bringup_inproc("--db", str(db), "compare", base, same)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 regressions" in p.stdout


def test_fail_on_picks_what_counts(two_runs, bringup_inproc) -> None:
    db, base, _, bad = two_runs

    def rc(spec: str) -> int:
        return bringup_inproc("--db", str(db), "compare", base, bad, "--fail-on", spec).returncode

    assert rc("throughput:0.5,ttfs:3") == 0  # 0.6x and 2x are inside these; status and parity not counted
    assert rc("throughput") == 1 and rc("ttfs") == 1 and rc("status") == 1
    assert rc("none") == 0
    assert rc("parity:1000") == 0 and rc("parity") == 1
    assert rc("loss") == 0  # the planted runs have the same loss curves


def test_compare_bundles_across_machines(two_runs, bringup_inproc) -> None:
    db, base, _, bad = two_runs
    assert bringup_inproc("--db", str(db), "export", base, "--out", "a.json").returncode == 0
    assert bringup_inproc("--db", str(db), "export", bad, "--out", "b.json").returncode == 0
    p = bringup_inproc("compare", "a.json", "b.json", "--fail-on", "status")
    assert p.returncode == 1 and "regression: zoo/gpt2: status pass -> fail_numeric" in p.stdout
    # a bundle against a run id in --db
    assert bringup_inproc("--db", str(db), "compare", "a.json", base).returncode == 0


def test_diff_logic_units() -> None:
    a = fixture_results()
    b = fixture_results()
    # case ids differ (e.g. another dtype on another machine): matched by (suite, name)
    b[0].case_id = "other"
    b[0].status = Status.CRASH
    # ref_fail on one side is not a regression; a missing case is listed, counted only with 'missing'
    b[1].status = Status.REF_FAIL
    gone = b.pop()
    diffs = compare.compare(a, b, compare.parse_fail_on(compare.DEFAULT_FAIL_ON))
    by = {(d.suite, d.name): d for d in diffs}
    assert by[("smoke", "gemm")].change == "regression" and by[("smoke", "gemm")].regressions
    assert by[("smoke", "mlp_step")].change == "changed" and not by[("smoke", "mlp_step")].regressions
    assert by[(gone.suite, gone.name)].change == "missing" and not by[(gone.suite, gone.name)].regressions
    diffs = compare.compare(a, b, compare.parse_fail_on("missing"))
    assert [d.name for d in diffs if d.regressions] == [gone.name]
    assert compare.loss_divergence([(0, 1.0), (1, 2.0)], [(0, 1.0), (1, 2.2), (2, 9.0)]) == (pytest.approx(0.1), 2)
    assert compare.loss_divergence([(0, 1.0)], [(0, float("nan"))])[0] == float("inf")


@pytest.mark.parametrize("spec", ["speed", "throughput:x", "status:2", "ttfs:-1", "loss:inf"])
def test_bad_fail_on_specs(spec: str) -> None:
    with pytest.raises(BadInput):
        compare.parse_fail_on(spec)
