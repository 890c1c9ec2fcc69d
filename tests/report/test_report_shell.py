"""report/html.py is a page shell: it holds no suite-specific code and renders what the registry says."""

from __future__ import annotations

import ast
from pathlib import Path

import bringup.report.html as html
from bringup.api import Page, Suite, suites
from bringup.case import CaseResult, Metric, Status
from bringup.store import RunInfo
from tests.conftest import fake_run


def test_the_shell_names_no_suite() -> None:
    tree = ast.parse(Path(html.__file__).read_text())
    names = {s.name for s in suites()}
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not (names & literals), names & literals
    # bringup.expect: the run's Expectations section (--expect), a run feature, not a suite
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    allowed = ("api", "case", "metrics", "report", "store", "files", "console", "expect", "outcomes")
    assert all(m.split(".")[1] in allowed for m in imported if m.startswith("bringup")), imported


def _run() -> RunInfo:
    return fake_run(run_id="r1", bringup_version="0", torch_version="t")


def test_sections_come_from_the_registry_in_order() -> None:
    def sec(results, page: Page) -> str | None:
        return f"<p>custom {len(results)} {page.run.run_id}</p>" if results else None

    reg = [
        Suite("beta", "b", run_cases=lambda d, q: [], order=2, title="Beta <b>", section=sec),
        Suite("alpha", "a", run_cases=lambda d, q: [], order=1, title="Alpha"),
    ]
    r = CaseResult("c1", "beta", "one", Status.PASS, metrics={"mfu": Metric(0.25, "fraction")})
    page = html.render(_run(), [r], suites=sorted(reg, key=lambda s: s.order))
    assert page.index('id="sec-alpha"') < page.index('id="sec-beta"')
    assert "<h2>Beta &lt;b&gt;</h2>" in page and "<p>custom 1 r1</p>" in page
    assert "No alpha cases in this run" in page  # a suite of `run` with no results says so
    assert 'id="sec-zoo"' not in page  # only the registry passed in


def test_a_suite_without_a_section_gets_its_metrics_by_unit() -> None:
    r = CaseResult(
        "c1",
        "gamma",
        "one",
        Status.PASS,
        metrics={"mfu": Metric(0.25, "fraction"), "peak_mem_bytes": Metric(3 * 2**20, "B")},
    )
    page = html.render(_run(), [r], suites=[Suite("gamma", "g", run_cases=lambda d, q: [])])
    assert "mfu (%)</th>" in page and ">25</td>" in page and ">3 MiB</td>" in page
