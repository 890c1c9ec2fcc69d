"""`bringup run --quick` says what the quick path left out that `--full` runs (bringup/orchestrate.py LeftOut):
counted from the full plan itself, per suite, never written by hand."""

from __future__ import annotations

from bringup.device import resolve_device
from bringup.options import Options
from bringup.orchestrate import LeftOut, RunCommandOptions, plan_parts


def test_the_full_plan_is_counted_per_suite_against_the_quick_one() -> None:
    quick = Options(command=RunCommandOptions(quick=True))
    device = resolve_device("cpu")
    cases = plan_parts(quick, device)[0]
    got = LeftOut(quick, device).summary(cases)
    assert "error" not in got
    assert got["zoo"]["quick"] == sum(c.suite == "zoo" for c in cases) and got["zoo"]["full"] > got["zoo"]["quick"]
    assert got["flex"]["full"] > got["flex"]["quick"] > 0
    assert "smoke" not in got  # the full run plans no more smoke cases than the quick one
    assert LeftOut.line(got).startswith("quick path: --full runs ")


def test_a_full_plan_that_fails_is_said_not_hidden() -> None:
    only = Options(command=RunCommandOptions(quick=True, only="smoke"))
    device = resolve_device("cpu")
    left = LeftOut(only, device)
    assert left.summary(plan_parts(only, device)[0]) == {}
    assert LeftOut.line({}) == "quick path: --full plans nothing more"
    assert "unknown (RuntimeError: x)" in LeftOut.line({"error": "RuntimeError: x"})
