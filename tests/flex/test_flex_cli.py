"""`bringup flex` end to end on cpu, through the real CLI, runner and worker processes."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tests.conftest import load_json

USER_MODS = '''
from bringup.flex.mods import FlexMod


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def wrong_reference(shape, device):
    """Causal on the device; its dense reference claims a 4-token window: they disagree."""
    window = lambda s, b, h, q, kv: s.masked_fill(~((kv <= q) & (kv >= q - 4)), float("-inf"))
    return FlexMod("wrong_reference", mask_mod=causal_mask, mask_broadcast=True, dense=window)


def own_functions(shape, device):
    """No dense reference: judged against its own functions evaluated densely in float64."""
    return FlexMod("own_functions", mask_mod=causal_mask)


def broken_reference(shape, device):
    """The reference itself raises: ref_fail, left out of the pass rate."""
    def dense(s, b, h, q, kv):
        raise ArithmeticError("reference exploded")
    return FlexMod("broken_reference", mask_mod=causal_mask, mask_broadcast=True, dense=dense)
'''


def _by_name(data: dict) -> dict[str, dict]:
    return {c["name"]: c for c in data["cases"]}


def test_quick_matrix_on_cpu(cli, tmp_path: Path) -> None:
    """Forwards pass numerically; the backward probe is `unsupported` (cpu has no flex backward)."""
    p = cli("--device", "cpu", "flex", "--matrix", "quick", "--json", "out.json", timeout=900)
    assert p.returncode == 1, p.stderr[-3000:]  # unsupported counts as a failure by default
    data = load_json(tmp_path / "out.json")
    cases = data["cases"]
    fwd = [c for c in cases if not c["backward"]]
    probe = [c for c in cases if c["backward"]]
    assert len(fwd) == 9 and len(probe) == 1 and probe[0]["probe"] is True
    assert [c["status"] for c in fwd] == ["pass"] * 9, [(c["name"], c["status"], c["reason"]) for c in fwd]
    assert probe[0]["status"] == "unsupported" and "backward on CPU" in probe[0]["reason"]
    for c in fwd:
        for k in ("compile_s", "fwd_ms", "tflops", "sparsity", "max_abs_err", "rel_rmse"):
            assert isinstance(c[k], float), (c["name"], k)
        assert c["compiled_calls"] == c["calls"] > 1 and c["compiled_graphs"] >= 1
        assert c["max_abs_err"] < 1e-4 and c["reference"] == "dense"
        density = 1 - c["sparsity"] / 100
        flops = 4 * c["batch"] * c["q_heads"] * c["seq"] ** 2 * c["head_dim"] * density
        assert math.isclose(c["tflops"], flops / (c["fwd_ms"] / 1e3) / 1e12, rel_tol=1e-6)
    causal512 = next(c for c in fwd if c["mod"] == "causal" and c["seq"] == 512)
    assert causal512["sparsity"] == 37.5  # 4x4 blocks of 128, 6 above the diagonal
    assert data["sentence"].startswith("9/10 passed; 1 unsupported (")
    assert "backward on" in data["sentence"]
    hm = data["heatmap"]
    assert len(hm["mods"]) == 8 and len(hm["status"]) == 8
    assert sum(s == "pass" for row in hm["status"] for s in row) == 9
    assert "flex: 9/10 passed; 1 unsupported" in p.stdout


# slow (a second CLI run and compile); the cheap form in `make test`: --allow-unsupported turns an unsupported
# case's exit 1 into 0 in bringup/flow.py's exit_code, which every suite's run goes through:
# tests/spine/test_plugin_post_run.py::test_the_step_writes_its_summary_after_the_run (a selftest plan with an
# unsupported case, rc 1 then 0 with the flag) and tests/spine/test_cli_contract.py's unsupported policy.
@pytest.mark.slow
def test_quick_matrix_allow_unsupported_exits_0(cli, tmp_path: Path) -> None:
    ok = cli("--device", "cpu", "flex", "--matrix", "quick", "--allow-unsupported", "--mods", "causal", timeout=600)
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_budget_one_second_is_budget(cli, tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text("mods: causal\nbatch: 1\nseq: 128\nheads: 2\nhead_dim: 16\nbackward: off\n")
    cold = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cold")}  # a cold compile takes seconds
    p = cli(
        "--device",
        "cpu",
        "flex",
        "--matrix",
        "one.yaml",
        "--compile-budget",
        "1",
        "--json",
        "out.json",
        env=cold,
        timeout=600,
    )
    assert p.returncode == 1, p.stderr[-2000:]
    (case,) = load_json(tmp_path / "out.json")["cases"]
    assert case["status"] == "budget", case
    assert case["budget_phase"] == "compile" and "compile exceeded its budget" in case["reason"]
    assert load_json(tmp_path / "out.json")["sentence"] == "0/1 passed; 1 budget"


def test_user_mod_whose_reference_disagrees_is_fail_numeric(cli, tmp_path: Path) -> None:
    (tmp_path / "usermods.py").write_text(USER_MODS)
    (tmp_path / "m.yaml").write_text(
        "mods: [usermods.py:wrong_reference, usermods.py:own_functions, usermods.py:broken_reference]\n"
        "batch: 1\nseq: 128\nheads: 2\nhead_dim: 16\nbackward: off\n"
    )
    p = cli("--device", "cpu", "flex", "--matrix", "m.yaml", "--json", "out.json", timeout=600)
    assert p.returncode == 1, p.stderr[-2000:]
    data = load_json(tmp_path / "out.json")
    by = {c["mod"].rsplit(":", 1)[1]: c for c in data["cases"]}
    assert by["wrong_reference"]["status"] == "fail_numeric", by["wrong_reference"]
    assert re.match(r"out\[\d+\] off: rel_rmse", by["wrong_reference"]["reason"]), by["wrong_reference"]["reason"]
    assert by["wrong_reference"]["max_abs_err"] > 0.1
    assert by["own_functions"]["status"] == "pass" and by["own_functions"]["reference"] == "derived"
    assert by["broken_reference"]["status"] == "ref_fail"
    assert "reference exploded" in by["broken_reference"]["reason"]
    assert data["sentence"] == (
        "1/2 passed; 1 fail_numeric (mod usermods.py:wrong_reference); 1 ref_fail (excluded: the cpu reference failed)"
    )


def test_recompile_limit_sweep_is_silent_eager_and_the_reset_prevents_it(cli, tmp_path: Path) -> None:
    """One pooled worker, dynamo never reset and its recompile limit at 1: after the first case every
    compiled call runs eager, and the tool says so. With the default per-case reset: all pass."""
    (tmp_path / "sweep.yaml").write_text(
        "mods: causal\nbatch: 1\nseq: [64, 128, 192]\nheads: 2\nhead_dim: 16\nbackward: off\n"
    )
    p = cli(
        "--device",
        "cpu",
        "flex",
        "--matrix",
        "sweep.yaml",
        "--workers",
        "1",
        "--recompile-limit",
        "1",
        "--no-dynamo-reset",
        "--json",
        "bad.json",
        timeout=600,
    )
    assert p.returncode == 1, p.stderr[-2000:]
    cases = load_json(tmp_path / "bad.json")["cases"]
    assert [c["status"] for c in cases] == ["pass", "silent_eager", "silent_eager"], cases
    for c in cases[1:]:
        assert "recompile limit (1)" in c["reason"], c["reason"]
        assert c["compiled_calls"] == 0 and c["calls"] > 0
    assert load_json(tmp_path / "bad.json")["sentence"].startswith("1/3 passed; 2 silent_eager")
    good = cli(
        "--device", "cpu", "flex", "--matrix", "sweep.yaml", "--workers", "1", "--json", "good.json", timeout=600
    )
    assert good.returncode == 0, good.stderr[-2000:]
    assert [c["status"] for c in load_json(tmp_path / "good.json")["cases"]] == ["pass"] * 3


def test_privateuse1_device_is_unsupported_not_a_crash(cli, tmp_path: Path) -> None:
    """FlexAttention refuses device types it doesn't know (ValueError in _validate_device): that is the
    backend's gap, reported `unsupported`, not `crash` or `error`."""
    (tmp_path / "one.yaml").write_text("mods: [causal, softcap]\nbatch: 1\nseq: 64\nheads: 2\nhead_dim: 16\n")
    p = cli(
        "--import",
        "bringup.testdev",
        "--device",
        "testdev",
        "flex",
        "--matrix",
        "one.yaml",
        "--json",
        "out.json",
        timeout=600,
    )
    assert p.returncode == 1, p.stderr[-2000:]
    cases = load_json(tmp_path / "out.json")["cases"]
    assert len(cases) == 2 and all(c["backward"] for c in cases)  # auto: on, the device type isn't cpu/mps
    assert [c["status"] for c in cases] == ["unsupported"] * 2, cases
    assert "only supported on" in cases[0]["reason"]


