"""The parity rule (bringup/checks/parity.py): a 1% error in ONE aten op kind is flagged, correct
backends are not, in fp32, amp-bf16 and bf16, on tiny random-init models.

The proof runs the zoo's own set-up and judgement (bringup.zoo.run: train_run, measure_noise,
judge_run) through test-only dynamo backends that scale one op kind's output by 1.01 or accumulate
matmuls in bf16 (tests/zoo/perturb_backend.py) and through the real ones. The default run covers
llama in fp32 and bf16 with aot_eager-based perturbations, llama in amp-bf16 and bf16 with the
activation and low-precision-accumulation families, and inductor on a small user model in all three
precisions (the cheap "inductor is not falsely flagged"); the full matrix (5 models, inductor, three
precisions) is marked slow; bench/verdict_power.py measures power over 30 models.
"""

from __future__ import annotations

import math
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

import bringup.models  # noqa: F401  (torchvision shim first)
from bringup.checks.losscurve import compare_curves
from bringup.checks.parity import AGG_FUDGE, TOLERANCES, Noise, bias, parity, rel_rmse, tolerance_for, trusted_noise

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "zoo"))
import perturb_backend as pb

from bringup.zoo import judge as zj
from bringup.zoo import modules as zoo_modules
from bringup.zoo import run as sz
from bringup.zoo.args import NOISE_SEEDS
from bringup.zoo.spec import ZooSpec

# one xdist worker runs this file (make test: --dist loadgroup), so its cached set-ups (the float64
# reference, the trusted runs) are built once, not once per worker
pytestmark = pytest.mark.xdist_group("parity")

DTYPES = {"fp32": "fp32", "bf16": "bf16", "amp-bf16": "amp-bf16"}
KINDS = ("mm", "softmax", "norm", "act", "add", "sdpa")


