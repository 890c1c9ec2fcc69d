"""`--fallback [SUITE=]POLICY` (issue 45, item 5): under `error` a CPU fallback fails the case (status
`fallback`, the ops named), in every suite, smoke included (which does not look for fallbacks itself): the
worker keeps what the backend's own counter saw over the case. On the C++ test device, whose smoke MLP step
runs gelu, tanh, sum and mse_loss through its CPU fallback (a pass under the default `gap`), and whose GEMM is
native (still a pass: no false failure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.runner.fallback_policy import FallbackPolicy, counter_delta, fallback_ops
from tests.conftest import assert_one_line_error, load_json
from tests.testdev.conftest import testdev_built  # noqa: F401  (the session fixture: the extension built once)

SUITES = ["smoke", "zoo", "ops"]


def _r(suite: str = "smoke", status: Status = Status.PASS, reason: str = "", **fields) -> CaseResult:
    return CaseResult(case_id="x", suite=suite, name="n", status=status, reason=reason, fields=dict(fields))


def test_parse_run_wide_and_per_suite() -> None:
    p = FallbackPolicy.parse(["error", "zoo=gap"], SUITES)
    assert (p.for_suite("smoke"), p.for_suite("zoo"), p.active) == ("error", "gap", True)
    p = FallbackPolicy.parse(["ops=error,smoke=error"], SUITES)
    assert (p.for_suite("ops"), p.for_suite("smoke"), p.for_suite("zoo")) == ("error", "error", "gap")
    assert not FallbackPolicy.parse(None, SUITES).active
    for bad, needle in (["nope"], "policy is one of"), (["flexx=error"], "no suite 'flexx'"), (["ops=warn"], "policy"):
        with pytest.raises(BadInput, match=needle):
            FallbackPolicy.parse(bad, SUITES)


def test_error_fails_a_passing_case_and_names_the_ops() -> None:
    err, gap = FallbackPolicy.parse(["error"]), FallbackPolicy.parse([])
    fields = {
        "fallback_ops": ["aten::sin"],
        "backend_fallback_ops": {"aten::sin": 3, "aten::gelu.out": 1, "aten::_local_scalar_dense": 4},
    }
    assert gap.apply(_r(**fields)).status is Status.PASS  # the default leaves the verdict to the suite
    r = err.apply(_r(**fields))
    assert r.status is Status.FALLBACK and r.fields["fallback_policy"] == "error"
    assert r.reason == "CPU fallback not allowed (--fallback error): aten::sin x3, aten::gelu.out x1"  # no host read
    bad = err.apply(_r(status=Status.FAIL_NUMERIC, reason="loss off", fallback_ops={"aten::tanh": 2}))
    assert bad.status is Status.FAIL_NUMERIC and bad.reason.startswith("loss off; CPU fallback not allowed")
    assert err.apply(_r(backend_fallback_ops={"aten::copy_": 2})).status is Status.PASS  # a copy is no fallback
    assert FallbackPolicy.parse(["ops=error"]).apply(_r(fallback_ops=["aten::sin"])).status is Status.PASS
    assert fallback_ops({"fallback_ops": {"aten::a": 2}, "backend_fallback_ops": {"aten::a": 5}}) == {"aten::a": 5}
    assert counter_delta({"aten::a": 2}, {"aten::a": 5, "aten::b": 1, "aten::to": 3}) == {"aten::a": 3, "aten::b": 1}
    assert counter_delta(None, {"aten::a": 1}) == {}


def test_bad_fallback_value_is_one_line_and_nothing_written(bringup_inproc, tmp_path: Path) -> None:
    assert_one_line_error(bringup_inproc("--device", "cpu", "smoke", "--fallback", "nope"), "--fallback nope")
    assert_one_line_error(bringup_inproc("--device", "cpu", "--fallback", "smoek=error", "smoke"), "no suite 'smoek'")
    assert not (tmp_path / "bringup-results").exists()


def test_error_on_the_test_device_names_the_fallback_ops(cli, tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    p = cli("--import", "bringup.testdev", "--device", "testdev", "smoke", "--fallback", "error", "--json", "s.json")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    rows = {c["name"]: c for c in load_json(tmp_path / "s.json")["cases"]}
    step, gemm = rows["mlp_step"], rows["gemm"]
    assert step["status"] == "fallback" and step["fallback_policy"] == "error", step
    assert step["reason"].startswith("CPU fallback not allowed (--fallback error): ")
    assert "aten::gelu.out" in step["backend_fallback_ops"] and "aten::gelu" in step["reason"]
    assert gemm["status"] == "pass" and "backend_fallback_ops" not in gemm  # native mm: nothing fell back