# ---- bf16: the module rule, end to end ------------------------------------------------------------------
# the quick matrix's causal b1 s512 h4/4 case, the one where the old bf16 rule (a 2-eps size floor and a
# bias envelope) passed a softmax scale 1% off
SCALE_CASE = "head_dim: 64\nbackward: off\ncases:\n  - {mod: causal, batch: 1, seq: 512, heads: [4, 4]}\n"
BEND = {"PYTHONPATH": str(Path(__file__).parent)}  # tests/flex/flex_bend.py: perturbing flex backends
CHECKS = ("size", "bias", "value", "input", "position", "lanes", "along", "reweight")  # RuleTensor.check


def _one_case(cli, tmp_path: Path, backend: str) -> dict:
    (tmp_path / "one.yaml").write_text(SCALE_CASE)
    args = "--import flex_bend --device cpu flex --matrix one.yaml --dtype bf16 --json out.json".split()
    args.append("--compile-backend")
    p = cli(*args, backend, env=BEND, timeout=600)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    (case,) = load_json(tmp_path / "out.json")["cases"]
    return case


def test_bf16_softmax_scale_1pct_off_is_fail_numeric_by_the_module_rule(cli, tmp_path: Path) -> None:
    """flex_bend_scale (FlexAttention's scale x 1.01 inside an aot_eager graph): the case the old rule
    passed fails, the reason and the recorded fields naming the check that saw it."""
    case = _one_case(cli, tmp_path, "flex_bend_scale")
    assert case["status"] == "fail_numeric", (case["status"], case["reason"])
    assert case["rule"] == "module" and case["dithered_slices"] == "4/4"
    bad = case["failed_checks"]
    assert bad and all(b["check"] in CHECKS for b in bad), bad
    assert re.match(rf"out\[\d\](\.h\d)? off \(({'|'.join(CHECKS)})\): ", case["reason"]), case["reason"]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_bf16_correct_backends_pass_the_same_case(cli, tmp_path: Path, backend: str) -> None:
    """The cheap form of "a correct backend is never flagged" (bench/flex_power.py measures it over the quick
    and the default matrix, and correct variants that round elsewhere)."""
    case = _one_case(cli, tmp_path, backend)
    assert case["status"] == "pass", (case["status"], case["reason"])
    assert case["rule"] == "module" and case["failed_checks"] == [] and case["closest"].startswith("ok; closest out[")