# ---- the rule on synthetic tensors --------------------------------------------------------------
def _noise(ref: torch.Tensor, rel: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return ref + rel * ref.std() * torch.randn(ref.shape, generator=g, dtype=torch.float64)


def test_basics() -> None:
    ref = torch.randn(64, 64, dtype=torch.float64)
    assert parity({"w": ref.float()}, {"w": ref}, torch.float32).ok
    assert not parity({"w": ref.float().t()}, {"w": ref.reshape(32, 128)}, torch.float32).ok
    nan = ref.clone()
    nan[0, 0] = math.nan
    assert not parity({"w": nan}, {"w": ref}, torch.float32).ok
    assert not parity({}, {"w": ref}, torch.float32).ok
    assert not parity({"w": ref, "x": ref}, {"w": ref}, torch.float32).ok
    assert abs(bias(ref * 1.01, ref) - 0.01) < 1e-12 and rel_rmse(ref, ref) == 0.0
    assert set(TOLERANCES) >= {torch.float32, torch.bfloat16, torch.float16} and all(
        t.reason for t in TOLERANCES.values()
    )


def test_scale_error_hidden_in_bf16_noise_is_caught_by_its_direction() -> None:
    """1% of scale inside ~1% of noise: by size within 3x the baseline's (dynamo's rule passes it),
    by direction 30+ standard errors off."""
    ref = torch.randn(64, 128, dtype=torch.float64)
    base = _noise(ref, 0.01, 1)
    good = _noise(ref, 0.01, 2)
    scaled = _noise(ref, 0.01, 3) * 1.01
    assert rel_rmse(scaled, ref) < 3 * rel_rmse(base, ref)  # invisible to a size rule
    assert parity({"w": good}, {"w": ref}, torch.bfloat16, baseline={"w": base}).ok
    rep = parity({"w": scaled}, {"w": ref}, torch.bfloat16, baseline={"w": base})
    assert not rep.ok and "bias" in rep.summary(), rep.summary()


def test_more_accurate_than_the_baseline_is_not_flagged() -> None:
    """A backend that beats the trusted run (fp32 intermediates) differs from its bias: not a failure."""
    ref = torch.randn(64, dtype=torch.float64)
    biased_base = _noise(ref, 0.05, 1) * 0.97  # the trusted bf16 run: 3% low on this tensor
    accurate = _noise(ref, 0.005, 2)
    assert parity({"b": accurate}, {"b": ref}, torch.bfloat16, baseline={"b": biased_base}).ok


def test_noise_from_more_seeds_sets_the_bias_margin() -> None:
    """The bias margin is the measured spread of the trusted runs' bias over seeds: a tensor whose
    correct runs' bias wanders by 1% (few elements, ill-conditioned) lets a 1% scale through; one whose
    trusted runs agree to 1e-4 catches it."""
    ref = torch.randn(64, 128, dtype=torch.float64)
    base = _noise(ref, 0.01, 1)
    scaled = _noise(ref, 0.01, 3) * 1.01
    quiet = {"w": Noise((0.01, 0.01), (1e-4, -1e-4))}
    wild = {"w": Noise((0.01, 0.01), (2e-2, -2e-2))}
    assert not parity({"w": scaled}, {"w": ref}, "bf16", baseline={"w": base}, noise=quiet).ok
    assert parity({"w": scaled}, {"w": ref}, "bf16", baseline={"w": base}, noise=wild).ok
    # trusted_noise measures exactly that from (trusted, float64) pairs
    pairs = [({"w": _noise(ref, 0.01, s)}, {"w": ref}) for s in (5, 6)]
    nz = trusted_noise(pairs, "bf16")["w"]
    assert len(nz.rel_rmse) == 2 and all(0.005 < e < 0.02 for e in nz.rel_rmse) and all(abs(b) < 1e-3 for b in nz.bias)


def test_fp32_reduction_order_bias_is_not_flagged_but_a_small_scale_error_is() -> None:
    """In fp32 the trusted seeds share cpu eager's reduction order, so their bias spread (~1e-8) says
    nothing about a backend that reorders (inductor: ~2e-7 off, seen on T5 / ViT / ConvNeXt grads). The
    fp32 bias floor (1e-5) lets that through; a 0.1% scale of the tensor is still caught."""
    ref = torch.randn(64, 128, dtype=torch.float64)
    base = _noise(ref, 1e-7, 1)
    seeds = {"w": Noise((1e-7, 1e-7), (1e-8, -1e-8))}
    reordered = _noise(ref, 1e-7, 2) * (1 + 3e-7)
    assert parity({"w": reordered}, {"w": ref}, "fp32", baseline={"w": base}, noise=seeds).ok
    assert not parity({"w": _noise(ref, 1e-7, 2) * 1.001}, {"w": ref}, "fp32", baseline={"w": base}, noise=seeds).ok


def test_size_bound_is_the_largest_trusted_error() -> None:
    """3x the largest trusted error (seed 0 or the others): a tensor 4x noisier than every trusted run fails."""
    ref = torch.randn(4096, dtype=torch.float64)
    base = _noise(ref, 0.01, 1)
    noise = {"w": Noise((0.01, 0.012), (0.0, 0.0))}
    assert parity({"w": _noise(ref, 0.03, 2)}, {"w": ref}, "bf16", baseline={"w": base}, noise=noise).ok
    assert not parity({"w": _noise(ref, 0.045, 2)}, {"w": ref}, "bf16", baseline={"w": base}, noise=noise).ok


def test_whole_run_twice_as_noisy_is_flagged() -> None:
    """Every tensor 2x further from float64 than the trusted runs (a matmul accumulating in bf16): each
    within its own 3x bound, but the geometric mean over tensors passes AGG_FUDGE."""
    refs = {
        f"t{i}": torch.randn(512, dtype=torch.float64, generator=torch.Generator().manual_seed(i)) for i in range(12)
    }
    base = {k: _noise(r, 0.01, 100 + i) for i, (k, r) in enumerate(refs.items())}
    noise = trusted_noise([({k: _noise(r, 0.01, 200 + i) for i, (k, r) in enumerate(refs.items())}, refs)], "bf16")
    same = {k: _noise(r, 0.01, 300 + i) for i, (k, r) in enumerate(refs.items())}
    twice = {k: _noise(r, 0.02, 300 + i) for i, (k, r) in enumerate(refs.items())}
    ok = parity(same, refs, "bf16", baseline=base, noise=noise)
    bad = parity(twice, refs, "bf16", baseline=base, noise=noise)
    assert ok.ok and ok.agg is not None and ok.agg < 1.2, ok.summary()
    assert all(t.ok for t in bad.tensors) and not bad.ok and bad.agg > AGG_FUDGE, bad.summary()
    assert "further from float64" in bad.summary()


def test_trusted_run_is_judged_for_gross_errors_only() -> None:
    ref = torch.randn(256, dtype=torch.float64)
    assert parity({"g": _noise(ref, 0.3, 1)}, {"g": ref}, torch.bfloat16, trusted=True).ok
    assert not parity({"g": _noise(ref, 0.3, 1)}, {"g": ref}, torch.bfloat16).ok
    assert not parity({"g": -ref}, {"g": ref}, torch.bfloat16, trusted=True).ok


def test_loss_curves() -> None:
    ref = [5.0, 4.9, 4.8, 4.7]
    assert compare_curves([5.0, 4.9, 4.8, 4.7000001], ref, torch.float32).ok
    rep = compare_curves([5.0, 4.9, 4.85, 4.7], ref, torch.float32)
    assert not rep.ok and rep.first_diverging_step == 2 and rep.max_rel_dev > 1e-2
    assert not compare_curves([5.0, math.nan, 4.8, 4.7], ref, torch.float32).ok
    base = [5.0, 4.91, 4.81, 4.71]  # a noisy trusted run loosens the bound to 3x its deviation
    assert compare_curves([5.0, 4.92, 4.82, 4.72], ref, torch.bfloat16, baseline=base).ok
    assert not compare_curves([5.0, 4.9, 4.8], ref, torch.float32).ok  # a step missing
    # chaotic training: the trusted fp32 run itself drifts 1e-7 -> 1e-3; the curve is reported, not judged
    chaos_base = [5.0 * (1 + 1e-7), 4.9 * (1 + 1e-5), 4.8 * (1 + 1e-4), 4.7 * (1 + 1e-3)]
    rep = compare_curves([5.0, 4.9, 4.8, 4.75], ref, torch.float32, baseline=chaos_base)
    assert rep.ok and rep.chaotic and "chaotic" in rep.summary()
    assert tolerance_for(torch.bfloat16).loss_rel > tolerance_for(torch.float32).loss_rel


# ---- the proof on tiny models --------------------------------------------------------------------
STEPS = 2


def _src(model: str) -> str:
    return "timm" if model.startswith("test_") else "fn" if ":" in model else "hf"


@cache
def _setup(model: str, dtype: str) -> tuple:
    """Exactly the zoo's set-up: text-like batches, float64 reference, trusted cpu eager run at the precision, the
    trusted run under NOISE_SEEDS more seeds and the float64 step rounded elsewhere."""
    prec = sz.as_precision(DTYPES[dtype])
    spec = ZooSpec(
        source=_src(model),
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
    base = sz.train_run(built, init, batches, torch.device("cpu"), prec)
    return built, init, batches, ref, base, sz.trusted_noise(spec, prep)


@cache
def _trusted_modules(model: str, dtype: str) -> Any:
    """The module check recorded on the trusted run (its inputs feed each module compiled alone)."""
    built, init, batches, _, _, _ = _setup(model, dtype)
    prec = sz.as_precision(DTYPES[dtype])
    mc = zoo_modules.new_check(built.model, prec, torch.device("cpu"))
    sz.train_run(built, init, batches, torch.device("cpu"), prec, sz.RunHow(module_check=mc))
    return mc


def _judge(model: str, dtype: str, backend: Any, modules: bool = False) -> tuple[bool, int, str]:
    """(flagged, perturbed nodes, summary) for one compiled run, judged like the zoo judges it: the
    whole-model rule, and with `modules` where that passes, the module check (each module compiled alone
    with the backend)."""
    built, init, batches, ref, base, noise = _setup(model, dtype)
    torch._dynamo.reset()
    key = backend if isinstance(backend, str) else None
    before = pb.PERTURBED[key] if key else sum(pb.FAMILY_NODES.values())
    got = sz.train_run(built, init, batches, torch.device("cpu"), DTYPES[dtype], sz.RunHow(backend=backend))
    rep, curve = zj.judge_run(got, ref, base, sz.as_precision(DTYPES[dtype]), noise)
    nodes = (pb.PERTURBED[key] if key else sum(pb.FAMILY_NODES.values())) - before
    why = f"score {rep.score:.3g}: {rep.summary()}; {curve.summary()}"
    flagged = not (rep.ok and curve.ok)
    if modules and not flagged:
        mods = _trusted_modules(model, dtype).judge_compiled(backend, label="compiled")
        flagged, why = not mods.ok, f"{why}; {mods.summary()}"
    return flagged, nodes, why


def _check(model: str, dtype: str, backend: str) -> None:
    flagged, nodes, why = _judge(model, dtype, backend, modules=backend.startswith("perturb_"))
    if backend.startswith("perturb_"):
        if nodes == 0:
            pytest.skip(f"{model} has no {backend.split('_')[1]} op in its graphs")
        assert flagged, f"{model} {dtype} {backend}: a 1% error in {nodes} node(s) went through ({why})"
    else:
        assert not flagged, f"{model} {dtype} {backend}: a correct backend was flagged ({why})"


def test_eager_is_not_flagged() -> None:
    for dtype in ("fp32", "bf16"):
        _, _, _, ref, base, _ = _setup("llama", dtype)
        assert parity(base.tensors, ref.tensors, DTYPES[dtype], trusted=True).ok


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])  # amp-bf16: test_llama_families_low_precision, the CLI test
@pytest.mark.parametrize(
    "backend", ["aot_eager", *[f"perturb_{k}_aot_eager" for k in ("mm", "norm", "act", "add", "sdpa")]]
)
def test_llama(backend: str, dtype: str) -> None:
    _check("llama", dtype, backend)


