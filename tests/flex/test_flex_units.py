"""flex: the pure parts. Matrices and planning, the mods against their dense references (and against
FlexAttention itself, eager on cpu), the float64 reference, tolerances, the sentence and the heatmap."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from bringup.case import Case, CaseResult, Metric, Status
from bringup.device import Device
from bringup.errors import BadInput
from bringup.flex import suite, summary
from bringup.flex.matrix import MatrixError, default_matrix, load_matrix_file, parse_matrix, quick_matrix
from bringup.flex.mods import (
    BUILTIN_MODS,
    AttnShape,
    build_mod,
    default_scale,
    derived_dense,
    document_lengths,
    reference_for,
)
from bringup.flex.reference import Attention, Slice, dense_attention, gather_kv, gather_q, ref_slices, trusted_attention
from bringup.flex.tolerance import ATTN_TOLERANCES, attn_reason, check_attention, worst

# ---- matrices and planning --------------------------------------------------------------------------


def test_default_matrix_is_the_seeds_96() -> None:
    m = default_matrix()
    assert len(m.cases) == 96 == len(set(m.cases))
    assert {c.mod for c in m.cases} == set(BUILTIN_MODS) and len(BUILTIN_MODS) == 8
    assert {c.batch for c in m.cases} == {1, 4}
    assert {c.seq for c in m.cases} == {1024, 4096, 8192}
    assert {(c.q_heads, c.kv_heads) for c in m.cases} == {(16, 16), (16, 2)}
    assert {c.head_dim for c in m.cases} == {128}


def test_plan_on_an_accelerator_is_96_bf16_with_backward() -> None:
    cases = suite.plan(default_matrix(), Device("cuda"))
    assert len(cases) == 96
    assert {c.params["dtype"] for c in cases} == {"bf16"}
    assert all(c.params["backward"] for c in cases)
    assert all(c.params["compile_budget_s"] == 600 and c.budget_s > 600 for c in cases)


def test_plan_on_cpu_auto_backward_is_forward_plus_one_probe() -> None:
    cases = suite.plan(quick_matrix(), Device("cpu"))
    probes = [c for c in cases if c.params.get("probe")]
    assert len(probes) == 1 and probes[0].params["backward"] is True
    rest = [c for c in cases if not c.params.get("probe")]
    assert len(rest) == len(quick_matrix().cases) and not any(c.params["backward"] for c in rest)
    assert {c.params["dtype"] for c in cases} == {"fp32"}
    assert max(c.params["seq"] for c in cases) <= 512
    on = suite.plan(quick_matrix(), Device("cpu"), backward="on")
    assert len(on) == len(quick_matrix().cases) and all(c.params["backward"] for c in on)
    off = suite.plan(quick_matrix(), Device("cpu"), backward="off")
    assert len(off) == len(quick_matrix().cases) and not any(c.params["backward"] for c in off)


def test_case_ids_are_stable_and_distinct() -> None:
    a = suite.plan(default_matrix(), Device("cuda"))
    b = suite.plan(default_matrix(), Device("cuda"))
    assert [c.case_id for c in a] == [c.case_id for c in b]
    assert len({c.case_id for c in a}) == 96


def test_case_params_are_the_flex_spec_serialization_with_the_old_case_ids() -> None:
    """A case's params are FlexSpec.params() (asdict, optional fields left out at their defaults): the same
    dict, so the same case ids, as the hand-written one before FlexSpec; the worker reads them back."""
    from bringup.case import make_case_id
    from bringup.flex.spec import FlexSpec, SpecError

    hidden = {"recompile_limit": 2, "dynamo_reset": False}
    cases = suite.plan(quick_matrix(), Device("cpu"), hidden=hidden)
    for c in cases:
        m = next(x for x in quick_matrix().cases if c.params["mod"] == x.mod and c.params["seq"] == x.seq)
        old = {
            "mod": m.mod,
            "batch": m.batch,
            "seq": m.seq,
            "q_heads": m.q_heads,
            "kv_heads": m.kv_heads,
            "head_dim": m.head_dim,
            "dtype": "fp32",
            "backward": c.params["backward"],
            "compile_budget_s": 600.0,
            "backend": "inductor",
            **hidden,
        }
        if c.params.get("probe"):
            old["probe"] = True
        assert c.params == old and c.case_id == make_case_id("flex", old)
        spec = FlexSpec.from_params(c.params)
        assert spec.params() == c.params and spec.shape.seq == m.seq
    plain = suite.plan(quick_matrix(), Device("cpu"), backward="off")[0].params
    assert not {"probe", "recompile_limit", "dynamo_reset"} & set(plain)
    assert FlexSpec.from_params({**plain, "unused": 1}).params() == plain
    for bad in ({"dtype": "float32"}, {"seq": 0}, {"backward": "on"}, {"compile_budget_s": -1}):
        with pytest.raises(SpecError):
            FlexSpec.from_params({**plain, **bad})
    with pytest.raises(SpecError, match="head_dim"):
        FlexSpec.from_params({k: v for k, v in plain.items() if k != "head_dim"})


def test_mods_option_runs_those_mods_at_every_shape() -> None:
    m = default_matrix().with_mods(["causal", "alibi"])
    assert len(m.cases) == 24 and {c.mod for c in m.cases} == {"causal", "alibi"}
    q = quick_matrix().with_mods(["softcap"])
    assert len(q.cases) == 2 and {c.seq for c in q.cases} == {256, 512}


def test_matrix_file_grid_and_cases(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(
        "mods: [causal, softcap]\nbatch: [1, 2]\nseq: 128\nheads: [[4, 4], '4/2']\nhead_dim: 32\n"
        "dtype: bf16\nbackward: off\n"
    )
    m = load_matrix_file(str(f))
    assert len(m.cases) == 8
    assert {(c.q_heads, c.kv_heads) for c in m.cases} == {(4, 4), (4, 2)}
    assert {c.dtype for c in m.cases} == {"bf16"} and {c.backward for c in m.cases} == {"off"}
    j = tmp_path / "m.json"
    j.write_text(
        '{"head_dim": 16, "cases": [{"mod": "noop", "batch": 1, "seq": 64, "heads": 2},'
        ' {"mod": "causal", "batch": 3, "seq": 32, "heads": [6, 3], "dtype": "fp16"}]}'
    )
    m = load_matrix_file(str(j))
    assert [(c.mod, c.batch, c.seq, c.q_heads, c.kv_heads, c.head_dim, c.dtype) for c in m.cases] == [
        ("noop", 1, 64, 2, 2, 16, None),
        ("causal", 3, 32, 6, 3, 16, "fp16"),
    ]


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ([1, 2], "expected a mapping"),
        ({"mods": ["causal"], "sequence": 5}, "unknown key"),
        ({"batch": 1}, "needs mods"),
        ({"mods": ["nope"]}, "unknown mod 'nope'"),
        ({"mods": ["causal"], "seq": 0}, "positive integer"),
        ({"mods": ["causal"], "seq": "abc"}, "positive integer"),
        ({"mods": ["causal"], "batch": True}, "positive integer"),
        ({"mods": ["causal"], "heads": [[16, 3]]}, "not a multiple"),
        ({"mods": ["causal"], "heads": "x/y"}, "Q/KV"),
        ({"mods": ["causal"], "dtype": "fp64"}, "expected one of fp32"),
        ({"mods": ["causal"], "backward": "maybe"}, "expected one of auto"),
        ({"mods": []}, "empty"),
        ({"cases": []}, "non-empty list"),
        ({"cases": [{"mod": "causal", "batch": 1, "seq": 8, "heads": 1}]}, "missing head_dim"),
        ({"cases": [{"mod": "causal", "bach": 1}]}, "unknown key"),
        ({"seq": [1, 2], "cases": [{"mod": "causal"}]}, "single value"),
        ({"mods": ["no_such_module_xyz:fn"]}, None),  # a module path is accepted here; imported later
    ],
)
def test_matrix_validation(doc: object, needle: str | None) -> None:
    if needle is None:
        parse_matrix(doc)
        return
    with pytest.raises(MatrixError, match=needle):
        parse_matrix(doc)


# ---- mods ---------------------------------------------------------------------------------------------


def _grid(s: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.arange(4).view(4, 1, 1), torch.arange(s).view(1, s, 1), torch.arange(s).view(1, 1, s)


@pytest.mark.parametrize("name", list(BUILTIN_MODS))
def test_dense_reference_agrees_with_the_mod_functions(name: str) -> None:
    """Each hand-written dense reference equals the flex mod functions evaluated densely."""
    shape = AttnShape(2, 96, 4, 2, 16)
    mod = build_mod(name, shape, torch.device("cpu"))
    scores = torch.randn(4, 96, 96, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    h, q, kv = _grid(96)
    for b in (0, 1):
        want = derived_dense(mod)(scores.clone(), b, h, q, kv)
        got = mod.dense(scores.clone(), b, h, q, kv)  # type: ignore[misc]
        assert torch.equal(torch.isneginf(want), torch.isneginf(got)), name
        fin = torch.isfinite(want)
        torch.testing.assert_close(got[fin], want[fin], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(BUILTIN_MODS))
def test_flex_eager_agrees_with_dense_reference(name: str) -> None:
    """FlexAttention itself (eager, on cpu: no compile) vs the float64 reference, in float64."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    shape = AttnShape(2, 80, 4, 2, 8)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 80, 8, generator=g, dtype=torch.float64)
    k = torch.randn(2, 2, 80, 8, generator=g, dtype=torch.float64)
    v = torch.randn(2, 2, 80, 8, generator=g, dtype=torch.float64)
    mod = build_mod(name, shape, torch.device("cpu"))
    bm = create_block_mask(mod.mask_mod, None, None, 80, 80, device="cpu", BLOCK_SIZE=16) if mod.mask_mod else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = flex_attention(q, k, v, score_mod=mod.score_mod, block_mask=bm, enable_gqa=True)
    dense, origin = reference_for(name, shape)
    assert origin == "dense"
    slices = ref_slices(shape)
    ref = dense_attention(Attention(q, k, v, dense, default_scale(8), slices))
    check = check_attention({"out": gather_q(shape, slices, out)}, ref, torch.float64)
    assert check.ok, attn_reason(check)


