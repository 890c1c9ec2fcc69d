"""The HTML scorecard from fixture stores: every section, escaping, empty sections, the CLI paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bringup.api import suites
from bringup.case import Status
from bringup.flex.section import flex_summary_line
from bringup.report import html, plots
from bringup.store import Store
from tests.conftest import fake_run, run_cli
from tests.report.conftest import XSS, build_store, fixture_results

SECTIONS = ("header", "verdict", "smoke", "probe", "train", "flex", "zoo", "ops", "profile", "port", "failures")


def _render(db: Path, run_id: str) -> str:
    with Store(db) as st:
        path = html.write_report(st, run_id, None)
    assert path == db.parent / run_id / "report.html"
    return path.read_text()


def test_report_has_every_section(fixture_store) -> None:
    db, run_id = fixture_store
    page = _render(db, run_id)
    for s in SECTIONS:
        assert f'id="sec-{s}"' in page, s
    # header: device, versions, host, date
    assert "x86_64 test cpu" in page and "torch" in page and run_id in page
    # verdict tiles with counts
    assert re.search(r'class="tile v-fail" href="#sec-zoo".*?4/6 pass', page)
    assert re.search(r'class="tile v-pass" href="#sec-train".*?5/5 pass', page)
    assert "6/9 supported" in page  # probe: unsupported and error count against, as features
    # train: the seeds' table, loss curves, TTFS bars
    worker = "first step in the suite&#x27;s worker"  # named apart from "first step as a new job"
    for col in (f"{worker} s", "steady step s", "ratio", "tok/s", "MFU %", "speed-up vs eager"):
        assert f">{col}<" in page
    assert "Loss per step" in page and "compile: inductor" in page
    assert "First step in the suite&#x27;s worker: compile phases" in page
    assert "108.5x" in page  # compile (cold): 21.7 s first step / 0.20 s steady
    assert "1.23" in page  # MFU 0.0123 shown as percent
    assert "Fastest compiled start: regional (warm)" in page
    # flex: the seeds' sentence and the heatmap
    assert "10/12 passed; 2 budget (all batch 4, seq 8192)" in page
    assert 'class="plot heatmap"' in page
    # zoo: sortable + filterable
    assert 'id="tbl-zoo"' in page and 'data-table="tbl-zoo"' in page and 'name="gb"' in page
    assert 'data-gb="1"' in page and 'data-fb="1"' in page
    assert re.search(r"<th[^>]*>baseline</th>", page)  # the --baseline comparison's column (llama: ok)
    # ops counts, profile summary, port findings
    assert "linalg.svd" in page and "aten::_softmax" in page and "device idle n/a" in page
    assert "2 findings, 1 fixable" in page and "BU101" in page
    assert "trace.json.gz" in page


def test_untrusted_strings_are_escaped(fixture_store) -> None:
    db, run_id = fixture_store
    page = _render(db, run_id)
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "evil&lt;model&gt;" in page and "evil<model>" not in page
    assert "evil&lt;x&gt;.py" in page
    # exactly two <script> elements: our JS and the inert JSON data block
    assert page.count("<script") == 2
    # the embedded JSON: no raw '<' (cannot close the element), and it round-trips
    m = re.search(r'<script type="application/json" id="bringup-data">(.*?)</script>', page, re.S)
    assert m and "<" not in m.group(1) and ">" not in m.group(1) and "&" not in m.group(1)
    data = json.loads(m.group(1))
    assert data["run_id"] == run_id and any(XSS in (c.get("reason") or "") for c in data["cases"])
    assert data["port"]["summary"]["findings"] == 2


def test_json_for_script_cannot_break_out() -> None:
    s = html.json_for_script({"x": "</script><!-- & \u2028"})
    assert "</" not in s and "<!--" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"x": "</script><!-- & \u2028"}


def test_empty_sections_say_so(tmp_path: Path) -> None:
    db = tmp_path / "bringup.db"
    smoke = [r for r in fixture_results() if r.suite == "smoke"]
    run_id = build_store(db, results=smoke, port=False)
    page = _render(db, run_id)
    for area in ("train", "flex", "zoo", "ops", "profile"):
        assert f"No {area} cases in this run" in page
    assert "No port scan in this run" in page
    assert "Every judged case passes: no failures, no gaps." in page
    assert 'class="tile v-none" href="#sec-zoo"' in page


def test_unknown_suite_gets_a_generic_section(tmp_path: Path) -> None:
    db = tmp_path / "bringup.db"
    rs = [r for r in fixture_results() if r.suite == "smoke"]
    for r in rs:
        r.suite = "selftest"
    page = _render(db, build_store(db, results=rs, port=False))
    assert 'id="sec-selftest"' in page and 'href="#sec-selftest"' in page and "max_abs_err" in page


def test_flex_line_groups_failures_by_shared_params() -> None:
    rs = [r for r in fixture_results() if r.suite == "flex"]
    assert flex_summary_line(rs) == "10/12 passed; 2 budget (all batch 4, seq 8192)"
    rs[0].status = Status.FAIL_NUMERIC  # noop b1 s1024
    rs[1].status = Status.REF_FAIL
    assert flex_summary_line(rs) == (
        "8/11 passed; 1 fail_numeric (all mod noop, batch 1, seq 1024); 2 budget (all batch 4, seq 8192); "
        "1 ref_fail (excluded)"
    )


def test_plots_are_valid_and_escape_labels() -> None:
    import xml.etree.ElementTree as ET

    svg = plots.line_chart({"a<b": [(0, 1.0), (1, float("nan")), (2, 0.5)], "c": [(0, 2.0)]}, "t&t", "step", "y")
    ET.fromstring(svg)  # well-formed XML
    assert "a&lt;b" in svg and "t&amp;t" in svg
    assert "no finite data" in plots.line_chart({"x": [(0, float("inf"))]}, "empty")
    bars = plots.stacked_bars([("<x>", [("p1", 1.0), ("rest", -1.0)]), ("y", [("p1", float("nan"))])], "b")
    ET.fromstring(bars)
    cells = {("r", "c"): plots.Cell("budget", "tip <b>", "T")}
    hm = plots.heatmap(["r", "r2"], ["c"], cells, "h")
    ET.fromstring(hm)
    assert "no case" in hm and "tip &lt;b&gt;" in hm
    assert plots.nice_ticks(0, 9.3)[:3] == [0.0, 2.0, 4.0]
    assert plots.nice_ticks(5, 5) != []


def test_report_cli_default_path_latest_run_and_bundle(tmp_path: Path, bringup_inproc) -> None:
    db = tmp_path / "res" / "bringup.db"
    build_store(db)
    latest = build_store(db, regress=True)
    p = run_cli(["--db", str(db), "report"], cwd=tmp_path, check_rc=0)  # the real CLI, once
    out = db.parent / latest / "report.html"
    assert f"report: {out}" in p.stdout and out.is_file()
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's 0600
    assert bringup_inproc("--db", str(db), "report", latest, "--out", "r.html").returncode == 0
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert bringup_inproc("--db", str(db), "export", latest, "--out", "b.json").returncode == 0
    assert bringup_inproc("report", "b.json").returncode == 0
    page = (tmp_path / "b.html").read_text()
    assert latest in page and 'id="sec-flex"' in page


def test_render_survives_odd_field_types() -> None:
    """Suites evolve: fields of unexpected shapes, NaN/inf metrics and empty series must not break the page."""
    import itertools
    import math

    from bringup.case import Metric

    odd = [
        None,
        "",
        "x<y",
        3,
        -1.5,
        float("nan"),
        [],
        [None, 1, "a", {"k": "<v>"}],
        {},
        {"a": None, "b": [1]},
        {"H2D": None},
        True,
    ]
    keys = [
        "top_ops",
        "transfers",
        "busy_s",
        "idle_s",
        "host_s",
        "break_reasons",
        "fallback_ops",
        "findings",
        "summary",
        "compile_breakdown",
        "mode",
        "cache",
        "mod",
        "batch",
        "seq",
        "q_heads",
        "kv_heads",
        "backward",
        "op",
        "dtype",
        "feature",
        "top_kernels",
        "compiled_regions",
        "note",
        "nproc",
        "model",
    ]
    results = []
    for i, (suite, value) in enumerate(itertools.product(tuple(s.name for s in suites()) + ("other",), odd)):
        r = fixture_results()[i % 40]
        r.suite, r.case_id = suite, f"c{i}"
        r.fields = dict.fromkeys(keys, value)
        r.params = dict.fromkeys(keys[10:20], value)
        r.metrics = {
            k: Metric(v, u)
            for k, v, u in [
                ("ttfs_s", math.inf, "s"),
                ("step_s", math.nan, "ms"),
                ("mfu", -1.0, "%"),
                ("compile_x_s", 1.0, "min"),
            ]
        }
        r.series = {"loss": [(0, math.nan)], "other": []}
        results.append(r)
    run = fake_run(
        bringup_version="0",
        torch_version="t",
        ended_at=None,
        status="interrupted",
        info={"port": {"findings": [None, {"line": "<x>"}], "summary": []}, "options": []},
    )
    page = html.render(run, results)
    assert page.endswith("</html>\n") and "results are partial" in page
