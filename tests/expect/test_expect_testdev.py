"""The ratchet on a wrong device: testdev with an injected numeric fault (BRINGUP_TESTDEV_FAULTS).

Yesterday `mul` was broken (fault scale:mul) and the file was written from that run. Today `mul` is
fixed and `add` breaks (fault scale:add): one run names the regression (ops/add) and the new pass
(ops/mul) and exits 1; accepting the run (`expect check --update`) makes it exit 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testdev.conftest import testdev_built  # noqa: F401  (the fixture)

TD = ("--import", "bringup.testdev", "--device", "testdev")
OPS = ("ops", "--filter", "^(add|mul)$", "--dtypes", "float32")


# slow: the ratchet's regression / new pass / update is in `make test` on selftest plans
# (tests/expect/test_expect_cli.py::test_ratchet_regression_and_new_pass_exit_1_then_update_exits_0); the testdev
# faults themselves are caught in tests/testdev/test_testdev_faults.py
@pytest.mark.slow
def test_testdev_fault_regression_and_fixed_op(cli, tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    p = cli(*TD, *OPS, env={"BRINGUP_TESTDEV_FAULTS": "scale:mul=1.01"}, timeout=900)
    assert p.returncode == 1 and "ops/mul:float32: fail_numeric" in p.stderr, p.stderr[-3000:]
    assert cli("expect", "init", "--out", "e.yaml").returncode == 0
    text = (tmp_path / "e.yaml").read_text()
    assert "ops/mul:float32:\n        status: fail_numeric\n        reason: numeric" in text, text
    assert "ops/add" not in text

    p = cli(*TD, *OPS, "--expect", "e.yaml", env={"BRINGUP_TESTDEV_FAULTS": "scale:add=1.01"}, timeout=900)
    assert p.returncode == 1, p.stdout[-3000:]
    assert "NEW FAILURE ops/add:float32: expected pass, got fail_numeric" in p.stdout
    assert "NEW PASS ops/mul:float32: expected fail_numeric, got pass" in p.stdout

    p = cli("expect", "check", "--expect", "e.yaml", "--update")
    assert p.returncode == 0 and "exits 0" in p.stdout, p.stdout[-2000:]
    text = (tmp_path / "e.yaml").read_text()
    assert "ops/add:float32:\n        status: fail_numeric" in text and "ops/mul" not in text