LOW_PRECISION_FAMILIES = [
    (m, f, d)
    for f in ("act", "ascale", "mm_lowacc")
    for d in ("amp-bf16", "bf16")
    # a matmul accumulating in bf16 under amp: on llama fed text (2026-12-04) its effect, 2.7% on the
    # gradients, passed both rules (whole-model average 1.47x the trusted runs' distance against 1.5;
    # the largest module 0.0074 against 0.0093): bench/verdict_power.py flags it on gpt2, olmo and olmo2
    # and misses it on llama (docs/verdicts.md). The proof that it can fail in amp is made on gpt2.
    for m in (("gpt2",) if (f, d) == ("mm_lowacc", "amp-bf16") else ("llama",))
]


@pytest.mark.parametrize(("model", "family", "dtype"), LOW_PRECISION_FAMILIES)
def test_llama_families_low_precision(model: str, family: str, dtype: str) -> None:
    """A ~1% activation error, a 1% softmax temperature error and a matmul accumulating in bf16
    (bench/verdict_power.py's families) are flagged on a tiny llama in mixed and pure bf16, by the zoo's
    own judgement: the whole-model rule, and the module check where that passes. (The temperature error
    is visible because the zoo's init keeps attention logits at unit scale: models/testable_init.py.) On
    text-like tokens (Zipf: a few ids fill much of a batch, tried 2026-12-03) the whole-model rule alone
    let `act` and `ascale` at 1% through in bf16 (scores 0.77-0.89) and the module check flagged them."""
    flagged, nodes, why = _judge(model, dtype, pb.family_backend(family), modules=True)
    assert nodes > 0, f"{family} rewrote no node of {model}"
    assert flagged, f"{model} {dtype} {family}: {nodes} node(s) perturbed, not flagged ({why})"


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_inductor_is_not_flagged_cheap(dtype: str) -> None:
    """Inductor (real codegen: fused kernels, fp32 intermediates in bf16, other reduction orders) is not
    falsely flagged, on a user model with linear, LayerNorm and GELU (seconds to compile; the LM zoo
    matrix is the slow test below, the 30-model sweep is bench/verdict_power.py)."""
    flagged, _, why = _judge("zoo_models:clean_mlp", dtype, "inductor")
    assert not flagged, f"inductor falsely flagged in {dtype}: {why}"


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("variant", list(pb.VARIANTS))
def test_correct_variants_are_not_flagged(variant: str, dtype: str) -> None:
    """Correct backends that do not compute like cpu eager (tests/zoo/perturb_backend.py: VARIANTS:
    matmuls summed in another order; activations, norms, softmax and SDPA computed wider and rounded
    once, as fused accelerator kernels do) are not flagged on llama, in every precision, by the
    whole-model rule nor by the module check (checks/module_check.py) on the same run. The variant must
    really change the numbers (cpu eager on another thread count is often bit-identical to the trusted
    run in low precision, so it proves nothing)."""
    # llama's bf16 matmuls come out bit-identical under splitk at the zoo's widths (each half summed in fp32 and
    # rounded once, as cpu eager's bf16 GEMM does: one rounding of the same fp32 sum); qwen3's do not
    model = "qwen3" if (variant, dtype) == ("splitk", "bf16") else "llama"
    built, init, batches, ref, base, noise = _setup(model, dtype)
    modes: list[pb.CorrectMode] = []

    def ctx() -> pb.CorrectMode:
        modes.append(pb.CorrectMode(variant))
        return modes[-1]

    prec = sz.as_precision(DTYPES[dtype])
    mc = zoo_modules.new_check(built.model, prec, torch.device("cpu"))  # the module check on the same run
    got = sz.train_run(built, init, batches, torch.device("cpu"), prec, sz.RunHow(step_context=ctx, module_check=mc))
    assert sum(m.calls for m in modes) > 0, f"{variant} recomputed no call of {model}"
    moved = [k for k in base.tensors if not torch.equal(got.tensors[k], base.tensors[k])]
    assert moved, f"{variant} {dtype}: bit-identical to the trusted run, proves nothing"
    rep, curve = zj.judge_run(got, ref, base, prec, noise)
    assert rep.ok and curve.ok, f"correct variant {variant} flagged in {dtype}: {rep.summary()}; {curve.summary()}"
    mods = mc.judge_eager()
    assert mods.ok and len(mods.judged) >= 25, f"correct variant {variant} flagged in {dtype}: {mods.summary()}"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["llama", "gpt2", "qwen3_moe", "test_vit", "test_resnet"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(
    "backend",
    [
        "aot_eager",
        "inductor",
        *[f"perturb_{k}_aot_eager" for k in KINDS],
        *[f"perturb_{k}_inductor" for k in ("mm", "norm", "add")],
    ],
)
def test_matrix(model: str, dtype: str, backend: str) -> None:
    _check(model, dtype, backend)
