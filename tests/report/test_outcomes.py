"""One vocabulary for what did not pass: every status is in exactly one outcome; the page's headline and
the terminal's totals line say the same words."""

from __future__ import annotations

from bringup.case import CaseResult, Status
from bringup.console import totals_line
from bringup.outcomes import BY_STATUS, OUTCOMES, outcome, outcome_line


def _r(status: Status, suite: str = "zoo") -> CaseResult:
    return CaseResult(case_id=f"{suite}-{status.value}-{id(object())}", suite=suite, name=status.value, status=status)


def test_every_status_has_one_outcome() -> None:
    seen = [s for o in OUTCOMES for s in o.statuses]
    assert sorted(seen) == sorted(Status) and len(seen) == len(set(seen))
    assert set(BY_STATUS) == set(Status)
    assert outcome("unsupported").key == outcome(Status.FALLBACK).key == "gap"
    assert outcome("budget").key == "failure"  # over budget: the device did not deliver in time
    assert outcome("error").key == "error" and outcome("ref_fail").key == "not_judged"


def test_outcome_line_counts_judged_cases() -> None:
    rs = [_r(Status.PASS)] * 48 + [_r(Status.UNSUPPORTED)] * 5
    assert outcome_line(rs) == "48/53 pass; 5 gaps, 0 failures"
    rs += [_r(Status.FAIL_NUMERIC), _r(Status.ERROR), _r(Status.REF_FAIL)]
    assert outcome_line(rs) == "48/55 pass; 5 gaps, 1 failure, 1 harness error, 1 not judged"


def test_terminal_totals_line_uses_the_same_words() -> None:
    rs = [_r(Status.PASS), _r(Status.PASS), _r(Status.FALLBACK), _r(Status.BUDGET)]
    line = totals_line(rs)
    assert line.startswith(outcome_line(rs) + " (")
    assert line == "2/4 pass; 1 gap, 1 failure (2 pass, 1 budget, 1 fallback)"
    assert totals_line([]) == "no cases"


def test_the_two_escapes_have_distinct_names() -> None:
    """rich_esc escapes rich markup (terminal), plots.esc escapes HTML: neither does the other's job."""
    from bringup.console import rich_esc
    from bringup.report.plots import esc

    assert rich_esc("[bold]<b>") == "\\[bold]<b>"
    assert esc("[bold]<b>") == "[bold]&lt;b&gt;"
