"""Bundles exported before the suite registry and the metric catalogue (tests/report/fixtures/*_v1_*,
written by the code of commit c09d511 from the report fixture run, with train's loss deviation under its
old name `loss_max_rel_dev`) still compare, export to CSV and render, with the same verdicts."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from bringup.bundle import load_bundle
from bringup.report import ci, compare, html
from tests.conftest import run_cli

FIX = Path(__file__).parent / "fixtures"


def test_old_bundles_compare_as_before(tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    r = run_cli(["compare", str(FIX / "bundle_v1_a.json"), str(FIX / "bundle_v1_b.json"), "--json", str(out)], tmp_path)
    assert r.returncode == 1, r.stderr  # the planted regressions
    new, old = json.loads(out.read_text()), json.loads((FIX / "compare_v1_a_b.json").read_text())
    assert new["summary"] == old["summary"] and new["fail_on"] == old["fail_on"]
    assert new["cases"] == old["cases"]
    assert sum(bool(c["regressions"]) for c in new["cases"]) == 5


def test_compare_judges_direction_from_the_catalogue() -> None:
    """step_s is lower-is-better in the catalogue: a slower step is a throughput ratio below 1."""
    _, a = load_bundle(FIX / "bundle_v1_a.json")
    x = next(r for r in a if r.suite == "train" and r.name == "eager")
    y = load_bundle(FIX / "bundle_v1_a.json")[1][[r.case_id for r in a].index(x.case_id)]
    for r in (x, y):
        r.metrics.pop("tokens_per_s")
    y.metrics["step_s"] = type(y.metrics["step_s"])(y.metrics["step_s"].value * 2, "s")
    d = compare.diff_case(x, y, compare.parse_fail_on(compare.DEFAULT_FAIL_ON))
    assert d.throughput_metric == "step_s" and d.throughput_ratio == 0.5 and d.change == "regression"


def test_old_bundle_csv_keeps_its_columns_and_now_has_train_loss_deviation() -> None:
    run, results = load_bundle(FIX / "bundle_v1_b.json")
    new = list(csv.DictReader(io.StringIO(ci.csv_text(run, results))))
    old = list(csv.DictReader((FIX / "csv_v1_b.csv").read_text().splitlines()))
    assert len(new) == len(old)
    for n, o in zip(new, old, strict=True):
        for k, v in o.items():
            if k == "loss_divergence" and n["suite"] == "train" and n["name"] != "eager":
                # recorded by train as loss_max_rel_dev: the CSV used to lose it
                assert v == "" and float(n[k]) == 0.08, n
            elif n["suite"] == "zoo" and k == "graph_breaks":
                assert n[k] == v or v == "", (k, n[k], v)  # zoo kept it in a field only: a metric now
            else:
                assert n[k] == v, (k, n[k], v)


def test_old_bundle_renders_mfu_as_a_percentage() -> None:
    run, results = load_bundle(FIX / "bundle_v1_a.json")
    train = [r for r in results if r.suite == "train"]
    assert all(r.metrics["mfu"].unit == "" for r in train)  # written before mfu had a unit
    assert {html.mfu_percent(r) for r in train} == {1.23}  # the catalogue: a fraction, shown x100
    page = html.render(run, results)
    assert '<section id="sec-train"' in page and "1.23</td>" in page


def _old_flex_result() -> dict:
    """A flex case as bringup wrote it before 2026-12: max |err| / max |ref| under `max_rel_err`."""
    return {
        "case_id": "f1",
        "suite": "flex",
        "name": "causal/b1/s128",
        "status": "pass",
        "metrics": {"max_abs_err": [2e-6, ""], "max_rel_err": [4e-7, ""], "rel_rmse": [1e-7, ""]},
    }


def test_old_flex_max_rel_err_is_read_as_max_abs_over_peak(tmp_path: Path) -> None:
    """flex's max_rel_err meant max |err| / max |ref| (a rel_rmse in every other suite): a stored flex
    result is read with it under `max_abs_over_peak`, from a bundle and from the store, and compares
    under that name; other suites' max_rel_err is untouched."""
    from bringup.case import CaseResult
    from bringup.store import Store

    old = CaseResult.from_json(_old_flex_result())
    assert "max_rel_err" not in old.metrics and old.value("max_abs_over_peak") == 4e-7
    assert old.value("max_rel_err") is None and old.value("rel_rmse") == 1e-7
    smoke = CaseResult.from_json({**_old_flex_result(), "suite": "smoke"})
    assert smoke.value("max_rel_err") == 4e-7 and smoke.value("max_abs_over_peak") is None
    new = CaseResult.from_json(_old_flex_result())
    new.metrics.pop("max_abs_over_peak")
    new.metric("max_abs_over_peak", 4e-5)  # what flex records now
    d = compare.diff_case(old, new, compare.parse_fail_on(compare.DEFAULT_FAIL_ON))
    assert d.parity["max_abs_over_peak"] == (4e-7, 4e-5) and "max_rel_err" not in d.parity
    assert any(x.startswith("max_abs_over_peak") for x in d.regressions), d.regressions
    store = Store(tmp_path / "s.db")
    run_id = store.new_run("run", [], "cpu", "cpu", {})
    raw = CaseResult.from_json(_old_flex_result())
    raw.metrics["max_rel_err"] = raw.metrics.pop("max_abs_over_peak")  # as the old code stored it
    store.record(run_id, raw)
    (back,) = store.results(run_id)
    assert back.value("max_abs_over_peak") == 4e-7 and "max_rel_err" not in back.metrics
