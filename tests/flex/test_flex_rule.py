"""flex's low-precision judgement: the module rule (checks/module_rule.py) on every (batch, kv-head) slice of
out, dq, dk and dv, against float64, the trusted run and the dither (bringup/flex/tolerance.py,
reference.py, dither.py). On synthetic tensors: a correct bf16 result passes, each of the rule's checks
fails on the kind of error it is there for, for the output and for the gradients (FlexAttention has no
cpu backward, so the gradients of a device with one are modelled by tests/flex/flex_bend.flash_backward,
FlexAttention's own math backward)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import flex_bend as fb

from bringup.checks.module_rule import one_rounding
from bringup.flex.dither import dithered_attention, sampled_slices
from bringup.flex.mods import AttnShape, build_mod, default_scale, reference_for
from bringup.flex.reference import (
    Attention,
    dense_attention,
    gather_kv,
    gather_q,
    ref_slices,
    trusted_attention,
)
from bringup.flex.reweight import reweight_coefs
from bringup.flex.tolerance import COVARIATE, RuleTensor, attn_reason, check_attention, failed_checks

BF16 = torch.bfloat16
SHAPE = AttnShape(2, 128, 4, 2, 32)


def _setup(mod: str, seed: int = 3) -> dict[str, Any]:
    """A bf16 case's inputs, float64 reference, trusted run, dither and covariates (with a backward)."""
    g = torch.Generator().manual_seed(seed)
    x = {n: torch.randn(2, h, 128, 32, generator=g).to(BF16) for n, h in (("q", 4), ("k", 2), ("v", 2), ("do", 4))}
    dense, _ = reference_for(mod, SHAPE)
    slices, scale = ref_slices(SHAPE), default_scale(32)
    at = Attention(x["q"], x["k"], x["v"], dense, scale, slices, x["do"])
    ref = dense_attention(at)
    return {
        "x": x,
        "dense": dense,
        "ref": ref,
        "trusted": trusted_attention(at, BF16),
        "dither": dithered_attention(at, one_rounding(BF16), ref)[0],
        "inputs": {
            "q": gather_q(SHAPE, slices, x["q"]),
            "k": gather_kv(slices, x["k"]),
            "v": gather_kv(slices, x["v"]),
        },
        "device": fb.flash_grads(SHAPE, x, dense, BF16),
    }


@pytest.fixture(scope="module")
def noop() -> dict[str, Any]:
    return _setup("noop")


@pytest.fixture(scope="module")
def causal() -> dict[str, Any]:
    return _setup("causal")


def _judge(c: dict[str, Any], got: dict[str, torch.Tensor]) -> Any:
    """flex's judgement as a case makes it: the module rule, the dither and the output's reweighting check."""
    x, ref = c["x"], c["ref"]
    errors = {"device": got["out"] - ref["out"], "trusted": c["trusted"]["out"] - ref["out"]}
    rw = reweight_coefs(
        Attention(x["q"], x["k"], x["v"], c["dense"], default_scale(32), ref_slices(SHAPE)), ref["out"], errors
    )
    return check_attention(got, ref, BF16, c["trusted"], c["dither"], c["inputs"], rw)


@pytest.mark.parametrize("which", ["noop", "causal"])
def test_a_correct_bf16_result_passes_out_and_gradients(which: str, request: pytest.FixtureRequest) -> None:
    """FlexAttention's math path in bf16 (fp32 scores, P and dS rounded): out, dq, dk, dv of every slice
    pass, judged by the module rule, well inside it."""
    c = request.getfixturevalue(which)
    rep = _judge(c, c["device"])
    assert rep.ok, attn_reason(rep)
    # per slice: out and dq as a whole and per q head (2), dk, dv
    assert all(isinstance(t, RuleTensor) for t in rep.tensors) and len(rep.tensors) == 4 * (3 + 3 + 1 + 1)
    assert max(t.score for t in rep.tensors) < 0.5, attn_reason(rep)


