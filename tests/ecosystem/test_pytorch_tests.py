"""`bringup export --format pytorch-tests` (issue 45, item 1): `set_test_configs` arguments for PyTorch's
device-generic tests from a run's `ops` cases. The generated file is loaded by the installed torch's own
machinery (torch.testing._internal: `set_test_configs` on a device test base, `instantiate_device_type_tests`,
`@ops` over the real OpInfos), in a fresh interpreter, and the tests it instantiates are run: the allowlist
decides which ops get tests, a dtype that does not work is skipped with bringup's reason, and the measured
tolerance is what `test_compare_cpu` compares with; the same check on a config with the tolerance left out fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bringup.case import CaseResult, Status, make_case_id
from bringup.report.exports.pytorch_tests import pytorch_test_configs, round_up
from tests.conftest import REPO, assert_one_line_error, fake_run

RUN = fake_run(run_id="R1", command="ops", argv=["ops"], device="testdev", device_name="bringup testdev 0")


def _op(op: str, dtype: str, status: Status, reason: str = "", atol_needed: float = 0.0) -> CaseResult:
    p = {"op": op, "dtype": dtype, "samples": 2}
    rtol = {"float32": 1.3e-6, "bfloat16": 1.6e-2}[dtype]
    err = {"max_abs": atol_needed, "max_rel": 0.0, "atol_needed": atol_needed, "rtol": rtol, "default_atol": 1e-5}
    return CaseResult(
        case_id=make_case_id("ops", p),
        suite="ops",
        name=f"{op}:{dtype}",
        status=status,
        params=p,
        reason=reason,
        fields={"op": op, "dtype": dtype, "error_vs_cpu": err},
    )


def results() -> list[CaseResult]:
    return [
        _op("add", "float32", Status.PASS),
        _op("add", "bfloat16", Status.PASS),
        _op("sin", "float32", Status.PASS, atol_needed=3.1e-4),  # further from cpu than the default atol 1e-5
        _op("sin", "bfloat16", Status.FAIL_NUMERIC, "sample 0: 400/400 values off\nmore"),
        _op("mul", "float32", Status.FALLBACK),
        _op("mul", "bfloat16", Status.REF_FAIL),
        _op("linalg.svd", "float32", Status.UNSUPPORTED, "NotImplementedError: aten::_linalg_svd"),
    ]


def test_what_the_config_says() -> None:
    cfg = pytorch_test_configs(RUN, results()).to_json()
    assert cfg["op_allowlist"] == ["add", "mul", "sin"] and cfg["test_exclusions"] == {}
    assert cfg["excluded_ops"] == {
        "linalg.svd": "float32: bringup: unsupported: NotImplementedError: aten::_linalg_svd"
    }
    sin = cfg["op_overrides"]["sin"]
    assert sin[0] == {
        "kind": "skip",
        "dtypes": ["bfloat16"],
        "reason": "bringup: fail_numeric: sample 0: 400/400 values off",
    }
    assert sin[1]["kind"] == "tolerance" and sin[1]["atol"] == 6.2e-4 and sin[1]["rtol"] == 1.3e-6
    assert (sin[1]["cls_name"], sin[1]["test_name"]) == ("TestCommon", "test_compare_cpu")
    assert "add" not in cfg["op_overrides"] and "mul" not in cfg["op_overrides"]  # nothing to override
    assert cfg["fallback_only"] == {"mul": ["float32"]}
    assert round_up(3.1e-4 * 2) == 6.2e-4 and round_up(1.234e-5) == 1.3e-5 and round_up(0.5) == 0.5


CHECK = """
    import importlib.util, json, sys, unittest
    import torch
    from torch.testing._internal.common_device_type import (CPUTestBase, PrivateUse1TestBase,
        instantiate_device_type_tests, ops)
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_utils import TestCase

    assert hasattr(PrivateUse1TestBase, "set_test_configs")
    OPS = [o for o in op_db if o.full_name in ("add", "sin", "mul", "linalg.svd")]
    out = []
    for path in sys.argv[1:]:
        spec = importlib.util.spec_from_file_location("cfg", path)
        cfg = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cfg)
        seen = []

        class TestCommon(TestCase):
            @ops(OPS, allowed_dtypes=(torch.float32, torch.bfloat16))
            def test_compare_cpu(self, device, dtype, op):
                seen.append([op.full_name, str(dtype), self.precision, self.rel_tol])

        scope = {"TestCommon": TestCommon}
        CPUTestBase.set_test_configs(**cfg.test_configs())  # what PrivateUse1TestBase's own classmethod does
        try:
            instantiate_device_type_tests(TestCommon, scope, only_for="cpu")
        finally:
            CPUTestBase.set_test_configs()
        res = unittest.TestResult()
        unittest.TestLoader().loadTestsFromTestCase(scope["TestCommonCPU"]).run(res)
        out.append({"seen": seen, "skipped": [[t.id().split(".")[-1], why] for t, why in res.skipped],
                    "errors": len(res.errors) + len(res.failures)})
    print(json.dumps(out))
"""


def _load_in_torch(*paths: Path) -> list[dict]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHECK), *map(str, paths)],
        cwd=REPO,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_file_loads_in_torch_testing_and_does_what_it_says(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(pytorch_test_configs(RUN, results()).python())
    bad_results = [r for r in results() if r.name != "sin:float32"] + [_op("sin", "float32", Status.PASS)]
    bad = tmp_path / "bad.py"  # the same run, but sin's error left unmeasured: no tolerance
    bad.write_text(pytorch_test_configs(RUN, bad_results).python())
    out, worse_out = _load_in_torch(good, bad)
    ran = {(n, d): (prec, rel) for n, d, prec, rel in out["seen"]}
    assert out["errors"] == 0
    assert {n for n, _ in ran} == {"add", "sin", "mul"}  # the allowlist: no linalg.svd test at all
    assert ran[("sin", "torch.float32")][0] == pytest.approx(6.2e-4)  # the measured tolerance reached the test
    assert ran[("add", "torch.float32")][0] < 1e-4  # untouched ops keep torch's default
    skipped = dict(out["skipped"])
    assert skipped == {"test_compare_cpu_sin_cpu_bfloat16": "bringup: fail_numeric: sample 0: 400/400 values off"}
    worse = {(n, d): p for n, d, p, _ in worse_out["seen"]}
    assert worse[("sin", "torch.float32")] < 6.2e-4  # the check can fail: without the override, no tolerance


def test_cli_and_bad_input(bringup_inproc, tmp_path: Path) -> None:
    from bringup.store import Store

    db = tmp_path / "r.db"
    with Store(db) as st:
        rid = st.new_run("ops", ["ops"], "testdev", "bringup testdev 0", {})
        for r in results():
            st.record(rid, r)
        st.end_run(rid, "finished")
    p = bringup_inproc("--db", str(db), "export", "--format", "pytorch-tests", "--out", "cfg.py")
    assert p.returncode == 0, p.stderr
    assert "OP_ALLOWLIST" in (tmp_path / "cfg.py").read_text()
    assert json.loads((tmp_path / "cfg.json").read_text())["op_allowlist"] == ["add", "mul", "sin"]
    sample = REPO / "docs" / "sample" / "run-quick-cpu.json"
    p = bringup_inproc("export", str(sample), "--format", "pytorch-tests", "--margin", "0.5", "--out", "x.py")
    assert_one_line_error(p, "--margin")
    p = bringup_inproc("--db", str(db), "export", "NOPE", "--format", "pytorch-tests", "--out", "x.py")
    assert_one_line_error(p, "NOPE")
    assert not (tmp_path / "x.py").exists() and not (tmp_path / "x.json").exists()