def test_mod_settings_are_sensible() -> None:
    for s in (1, 2, 255, 256, 1024, 8192):
        lengths = document_lengths(s)
        assert sum(lengths) == s and min(lengths) >= 1
    assert len(document_lengths(8192)) == 32 and document_lengths(4096) == document_lengths(4096)
    assert build_mod("sliding_window", AttnShape(1, 8192, 1, 1, 8), torch.device("cpu")).settings == {"window": 256}


# ---- the reference --------------------------------------------------------------------------------------


def _naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rep: int, scale: float) -> torch.Tensor:
    kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ kk.transpose(-1, -2) * scale
    s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1) @ vv


def test_dense_attention_with_backward_matches_naive_autograd() -> None:
    shape = AttnShape(3, 40, 4, 2, 8)
    g = torch.Generator().manual_seed(2)
    q = torch.randn(3, 4, 40, 8, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(3, 2, 40, 8, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(3, 2, 40, 8, generator=g, dtype=torch.float64, requires_grad=True)
    do = torch.randn(3, 4, 40, 8, generator=g, dtype=torch.float64)
    out = _naive(q, k, v, 2, 0.3)
    out.backward(do)
    slices = ref_slices(shape)
    assert slices == [Slice(b, g) for b in range(3) for g in range(2)]  # every (batch, kv head) pair
    dense, _ = reference_for("causal", shape)
    ref = dense_attention(Attention(q, k, v, dense, 0.3, slices, do))
    torch.testing.assert_close(ref["out"], gather_q(shape, slices, out.detach()))
    torch.testing.assert_close(ref["dq"], gather_q(shape, slices, q.grad))
    torch.testing.assert_close(ref["dk"], gather_kv(slices, k.grad))
    torch.testing.assert_close(ref["dv"], gather_kv(slices, v.grad))


def test_fully_masked_rows_are_zero_like_flex() -> None:
    shape = AttnShape(1, 8, 1, 1, 4)
    q = torch.randn(1, 1, 8, 4, dtype=torch.float64)
    ref = dense_attention(
        Attention(q, q, q, lambda s, b, h, qi, kv: s.masked_fill(qi < 3, float("-inf")), 0.5, ref_slices(shape))
    )
    assert torch.equal(ref["out"][0, 0, :3], torch.zeros(3, 4, dtype=torch.float64))
    assert torch.isfinite(ref["out"]).all()


def test_tolerances_flag_what_they_should() -> None:
    r = {"out": torch.randn(2, 3, 16, 8, dtype=torch.float64)}
    assert check_attention({"out": r["out"].float()}, r, torch.float32).ok
    bf = check_attention({"out": r["out"].to(torch.bfloat16)}, r, torch.bfloat16)
    assert bf.ok and bf.rel_rmse < ATTN_TOLERANCES[torch.bfloat16].out / 4
    off = r["out"].clone()
    off[0, 0, 0] += 5.0
    assert not check_attention({"out": off}, r, torch.bfloat16).ok
    nan = r["out"].clone()
    nan[0, 0, 0, 0] = float("nan")
    bad = check_attention({"out": nan}, r, torch.float32)
    assert not bad.ok and "non-finite" in attn_reason(bad)
    assert not check_attention({"out": r["out"][:1]}, r, torch.float32).ok
    assert not check_attention({}, r, torch.float32).ok


def test_flex_reports_are_parity_reports_with_max_abs_over_peak() -> None:
    """flex's check is checks/parity's: a ParityReport of TensorParity, whose `max_rel_err` is the largest
    rel_rmse (the catalogue's meaning) and `max_abs_over_peak` the element-wise max |err| / max |ref|."""
    from bringup.checks.parity import ParityReport, TensorParity

    r = {"out": torch.randn(2, 3, 16, 8, dtype=torch.float64)}
    off = r["out"].clone()
    off[0, 0, 0, 0] += 0.5
    rep = check_attention({"out": off}, r, torch.float32)
    assert isinstance(rep, ParityReport) and all(isinstance(t, TensorParity) for t in rep.tensors)
    assert [t.name for t in rep.tensors] == ["out[0]", "out[1]"] and not rep.ok
    peak = float(r["out"][0].abs().max())
    assert rep.max_abs_err == pytest.approx(0.5) and rep.max_abs_over_peak == pytest.approx(0.5 / peak)
    assert rep.max_rel_err == rep.rel_rmse == max(t.rel_rmse for t in rep.tensors) < rep.max_abs_over_peak
    assert attn_reason(rep).startswith("out[0] off: rel_rmse ")


# ---- the sentence and the heatmap ------------------------------------------------------------------------


def _results(statuses: dict[tuple[str, int, int, int], Status]) -> list[CaseResult]:
    out = []
    for case in suite.plan(default_matrix(), Device("cuda")):
        p = case.params
        st = statuses.get((p["mod"], p["batch"], p["seq"], p["kv_heads"]), Status.PASS)
        r = CaseResult.for_case(case, st)
        r.metrics["compile_s"] = Metric(1.0, "s")
        out.append(r)
    return out


def test_the_seeds_sentence() -> None:
    fails = {
        (m, 4, 8192, kv): Status.BUDGET
        for m, kv in [
            ("noop", 16),
            ("causal", 2),
            ("alibi", 16),
            ("alibi", 2),
            ("softcap", 2),
            ("head_bias", 16),
            ("document_mask", 2),
        ]
    }
    results = _results(fails)
    assert summary.sentence(results) == "89/96 passed; 7 budget (all batch 4, seq 8192)"
    hm = summary.heatmap(results)
    assert hm["mods"] == list(BUILTIN_MODS) and len(hm["shapes"]) == 12
    assert len(hm["status"]) == 8 and all(len(row) == 12 for row in hm["status"])
    flat = [s for row in hm["status"] for s in row]
    assert flat.count("budget") == 7 and flat.count("pass") == 89
    col = hm["shapes"].index("b4 s8192 h16/2 d128")
    assert hm["status"][list(BUILTIN_MODS).index("causal")][col] == "budget"
    assert hm["compile_s"][0][0] == 1.0


def test_sentence_groups_by_status_and_shared_values() -> None:
    fails = {
        ("softcap", 1, 1024, 2): Status.FAIL_NUMERIC,
        ("softcap", 4, 1024, 2): Status.FAIL_NUMERIC,
        ("causal", 1, 4096, 16): Status.REF_FAIL,
        ("noop", 4, 8192, 16): Status.OOM,
    }
    text = summary.sentence(_results(fails))
    assert text == (
        "92/95 passed; 2 fail_numeric (all mod softcap, seq 1024, heads 16/2); "
        "1 oom (mod noop, batch 4, seq 8192, heads 16/16); "
        "1 ref_fail (excluded: the cpu reference failed)"
    )
    assert summary.sentence([]) == "0/0 passed"


def test_heatmap_cell_with_two_cases_shows_the_worse() -> None:
    c = Case(
        "flex",
        "x",
        {
            "mod": "noop",
            "batch": 1,
            "seq": 8,
            "q_heads": 1,
            "kv_heads": 1,
            "head_dim": 8,
            "dtype": "fp32",
            "backward": False,
        },
        "e",
    )
    a = CaseResult.for_case(c, Status.PASS)
    b = CaseResult.for_case(c, Status.FAIL_NUMERIC)
    assert summary.heatmap([a, b])["status"] == [["fail_numeric"]]
    assert summary.heatmap([b, a])["status"] == [["fail_numeric"]]


def test_flops_count_block_sparsity() -> None:
    from bringup.flex.case import attention_flops

    s = AttnShape(4, 8192, 16, 2, 128)
    assert attention_flops(s, 1.0) == 4 * 4 * 16 * 8192 * 8192 * 128
    assert math.isclose(attention_flops(s, 0.5), attention_flops(s, 1.0) / 2)


# ---- the low-precision rule: every pair, every gradient, against a trusted run at the case dtype -----


def _bf16_case(seed: int = 4) -> tuple[AttnShape, dict[str, torch.Tensor], Any, list[Any]]:
    shape = AttnShape(3, 64, 4, 2, 16)
    g = torch.Generator().manual_seed(seed)
    x = {n: torch.randn(3, h, 64, 16, generator=g).to(torch.bfloat16) for n, h in (("q", 4), ("k", 2), ("v", 2))}
    x["do"] = torch.randn(3, 4, 64, 16, generator=g).to(torch.bfloat16)
    dense, _ = reference_for("causal", shape)
    return shape, x, dense, ref_slices(shape)


def _flex_bf16(shape: AttnShape, x: dict[str, torch.Tensor], factor: float = 1.0) -> dict[str, torch.Tensor]:
    """FlexAttention eager on cpu in bf16 (forward only: no cpu backward), its output scaled by `factor`."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    mod = build_mod("causal", shape, torch.device("cpu"))
    bm = create_block_mask(mod.mask_mod, None, None, 64, 64, device="cpu", BLOCK_SIZE=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = flex_attention(x["q"], x["k"], x["v"], block_mask=bm, enable_gqa=True)
    return {"out": out * factor}


def test_bf16_flex_forward_is_judged_against_a_trusted_run_and_a_1pct_scale_fails() -> None:
    """cpu flex in bf16 passes against the trusted bf16 math run; the same output 1% off fails (by its
    direction: the old fixed 2e-2 rel-RMSE bound let a 1.9% error through)."""
    shape, x, dense, slices = _bf16_case()
    at = Attention(x["q"], x["k"], x["v"], dense, default_scale(16), slices)
    ref = dense_attention(at)
    trusted = trusted_attention(at, torch.bfloat16)
    good = _flex_bf16(shape, x)
    ok = check_attention({"out": gather_q(shape, slices, good["out"])}, ref, torch.bfloat16, trusted)
    assert ok.ok, attn_reason(ok)
    off = _flex_bf16(shape, x, 1.01)
    bad = check_attention({"out": gather_q(shape, slices, off["out"])}, ref, torch.bfloat16, trusted)
    assert not bad.ok and "bias" in attn_reason(bad), attn_reason(bad)
    assert bad.rel_rmse < ATTN_TOLERANCES[torch.bfloat16].out  # invisible to the old size-only bound


def test_every_pair_and_every_gradient_is_compared() -> None:
    """A fault in one middle (batch, head) pair of dk: the old {0, B-1} x {0, KV-1} slices never saw it."""
    shape, x, dense, slices = _bf16_case()
    at = Attention(x["q"], x["k"], x["v"], dense, default_scale(16), slices, x["do"])
    ref = dense_attention(at)
    trusted = dense_attention(at, torch.bfloat16)
    assert ref["dk"].shape[0] == 6 and check_attention(trusted, ref, torch.bfloat16, trusted).ok
    got = {k: v.clone() for k, v in trusted.items()}
    got["dk"][slices.index(Slice(1, 0))] *= 1.05  # batch 1 of 3, kv head 0: 5% off in one pair
    bad = check_attention(got, ref, torch.bfloat16, trusted)
    w = worst(bad)
    assert not bad.ok and w is not None and w.name == f"dk[{slices.index(Slice(1, 0))}]", attn_reason(bad)


def test_amp_precisions_are_accepted() -> None:
    from bringup.flex.suite import _dtype_arg

    assert _dtype_arg("amp-bf16") == "amp-bf16" and _dtype_arg("bf16") == "bf16"
    with pytest.raises(BadInput):
        _dtype_arg("fp64")
