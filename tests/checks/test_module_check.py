"""The module check (bringup/checks/module_check.py) on tiny models, run the way the zoo runs it
(bringup.zoo.run: train_run with a ModuleCheck, judge_run, zoo_modules):

* a bend the whole-model rule lets through in bf16 and amp-bf16 (silu's gate 1% sharper: a torch-level
  rewrite, tests/zoo/bend_backend.py) is caught module by module, at the MLP's activation; and the
  same bend in a compiled run (each module compiled alone with the bending backend);
* aot_eager and inductor compiling each module alone are not flagged (the correct eager variants of
  perturb_backend.VARIANTS pass the module check in tests/checks/test_parity.py, in every precision).

This is the cheap "a bend is caught, a correct backend is not" of `make test`: it fails if the module
check is switched off or its bounds loosened (the bend then passes), or tightened past what correct
backends do. bench/verdict_power.py measures it over 30 models and many bends.
"""

from __future__ import annotations

import copy
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

import bringup.models  # noqa: F401  (torchvision shim first)
from bringup.checks.module_check import ModuleCheck
from bringup.checks.module_replay import ModuleRecorder, judged_modules

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "zoo"))
import bend_backend as bb

from bringup.zoo import judge as zj
from bringup.zoo import modules as zoo_modules
from bringup.zoo import run as sz
from bringup.zoo.args import NOISE_SEEDS
from bringup.zoo.spec import ZooSpec

# one xdist worker runs this file (make test: --dist loadgroup), so its cached set-ups (the float64
# reference, the trusted runs) are built once, not once per worker
pytestmark = pytest.mark.xdist_group("module_check")

STEPS = 2
CPU = torch.device("cpu")


@cache
def _setup(model: str, dtype: str) -> tuple:
    src = "fn" if ":" in model else "hf"
    prec = sz.as_precision(dtype)
    spec = ZooSpec(
        source=src,
        model=model,
        task="causal-lm",
        dtype=prec.name,
        steps=STEPS,
        seed=0,
        noise_seeds=NOISE_SEEDS,
        inputs="text",
    )
    prep = sz.prepare(spec)  # the zoo's own: batches fed like a job's, the float64 reference
    built, init, batches, ref = prep.built, prep.init, prep.batches, prep.ref
    base_mc = zoo_modules.new_check(built.model, prec, CPU)
    base = sz.train_run(built, init, batches, CPU, prec, sz.RunHow(module_check=base_mc))
    return built, init, batches, prec, ref, base, sz.trusted_noise(spec, prep), base_mc


@cache
def _honest(model: str, dtype: str) -> Any:
    """The base run's modules, each compiled alone by aot_eager and judged: one report read by the tests of an
    honest compiled run (test_compiled_regions_bend_caught_aot_eager_not, test_amp_modules_computed_in_fp32_...),
    compiled once for the file."""
    return _setup(model, dtype)[7].judge_compiled("aot_eager")


def _eager(model: str, dtype: str, ctx: Any) -> tuple[bool, Any, Any]:
    """(whole-model verdict flagged, module report, the run) of one eager run under `ctx`."""
    built, init, batches, prec, ref, base, noise, _ = _setup(model, dtype)
    mc = zoo_modules.new_check(built.model, prec, CPU)
    got = sz.train_run(built, init, batches, CPU, prec, sz.RunHow(step_context=ctx, module_check=mc))
    rep, curve = zj.judge_run(got, ref, base, prec, noise)
    return not (rep.ok and curve.ok), mc.judge_eager(), got


@pytest.mark.parametrize("dtype", ["bf16", "amp-bf16"])
def test_a_bend_the_whole_model_rule_misses_is_caught_module_by_module(dtype: str) -> None:
    before = bb.BEND_CALLS["gate"]
    whole, mods, _ = _eager("llama", dtype, lambda: bb.BendMode("gate", 0.01))
    assert bb.BEND_CALLS["gate"] > before, "the bend touched nothing"
    assert not whole, "the whole-model rule caught it: this test no longer shows the gap it is about"
    assert not mods.ok, mods.summary()
    assert mods.first_failed.name == "model.layers.0.mlp.act_fn", mods.summary()
    assert len(mods.judged) >= 25  # every branch: projections, norms, attention, MLP, activation, blocks


@pytest.mark.parametrize("dtype", ["bf16", "amp-bf16"])
def test_compiled_regions_bend_caught_aot_eager_not(dtype: str) -> None:
    """Each module compiled alone with the run's backend, replayed on the eager run's recorded inputs."""
    base_mc = _setup("llama", dtype)[7]
    honest = _honest("llama", dtype)
    assert honest.ok and len(honest.judged) >= 25, honest.summary()
    before = bb.BEND_CALLS["gate"]
    bent = base_mc.judge_compiled(bb.bend_backend("gate", 0.01), label="compiled (bend)")
    assert bb.BEND_CALLS["gate"] > before
    assert not bent.ok and bent.first_failed.name == "model.layers.0.mlp.act_fn", bent.summary()


@pytest.mark.parametrize(
    "dtype", ["bf16", pytest.param("fp32", marks=pytest.mark.slow), pytest.param("amp-bf16", marks=pytest.mark.slow)]
)
def test_inductor_regions_are_not_flagged_cheap(dtype: str) -> None:
    """Inductor (fused kernels, fp32 intermediates) compiling each module of a small user model alone
    (~40 s of cold compiles a precision here: bf16 in the default run)."""
    rep = _setup("zoo_models:clean_mlp", dtype)[7].judge_compiled("inductor")
    assert rep.ok and len(rep.judged) >= 4, rep.summary()


