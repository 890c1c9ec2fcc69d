"""A suite whose cases are all ref_fail judged nothing about the device: its tile is not green, the
terminal says so and the run exits 1 (a few ref_fail among judged cases stay non-failing)."""

from __future__ import annotations

import json
from pathlib import Path

from bringup.case import Status
from bringup.console import totals_line, unjudged_suites
from bringup.flow import exit_code
from bringup.report import ci, html
from tests.conftest import fake_run, load_json, run_cli
from tests.report.conftest import _case


def _zoo(name: str, status: Status):  # type: ignore[no-untyped-def]
    return _case("zoo", name, status, {"model": name}, reason="config: bad" if status is Status.REF_FAIL else "")


def test_all_ref_fail_suite_is_not_green() -> None:
    only_ref = [_zoo("a", Status.REF_FAIL), _zoo("b", Status.REF_FAIL)]
    v = html.verdict("zoo", only_ref, False)
    assert v.key == "fail" and v.big == "nothing judged", v
    assert unjudged_suites(only_ref) == ["zoo"]
    assert exit_code(only_ref) == 1
    assert "nothing judged in zoo" in totals_line(only_ref)
    xml = ci.junit_xml(_run(), only_ref)  # CI that reads JUnit sees a failure, not only skips
    assert 'name="nothing judged"' in xml and 'failures="1"' in xml and 'type="nothing_judged"' in xml
    # one judged case beside a ref_fail: the suite judged something, ref_fail stays non-failing
    mixed = [_zoo("a", Status.REF_FAIL), _zoo("b", Status.PASS)]
    assert html.verdict("zoo", mixed, False).key == "pass"
    assert unjudged_suites(mixed) == [] and exit_code(mixed) == 0
    assert "nothing judged" not in totals_line(mixed)
    assert 'name="nothing judged"' not in ci.junit_xml(_run(), mixed)


def _run():  # type: ignore[no-untyped-def]
    return fake_run(command="zoo", torch_version="", bringup_version="", ended_at=None)


def test_cli_run_that_judges_nothing_exits_1(tmp_path: Path) -> None:
    """Through the real CLI: a zoo run whose only model has a broken config (ref_fail, no device work)."""
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 3,
                "num_key_value_heads": 3,
                "num_hidden_layers": 1,
                "vocab_size": 64,
            }
        )
    )
    src = tmp_path / "models.txt"
    src.write_text(f"{bad}\n")
    out = tmp_path / "out.json"
    p = run_cli(
        [
            "--device",
            "cpu",
            "zoo",
            "--source",
            str(src),
            "--steps",
            "1",
            "--compile-backend",
            "none",
            "--json",
            str(out),
        ],
        cwd=tmp_path,
        check_rc=1,
    )
    data = load_json(out)
    assert [c["status"] for c in data["cases"]] == ["ref_fail"]
    assert data["unjudged_suites"] == ["zoo"]
    assert "nothing judged in zoo" in p.stdout
