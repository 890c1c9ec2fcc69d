"""`--localize` on a zoo run: which fail_numeric cases get a localize case, and (slow) the whole path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.case import CaseResult, Status
from bringup.localize.post_run import cases_for
from tests.conftest import REPO, load_json


def _zoo(name: str, status: str, reason: str, **params: object) -> CaseResult:
    p = {"source": "hf", "model": name, "task": "causal-lm", "dtype": "fp32", "backend": "inductor", **params}
    return CaseResult(f"id-{name}", "zoo", name, Status(status), reason, params=p)


def test_cases_for_picks_eager_or_regional_and_skips_the_rest() -> None:
    rs = [
        _zoo("llama", "fail_numeric", "eager: 3/23 tensors off"),
        _zoo("gpt2", "fail_numeric", "compiled: 23/23 tensors off"),
        _zoo("qwen3", "pass", ""),
        _zoo("opt", "fail_numeric", "eager: off", dtype="amp-bf16"),
        _zoo("bert", "fail_compile", "compiled: boom"),
    ]
    cases, notes = cases_for(rs)
    by = {c.params["model"]: c.params for c in cases}
    assert set(by) == {"llama", "gpt2"}
    assert by["llama"]["backend"] == "" and by["llama"]["dtype"] == "float32"  # eager failed: eager localization
    assert by["gpt2"]["backend"] == "inductor"  # eager matched, compiled did not: regional bisection
    assert notes == ["zoo/opt: not localized (hf, amp-bf16)"]


@pytest.mark.slow
def test_zoo_localize_flag_localizes_the_perturbed_compiler(cli, tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "zoo"), str(REPO), os.environ.get("PYTHONPATH", "")])}
    p = cli(
        "--device",
        "cpu",
        "--import",
        "perturb_backend",
        "zoo",
        "--filter",
        "^llama$",
        "--steps",
        "2",
        "--compile-backend",
        "perturb_act_aot_eager",
        "--localize",
        "--json",
        "z.json",
        env=env,
    )
    assert p.returncode == 1, p.stderr[-3000:]
    data = load_json(tmp_path / "z.json")
    loc = [c for c in data["cases"] if c["suite"] == "localize"]
    assert len(loc) == 1 and loc[0]["compiled_region"] == "model.layers.0.mlp.act_fn"
    assert data["localize"][0]["compiled_region"] == "model.layers.0.mlp.act_fn"