def _error(kind: str, r: torch.Tensor, x: torch.Tensor, c: float) -> torch.Tensor:
    """An error of one kind on one slice's tensor r (x: its covariate), relative size ~c."""
    rms = r.pow(2).mean().sqrt()
    if kind == "size":  # no structure: only its size is wrong
        return c * rms * torch.randn(r.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    if kind == "bias":  # a scale
        return c * r
    if kind == "value":  # a mean that depends on the value: large |ref| pushed one way
        return c * (r.abs() - r.abs().mean())
    if kind == "input":  # a scale that depends on the covariate's sign (no pooled bias)
        return c * r * torch.sign(x)
    if kind == "position":  # one block of rows up, the next one down (no pooled bias)
        e, n = torch.zeros_like(r), r.shape[-2]
        e[..., : n // 16, :] = c * r[..., : n // 16, :]
        e[..., n // 16 : n // 8, :] = -c * r[..., n // 16 : n // 8, :]
        return e
    if kind == "lanes":  # one row in 16 up, another one in 16 down: in every block of rows alike
        e = torch.zeros_like(r)
        e[..., 7::16, :] = c * r[..., 7::16, :]
        e[..., 15::16, :] = -c * r[..., 15::16, :]
        return e
    # along: in each row, along the covariate's direction with the reference's and the constant taken out,
    # with a sign that alternates from row to row (no pooled bias, no mean anywhere)
    rows, xr = r.reshape(-1, r.shape[-1]), x.reshape(-1, r.shape[-1])
    rc, xc = rows - rows.mean(1, keepdim=True), xr - xr.mean(1, keepdim=True)
    u = xc - (xc * rc).sum(1, keepdim=True) / (rc * rc).sum(1, keepdim=True).clamp_min(1e-300) * rc
    u = u / u.norm(dim=1, keepdim=True).clamp_min(1e-300)
    sign = torch.where(torch.arange(rows.shape[0]) % 2 == 0, 1.0, -1.0).double().view(-1, 1)
    return (c * rows.norm(dim=1, keepdim=True) * sign * u).view(r.shape)


KINDS = {"size": 0.04, "bias": 0.015, "value": 0.03, "input": 0.02, "position": 0.08, "lanes": 0.08, "along": 0.02}


@pytest.mark.parametrize("name", ["out", "dq", "dk", "dv"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_check_fails_on_its_kind_of_error(noop: dict[str, Any], name: str, kind: str) -> None:
    """An error of each kind on one middle slice of one tensor of the correct bf16 result: that slice fails,
    named with the check made for that kind (size, bias, conditional mean given the value, conditional
    scale given the input, a block's scale or mean, a lane's (rows taken modulo 16), the error along the
    input row by row)."""
    got = {k: v.clone() for k, v in noop["device"].items()}
    r, x = noop["ref"][name][1], noop["inputs"][COVARIATE[name]][1].double()
    got[name][1] = got[name][1] + _error(kind, r, x, KINDS[kind])
    rep = _judge(noop, got)
    assert not rep.ok
    bad = failed_checks(rep)
    assert bad[0]["tensor"] == f"{name}[1]" and all(b["tensor"].startswith(f"{name}[1]") for b in bad), bad
    assert bad[0]["check"] == kind, bad


def test_one_q_heads_fault_is_judged_in_that_head(noop: dict[str, Any]) -> None:
    """out and dq are judged per slice and per q head: a 1% scale of one head of slice 2 fails in that head
    (its bias is the whole 1%; in the slice the other head halves it), the other head passes."""
    got = {k: v.clone() for k, v in noop["device"].items()}
    got["out"][2][1] *= 1.01
    by = {t.name: t for t in _judge(noop, got).tensors}
    assert not by["out[2].h1"].ok and by["out[2].h1"].check == "bias", by["out[2].h1"]
    assert by["out[2].h0"].ok and by["out[1]"].ok


def test_a_reweighting_of_the_probabilities_fails_by_the_reweight_check(noop: dict[str, Any]) -> None:
    """The output of slice 1 with its probabilities reweighted by 1 + d sin(2 pi x / ln 2), x the score
    relative to its row's largest (an exp with a periodic error): no scale, mean or block structure in the
    output and under the size bound, yet the reweighting check names it."""
    x, ref = noop["x"], noop["ref"]
    q, k, v = x["q"][0, 2:4].double(), x["k"][0, 1].double(), x["v"][0, 1].double()  # slice 1: batch 0, kv head 1
    s = q @ k.T * default_scale(32)
    xs = s - s.amax(-1, keepdim=True)
    p = torch.softmax(s, -1)
    w = p * (1 + 0.01 * torch.sin(2 * torch.pi * xs / torch.log(torch.tensor(2.0))))
    bent = (w / w.sum(-1, keepdim=True)) @ v
    got = {n: t.clone() for n, t in noop["device"].items()}
    got["out"][1] = got["out"][1] + (bent - ref["out"][1])
    rel = float((bent - ref["out"][1]).pow(2).mean().sqrt() / ref["out"][1].pow(2).mean().sqrt())
    rep = _judge(noop, got)
    assert not rep.ok and failed_checks(rep)[0]["tensor"] == "out[1]", attn_reason(rep)
    assert failed_checks(rep)[0]["check"] == "reweight" and "exp argument" in attn_reason(rep), attn_reason(rep)
    assert rel < rep.tensors[1].bound  # under the size bound


@pytest.mark.parametrize(
    ("family", "d"),
    [("dk_scale", 0.01), ("dk_softmax_scale", 0.01), ("dv_tile", 0.05), ("dq_tail", 0.02), ("lse_off", 0.01)],
)
def test_a_bent_backward_fails_where_the_correct_one_passes(causal: dict[str, Any], family: str, d: float) -> None:
    """flash_backward bent in its backward only (the output stays right): a gradient fails. (delta and
    bwd_exp_wobble, errors with no structure in the gradients, are caught only past the size bound, ~1.7%:
    bench/flex_power.py --backward measures them.)"""
    got = fb.flash_grads(SHAPE, causal["x"], causal["dense"], BF16, family, d)
    assert torch.equal(got["out"], causal["device"]["out"])
    rep = _judge(causal, got)
    assert not rep.ok and all(b["tensor"][:2] in ("dq", "dk", "dv") for b in failed_checks(rep)), attn_reason(rep)


def test_fp32_keeps_parity_rule() -> None:
    """fp32 is judged as before (checks/parity.py's rule with flex's fixed floor): no RuleTensor."""
    r = {"out": torch.randn(2, 3, 16, 8, dtype=torch.float64)}
    rep = check_attention({"out": r["out"].float()}, r, torch.float32, {"out": r["out"].float().double()})
    assert rep.ok and not any(isinstance(t, RuleTensor) for t in rep.tensors)


# ---- the trusted run and the dither ------------------------------------------------------------------------
def test_trusted_out_rounds_like_flex_eager_and_gradients_round_everything() -> None:
    """The trusted output is FlexAttention's eager math path in bf16 (fp32 scores and softmax): one or two
    roundings off float64, like cpu flex eager itself; the trusted gradients round every step."""
    from torch.nn.attention.flex_attention import flex_attention

    c = _setup("noop", seed=4)
    x, ref, tr = c["x"], c["ref"], c["trusted"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = flex_attention(x["q"], x["k"], x["v"], enable_gqa=True)
    slices = ref_slices(SHAPE)
    ours = gather_q(SHAPE, slices, eager).double()
    rel = lambda a, b: float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt())
    assert rel(tr["out"], ref["out"]) < 1.5 * one_rounding(BF16)
    assert rel(tr["out"], ours) < 0.5 * rel(tr["out"], ref["out"])  # the same roundings as flex eager
    assert rel(tr["dq"], ref["dq"]) > 1.5 * one_rounding(BF16)  # every step rounded


def test_the_dither_is_the_reference_at_zero_rounding_and_costs_roundings_at_bf16(noop: dict[str, Any]) -> None:
    x, ref, slices = noop["x"], noop["ref"], ref_slices(SHAPE)
    scale = default_scale(32)
    zero, n = dithered_attention(Attention(x["q"], x["k"], x["v"], noop["dense"], scale, slices, x["do"]), 0.0, ref)
    assert n == len(slices) and len(zero) == 2
    for name, r in ref.items():
        assert float((zero[0][name] - r).abs().max()) < 1e-5 * float(r.abs().max()), name  # fp32-held scores only
    for d in noop["dither"]:
        for name, r in ref.items():
            rel = float((d[name] - r).pow(2).mean().sqrt() / r.pow(2).mean().sqrt())
            assert one_rounding(BF16) < rel < 6 * one_rounding(BF16), (name, rel)


def test_past_its_budget_the_dither_samples_slices_and_the_others_borrow() -> None:
    assert sampled_slices(8, 10, budget=100) == list(range(8))
    assert sampled_slices(8, 10, budget=30) == [0, 4, 7]
    assert sampled_slices(8, 100, budget=10) == [0, 7]
    c = _setup("causal", seed=5)
    x, ref, slices = c["x"], c["ref"], ref_slices(SHAPE)
    budget = 2 * 2 * 128 * 128  # two slices' scores
    at = Attention(x["q"], x["k"], x["v"], c["dense"], default_scale(32), slices, x["do"])
    draws, n = dithered_attention(at, one_rounding(BF16), ref, budget=budget)
    assert n == 2
    for name, r in ref.items():
        rels = [float((draws[0][name][i] - r[i]).pow(2).mean().sqrt() / r[i].pow(2).mean().sqrt()) for i in range(4)]
        assert max(rels) == pytest.approx(max(rels[0], rels[3]), rel=1e-9), rels  # slices 1, 2 borrow the worst
        assert min(rels) > one_rounding(BF16), rels


def test_every_family_is_exact_at_strength_zero_and_moves_the_output_at_its_smallest() -> None:
    """tests/flex/flex_bend.py: at d = 0 each family (and each correct variant) is FlexAttention's own math
    path in float64; at its smallest strength the output moves."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    shape = AttnShape(1, 256, 2, 1, 16)
    mod = build_mod("causal", shape, torch.device("cpu"))
    bm = create_block_mask(mod.mask_mod, None, None, 256, 256, device="cpu")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, 256, 16, generator=g, dtype=torch.float64) for h in (2, 1, 1))

    def run(backend: Any) -> torch.Tensor:
        torch._dynamo.reset()
        f = torch.compile(flex_attention, backend=backend, dynamic=False)
        return f(q, k, v, score_mod=mod.score_mod, block_mask=bm, enable_gqa=True)

    base = run("aot_eager")
    strengths = {**fb.FAMILIES, **fb.HELD_OUT}
    for family in (*strengths, *fb.CORRECT):
        if family not in ("p_trunc", "ho_acc_bf16"):  # their strength is a bit count / a block: 0 has no meaning
            assert float((run(fb.bend_backend(family, 0.0)) - base).abs().max()) < 1e-12, family
        if family in strengths and family != "ho_bias_scale":  # causal has no score_mod term to scale
            moved = float((run(fb.bend_backend(family, strengths[family][0])) - base).abs().max())
            assert moved > 1e-6, family
