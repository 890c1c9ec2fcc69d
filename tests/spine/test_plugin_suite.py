"""A suite from a plugin: docs/examples/bringup_kernels.py, loaded with `--import`, registers one Suite
(one registry line) and is a sub-command, part of `bringup run`, a report section and a CSV column."""

from __future__ import annotations

import csv
import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

from bringup import api
from bringup.bundle import load_bundle
from tests.conftest import assert_one_line_error, load_json, run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
ENV = {"PYTHONPATH": os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture()
def kernels(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    mod = importlib.import_module("bringup_kernels")
    yield mod
    sys.modules.pop("bringup_kernels", None)
    api.unregister_suite("kernels")  # other tests in this process see the built-in registry only


def test_the_plugin_is_a_command_with_its_metric_and_csv_column(tmp_path: Path) -> None:
    p = run_cli(
        [
            "--import",
            "bringup_kernels",
            "--device",
            "cpu",
            "kernels",
            "--kernels",
            "softmax,gelu",
            "--json",
            "k.json",
            "--csv",
            "k.csv",
        ],
        tmp_path,
        env=ENV,
        check_rc=0,
    )
    assert "kernels" in p.stdout and "softmax.fp32" in p.stdout
    data = load_json(tmp_path / "k.json")
    assert data["summary"] == {"pass": 2} and data["passed"] == 2 and data["cases"][0]["suite"] == "kernels"
    assert all(c["kernel_ms"] > 0 for c in data["cases"])
    rows = list(csv.DictReader((tmp_path / "k.csv").read_text().splitlines()))
    assert [float(r["kernel_ms"]) > 0 for r in rows] == [True, True]  # a plugin's metric reaches the CSV
    export = tmp_path / "b.json"
    run_cli(["export", "--out", str(export)], tmp_path, check_rc=0)
    _, results = load_bundle(export)
    assert {r.metrics["kernel_ms"].unit for r in results} == {"ms"}  # recorded through its catalogue entry


def test_without_the_plugin_there_is_no_such_command(tmp_path: Path) -> None:
    assert_one_line_error(run_cli(["--device", "cpu", "kernels"], tmp_path), "kernels")


def test_plugin_bad_input_is_one_line(tmp_path: Path) -> None:
    p = run_cli(["--import", "bringup_kernels", "--device", "cpu", "kernels", "--kernels", "nope"], tmp_path, env=ENV)
    assert_one_line_error(p, "unknown kernel 'nope'")


def test_run_quick_includes_the_plugin_and_its_report_section(tmp_path: Path) -> None:
    p = run_cli(
        [
            "--import",
            "bringup_kernels",
            "--device",
            "cpu",
            "run",
            "--quick",
            "--only",
            "smoke,kernels",
            "--json",
            "run.json",
            "--out",
            "report.html",
        ],
        tmp_path,
        env=ENV,
        check_rc=0,
    )
    assert "plan (quick): smoke 2, kernels 2" in p.stdout
    data = load_json(tmp_path / "run.json")
    assert data["summary"] == {"pass": 4} and data["kernels"]["passed"] == 2
    page = (tmp_path / "report.html").read_text()
    assert '<section id="sec-kernels"' in page and "<h2>Backend kernels</h2>" in page and 'id="tbl-kernels"' in page
    assert page.index('id="sec-smoke"') < page.index('id="sec-kernels"') < page.index('id="sec-port"')
    # the report command (a separate process) finds the section too, through the --import
    run_cli(["--import", "bringup_kernels", "report", "--out", "again.html"], tmp_path, env=ENV, check_rc=0)
    assert 'id="tbl-kernels"' in (tmp_path / "again.html").read_text()


def test_the_plugin_verdict_fails_on_a_wrong_kernel(kernels) -> None:
    x = torch.randn(64, 512, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for name, fn in kernels.KERNELS.items():
        for dtype in (torch.float32, torch.bfloat16):
            right = fn(x.to(dtype))
            assert kernels.judge(name, right, x, dtype).ok, (name, dtype)
            assert not kernels.judge(name, right * 1.01, x, dtype).ok, (name, dtype)  # 1% off
            assert not kernels.judge(name, right.flip(-1), x, dtype).ok, (name, dtype)  # wrong layout


def test_registry_one_name_one_suite(kernels) -> None:
    s = api.get_suite("kernels")
    assert s is not None and s.module == "bringup_kernels" and s.run_cases is not None
    assert api.metric_spec("kernel_ms") == kernels.KERNEL_MS
    with pytest.raises(ValueError, match="already registered"):
        api.register_suite(api.Suite(name="zoo", help="another zoo", module="elsewhere"))
    with pytest.raises(ValueError, match="already defined"):
        api.register_metric(api.MetricSpec("kernel_ms", "s", False, "a different definition"))
    names = [s.name for s in api.suites()]
    assert names[:8] == ["smoke", "probe", "train", "flex", "zoo", "ops", "kernels", "profile"]
