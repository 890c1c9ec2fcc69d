"""`bringup run` end to end (smoke only, to stay quick): the run, summary.json, the report, CI outputs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import run_cli


def test_run_only_smoke_writes_report_and_ci_outputs(tmp_path: Path) -> None:
    (tmp_path / "cuda_train.py").write_text("import torch\nx = torch.ones(2).cuda()\ntorch.cuda.synchronize()\n")
    p = run_cli(
        [
            "--device",
            "cpu",
            "run",
            "--only",
            "smoke,port",
            "--port",
            "cuda_train.py",
            "--junit",
            "j.xml",
            "--csv",
            "c.csv",
        ],
        cwd=tmp_path,
        check_rc=0,
    )
    assert "plan (quick): smoke 2" in p.stdout
    assert "port: 2 finding(s) in 1 file(s)" in p.stdout
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("report: "))
    report = tmp_path / line.removeprefix("report: ")  # relative to the cwd, like the default --db
    assert report.parent.parent == tmp_path / "bringup-results" and report.name == "report.html"
    page = report.read_text()
    assert 'id="sec-smoke"' in page and "2/2 pass" in page and "No zoo cases in this run" in page
    summary = json.loads((report.parent / "summary.json").read_text())
    assert summary["command"] == "run" and summary["summary"] == {"pass": 2}
    assert summary["port"]["summary"]["findings"] == 2
    assert 'id="sec-port"' in page and "2 findings, 2 fixable" in page and "cuda_train.py:2:" in page
    assert ET.parse(tmp_path / "j.xml").getroot().get("tests") == "2"
    assert len((tmp_path / "c.csv").read_text().splitlines()) == 3
    # --out puts the report elsewhere
    run_cli(["--device", "cpu", "run", "--only", "smoke", "--out", "mine.html"], cwd=tmp_path, check_rc=0)
    assert (tmp_path / "mine.html").read_text().count('class="st st-pass"') >= 2
