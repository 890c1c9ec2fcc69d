"""A fixture per rule: input.py, expected.py (the --fix output; absent = unchanged), findings.txt.

Regenerate after a deliberate change with `BRINGUP_PORT_REGEN=1 pytest tests/port/test_port_rules.py`,
then READ the diff of the fixtures: they are the spec of every rewrite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.port.codemod import run_module
from bringup.port.rules import CODES, PARSE_ERROR

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted([*(FIXTURES / "rules").iterdir(), *(FIXTURES / "cases").iterdir()])
REGEN = os.environ.get("BRINGUP_PORT_REGEN") == "1"


def _findings_text(src: str) -> str:
    hits = run_module(src, None, fix=False).hits
    return "".join(f"{h.line}:{h.col} {h.code} {'fixable' if h.fixable else 'manual'}\n" for h in hits)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture(case: Path) -> None:
    src = (case / "input.py").read_text()
    found = _findings_text(src)
    fixed = run_module(src, None, fix=True).code
    exp_path, find_path = case / "expected.py", case / "findings.txt"
    if REGEN:
        find_path.write_text(found)
        if fixed != src:
            exp_path.write_text(fixed)
        elif exp_path.exists():
            exp_path.unlink()
    assert found == find_path.read_text()
    expected = exp_path.read_text() if exp_path.exists() else src
    assert fixed == expected
    compile(fixed, str(exp_path), "exec")
    # idempotent: fixing the fixed code changes nothing, and only manual findings remain
    again = run_module(fixed, None, fix=True)
    assert again.code == fixed
    assert again.fixed == 0
    assert not [h for h in again.hits if h.fixable]


@pytest.mark.parametrize("code", sorted(CODES - {PARSE_ERROR}))
def test_every_rule_has_a_fixture_that_triggers_it(code: str) -> None:
    case = FIXTURES / "rules" / code
    assert (case / "input.py").is_file(), f"no fixture for {code}"
    assert f" {code} " in (case / "findings.txt").read_text()


def test_select_limits_findings_and_fixes() -> None:
    src = (FIXTURES / "rules" / "BU110" / "input.py").read_text()
    src += "y = torch.zeros(1).cuda()\n"
    only = run_module(src, {"BU101"}, fix=True)
    assert {h.code for h in only.hits} == {"BU101"}
    assert "torch.cuda.synchronize" in only.code and ".to(DEVICE)" in only.code


def test_cuda_ok_comment_suppresses_finding_and_fix() -> None:
    src = "import torch\nx = torch.zeros(1).cuda()  # cuda-ok\ny = torch.zeros(1).cuda()\n"
    res = run_module(src, None, fix=True)
    assert [(h.line, h.code) for h in res.hits] == [(3, "BU101")]
    assert "x = torch.zeros(1).cuda()  # cuda-ok" in res.code and "y = torch.zeros(1).to(DEVICE)" in res.code


def test_string_mentions_are_not_findings() -> None:
    src = '"""Runs on cuda."""\n# torch.cuda is used elsewhere\nprint("cuda")\nmsg = f"on {dev}"\n'
    assert run_module(src, None, fix=True).hits == []


def test_fixed_fixtures_define_every_name_they_use() -> None:
    """ruff F821 (undefined name) over every expected.py: the DEVICE line and imports were added."""
    import subprocess
    import sys

    files = sorted(str(p) for p in FIXTURES.rglob("expected.py"))
    p = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "F821", *files],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0 and "No module named ruff" in p.stderr:
        pytest.skip("ruff not installed")
    assert p.returncode == 0, p.stdout + p.stderr


def test_docs_document_every_rule() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "port.md").read_text()
    for code in sorted(CODES):
        assert f"### {code} " in docs, f"docs/port.md has no section for {code}"
