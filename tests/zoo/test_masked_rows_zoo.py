"""What the job leaves to the kernel never decides a verdict (design.md, "Inputs"; checks/masked_rows.py).

A query row whose every key is masked (a left-padded row's pad queries) is 0 on PyTorch's SDPA, uniform on a kernel
that adds a finite minimum to masked scores, NaN on one that computes 0 / 0. No loss reads it: the zoo compares the
logits at the real tokens only (pads: finite, or the case fails), labels a left-padded row's first real token -100
(the last pad would predict it), and its module check leaves such rows out of each module's outputs. So a correct
backend with uniform rows passes, and is named; one whose NaN rows leak into the next layer fails.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convention_backend as cb

import bringup.models  # noqa: F401  (torchvision shim before transformers)
from bringup.case import CaseResult, Status
from bringup.checks import masked_rows as mr
from bringup.zoo import judge as zj
from bringup.zoo import modules as zoo_modules
from bringup.zoo import run as sz
from bringup.zoo.spec import ZooSpec
from tests.conftest import REPO, load_json, run_cli

# one xdist worker runs this file (make test: --dist loadgroup), so its cached set-ups (the float64
# reference, the trusted runs) are built once, not once per worker
pytestmark = pytest.mark.xdist_group("masked_rows")

HERE = Path(__file__).resolve().parent


@cache
def _setup(model: str) -> tuple[Any, ...]:
    spec = ZooSpec(source="hf", model=model, task="causal-lm", dtype="fp32", steps=2, noise_seeds=1, inputs="text")
    prep = sz.prepare(spec)
    base = sz.train_run(prep.built, prep.init, prep.batches, torch.device("cpu"), spec.prec)
    return spec, prep, base, sz.trusted_noise(spec, prep)


def _device_run(model: str, convention: str) -> tuple[CaseResult, Any, Any]:
    """The "device": cpu eager with every SDPA's fully masked rows given `convention`, judged as the zoo judges a
    run (whole-model rule, the pads, the module check recorded and replayed under the same convention)."""
    spec, prep, base, noise = _setup(model)
    mode = cb.MaskedRowsMode(convention)
    mc = zoo_modules.new_check(prep.built.model, spec.prec, torch.device("cpu"))
    got = sz.train_run(
        prep.built,
        prep.init,
        prep.batches,
        torch.device("cpu"),
        spec.prec,
        sz.RunHow(step_context=lambda: mode, module_check=mc),
    )
    assert mode.calls > 0
    r = CaseResult(case_id="t", suite="zoo", name=model, status=Status.PASS)
    zj.judge(r, "eager", got, prep.ref, base, spec.prec, noise)
    zj.judge_pads(r, "eager", got, prep.ref, prep.uniform)
    return r, got, mc.judge_eager()


# qwen3 (rotary, GQA) in the default run; gpt2 (learned positions, MHA, ~100 s more) in the slow run
@pytest.mark.parametrize("model", ["qwen3", pytest.param("gpt2", marks=pytest.mark.slow)])
def test_a_kernel_whose_fully_masked_rows_are_uniform_passes_and_is_named(model: str) -> None:
    r, got, mods = _device_run(model, "uniform")
    assert r.status is Status.PASS, r.reason
    assert mods.ok and len(mods.judged) >= 10, mods.summary()
    assert r.fields["fully_masked_rows"] == {"eager": mr.UNIFORM}
    assert "torch SDPA gives 0" in r.fields["fully_masked_note"]
    _, prep, base, _ = _setup(model)
    assert not torch.allclose(got.pads.double(), prep.ref.pads, rtol=1e-2)  # the pads really differ (~35%)
    zero, _, _ = _device_run(model, "zero")
    assert zero.fields["fully_masked_rows"] == {"eager": mr.ZERO}


def test_a_kernel_whose_nan_rows_leak_fails() -> None:
    r, _, mods = _device_run("qwen3", "nan")
    assert r.status is Status.FAIL_NUMERIC and "NaN" in r.reason, r.reason
    assert r.fields["fully_masked_rows"] == {"eager": mr.NON_FINITE}
    assert not mods.ok


def test_the_convention_is_judged_nowhere_a_loss_reads_and_a_compiled_run_says_which(tmp_path: Path) -> None:
    """The real path: a compile backend (tests/zoo/convention_backend.py) whose SDPA fills fully masked rows
    uniformly, through `bringup zoo`: pass, the compiled module check included, and the case names both arms'
    conventions."""
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "z.json"
    args = ["--device", "cpu", "--import", "convention_backend", "zoo", "--filter", "^qwen3$", "--steps", "2"]
    args += ["--noise-seeds", "1", "--compile-backend", "masked_uniform_aot_eager", "--json", str(out)]
    run_cli(args, cwd=tmp_path, env=env, timeout=900, check_rc=0)
    (c,) = load_json(out)["cases"]
    assert c["status"] == "pass", c["reason"]
    assert c["fully_masked_rows"] == {"eager": "0", "compiled": "uniform"}, c.get("fully_masked_rows")
    assert c["compiled_modules"]["ok"] and c["compiled_modules"]["judged"] >= 10