def test_judged_modules_are_branches_not_trunks() -> None:
    built = _setup("llama", "bf16")[0]
    names = set(judged_modules(built.model))
    assert "" not in names and "model" not in names and "model.layers" not in names  # root, trunk, container
    assert {"model.layers.0", "model.layers.0.self_attn", "model.layers.0.mlp.act_fn", "lm_head"} <= names
    first = set(judged_modules(built.model, blocks=1))
    assert "model.layers.0.mlp" in first and not any(n.startswith("model.layers.1") for n in first)


def test_replays_leave_the_step_alone() -> None:
    """Recording and replaying (autograd.grad, buffers put back) change neither the grads nor the
    BatchNorm statistics of the step they watch."""

    def step(record: bool) -> tuple[list[torch.Tensor], list[torch.Tensor], int]:
        torch.manual_seed(0)
        nn = torch.nn
        m = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.GELU(), nn.Linear(16, 2))
        x = torch.randn(32, 8)
        mc = zoo_modules.new_check(m, sz.as_precision("fp32"), CPU)
        with mc.recording() if record else ModuleRecorder(torch.nn.Identity()):
            m(x).pow(2).mean().backward()
        return [p.grad.clone() for p in m.parameters()], [b.clone() for b in m.buffers()], len(mc.calls)

    g0, b0, _ = step(False)
    g1, b1, n = step(True)
    assert n == 4 and all(torch.equal(a, b) for a, b in zip(g0 + b0, g1 + b1, strict=True))


def test_amp_modules_computed_in_fp32_are_judged_at_fp32() -> None:
    """Under amp-bf16 llama's norms (on the fp32 residual stream), its embedding and its rotary angles
    are computed in fp32 throughout: judged at fp32. A norm's gradient bent by 2% along the direction
    the norm removes (bwd_norm: ~0.3% relative RMS, orthogonal to the gradient, under the bf16 floor
    of 0.7%) is caught there; the honest aot_eager of test_compiled_regions_bend_caught_aot_eager_not
    passes the same modules at fp32."""
    base_mc = _setup("llama", "amp-bf16")[7]
    honest = _honest("llama", "amp-bf16")
    at_fp32 = {m.name for m in honest.modules if m.fp32}
    assert {"model.embed_tokens", "model.rotary_emb", "model.layers.0.input_layernorm", "model.norm"} <= at_fp32
    assert not any(".mlp." in n or "_proj" in n for n in at_fp32), at_fp32  # matmuls round to bf16
    assert honest.ok, honest.summary()
    before = bb.BEND_CALLS["bwd_norm"]
    bent = base_mc.judge_compiled(bb.bend_backend("bwd_norm", 0.02), label="compiled (bend)")
    assert bb.BEND_CALLS["bwd_norm"] > before
    assert not bent.ok and bent.first_failed.fp32 and "norm" in bent.first_failed.name, bent.summary()
    assert "judged at fp32" in bent.summary()


def test_a_norms_backward_bent_in_bf16_is_caught_along_its_input() -> None:
    """In bf16 llama's norms are bf16 at their edges and judged at bf16. Their gradient bent by 4% along
    the direction the norm removes is, in every row, a multiple of the input with a sign that changes
    from row to row: orthogonal to the gradient, without a mean, its size under 3x one rounding (checks
    1-5 pass it). Check 6, the error along the input row by row, catches it; the honest aot_eager of
    test_compiled_regions_bend_caught_aot_eager_not passes the same norms."""
    base_mc = _setup("llama", "bf16")[7]
    before = bb.BEND_CALLS["bwd_norm"]
    bent = base_mc.judge_compiled(bb.bend_backend("bwd_norm", 0.04), label="compiled (bend)")
    assert bb.BEND_CALLS["bwd_norm"] > before
    assert not bent.ok, bent.summary()
    first = bent.first_failed
    assert "layernorm" in first.name and not first.fp32, bent.summary()
    failed = [t for t in first.tensors if not t.ok]
    assert failed and all(t.check == "along" and t.rel_rmse < t.bound for t in failed), bent.summary()


def test_a_device_that_returns_bf16_is_judged_at_the_runs_precision() -> None:
    """The fp32 judgement needs both sides: the trusted run computed the module in fp32 and the device
    gave back fp32. A device whose own autocast list runs the module in bf16 (its tensors come back
    bf16) is judged at the run's bf16 tolerance, where its rounding is allowed."""
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(64)
    x = torch.randn(32, 64, requires_grad=True)
    mc = ModuleCheck(norm, sz.as_precision("amp-bf16"), CPU, modules={"norm": norm})
    with mc.recording():
        with torch.autocast("cpu", torch.bfloat16):
            norm(x).pow(2).sum().backward()
    assert mc.judge_eager().modules[0].fp32
    rounded = {n: copy.copy(r) for n, r in mc.eager.items()}
    for r in rounded.values():
        r.tensors = {k: t.to(torch.bfloat16) for k, t in r.tensors.items()}
    rep = mc.judge("bf16 device", rounded)
    assert not rep.modules[0].fp32 and rep.ok, rep.summary()
    mc._fp32_throughout = lambda *a: True  # without the device's side of the rule: its rounding flagged
    assert not mc.judge("bf16 device at fp32", rounded).ok
