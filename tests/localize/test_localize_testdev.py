"""`bringup localize` on a wrong device: testdev with silu scaled by 1.01 (BRINGUP_TESTDEV_FAULTS).

The localized module is llama's first MLP activation and the op is aten::silu; the written repro, in a
fresh process, shows the mismatch on the faulty device (exit 1) and none on a clean one (exit 0); the
clean device localizes nothing (pass).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import assert_one_line_error, load_json
from tests.testdev.conftest import testdev_built  # noqa: F401  (the fixture)

TD = ("--import", "bringup.testdev", "--device", "testdev")
FAULT = {"BRINGUP_TESTDEV_FAULTS": "scale:silu=1.01"}


def _repro(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "BRINGUP_TESTDEV_FAULTS"}
    return subprocess.run(
        [sys.executable, script], env={**full, **env}, capture_output=True, text=True, timeout=300, cwd="/"
    )


def test_localize_names_silu_and_the_repro_reproduces(cli, tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    p = cli(*TD, "localize", "llama", "--json", "l.json", env=FAULT, timeout=900)
    assert p.returncode == 1, p.stderr[-3000:]
    case = load_json(tmp_path / "l.json")["cases"][0]
    assert case["status"] == "fail_numeric"
    assert case["first_module"] == "model.layers.0.mlp.act_fn", case
    assert case["first_op"] == "aten::silu", case
    # 1.01x: rel err 1e-2; the bound is 3x the module rule's fp32 size floor (1e-4, checks/module_rule.py)
    assert 5e-3 < case["op_rel_err"] < 2e-2 and case["op_bound"] <= 3.01e-4
    assert "first divergence: model.layers.0.mlp.act_fn -> aten::silu, rel err 0.01" in p.stdout
    script = case["repro"]
    assert Path(script).is_file() and (Path(script).parent / "inputs.safetensors").is_file()
    bad = _repro(script, FAULT)
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout, bad.stdout + bad.stderr[-2000:]
    good = _repro(script, {})
    assert good.returncode == 0 and "-> ok" in good.stdout, good.stdout + good.stderr[-2000:]


def test_localize_finds_a_backward_only_bend_in_bf16(cli, tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    """bf16, sigmoid taken at 1.02x: on testdev silu's backward decomposes through sigmoid, so only silu's
    gradient bends. The module check names the MLP activation (its input gradient), the op replay
    (forward and backward ops of that module's replay) names aten::sigmoid."""
    env = {"BRINGUP_TESTDEV_FAULTS": "arg:sigmoid=1.02"}
    p = cli(*TD, "localize", "llama", "--dtype", "bf16", "--json", "l.json", env=env, timeout=900)
    assert p.returncode == 1, p.stderr[-3000:]
    case = load_json(tmp_path / "l.json")["cases"][0]
    assert case["first_module"] == "model.layers.0.mlp.act_fn" and "grad.in" in case["module_why"], case
    assert case["first_op"] == "aten::sigmoid", case
    bad, good = _repro(case["repro"], env), _repro(case["repro"], {})  # the repro judges the bend too
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout, bad.stdout + bad.stderr[-2000:]
    assert good.returncode == 0 and "-> ok" in good.stdout, good.stdout + good.stderr[-2000:]


def test_localize_on_a_clean_device_finds_nothing(cli, tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    p = cli(*TD, "localize", "llama", "--json", "l.json", timeout=900)
    assert p.returncode == 0, p.stdout[-3000:]
    case = load_json(tmp_path / "l.json")["cases"][0]
    assert case["status"] == "pass" and case["first_module"] is None and case["modules_compared"] > 20


def test_localize_bad_input_is_one_line(cli) -> None:
    assert_one_line_error(cli("--device", "cpu", "localize", "x", "--source", "fn"), "module:function")


def test_localize_unknown_model_type_is_bad_input(bringup_inproc, tmp_path: Path) -> None:
    """Not a case whose reference failed: one line naming the close types, exit 2, nothing written."""
    p = bringup_inproc("--device", "cpu", "localize", "lama")
    assert_one_line_error(p, "did you mean llama")
    assert not (tmp_path / "bringup-results").exists()
