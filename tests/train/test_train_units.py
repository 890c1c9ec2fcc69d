"""Pure parts of `bringup train`: FLOPs/token against a hand computation, planning, the loss band,
compile-metric breakdown, the fast-start advice, the memory estimate. No worker processes."""

from __future__ import annotations

import math

import pytest
import torch

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.models import lm
from bringup.options import Options
from bringup.train import compile_metrics, numerics, summary
from bringup.train import suite as train
from bringup.train.args import TrainOptions
from bringup.train.spec import TrainSpec


def qwen3_by_hand(H: int, I: int, L: int, Q: int, KV: int, D: int, V: int, seq: int) -> tuple[int, int]:  # noqa: E741
    """A Qwen3 model with an untied lm_head (hidden H, intermediate I, L layers, Q query and KV key/value heads
    of dim D, vocabulary V): parameters counted by hand, then TorchTitan's get_dense_model_nparams_and_flops."""
    attn = H * Q * D + 2 * H * KV * D + Q * D * H + 2 * D  # q, k, v, o projections (no bias) + q/k RMSNorm
    mlp = 3 * H * I  # gate, up, down
    norms = 2 * H  # input_layernorm, post_attention_layernorm
    embedding = V * H
    total = L * (attn + mlp + norms) + embedding + V * H + H  # + untied lm_head + final norm
    flops = 6 * (total - embedding) + 6 * L * Q * (D + D) * seq
    return total, flops


def qwen3_32b_by_hand(seq: int) -> tuple[int, int]:
    """Qwen3-32B (Hugging Face Qwen/Qwen3-32B config.json)."""
    return qwen3_by_hand(5120, 25600, 64, 64, 8, 128, 151936, seq)


def test_flops_per_token_qwen3_32b_by_hand() -> None:
    total, flops = qwen3_32b_by_hand(2048)
    assert total == 32_762_123_264  # 32.8B, as published
    meta = lm.build_model("qwen3-32b", device="meta")
    assert lm.param_counts(meta) == (total, 151936 * 5120)
    assert lm.flops_per_token(meta, 2048) == flops
    assert math.isclose(flops, 2.048e11, rel_tol=1e-3)  # the seeds' figure at seq 2048
    assert lm.flops_per_token(meta, 4096) == qwen3_32b_by_hand(4096)[1]


def _args(**kw: object) -> Options:
    """`bringup train`'s options with `kw` given (the others at their defaults, as the parser gives them)."""
    return Options(command=TrainOptions(**kw))  # type: ignore[arg-type]


CPU = __import__("bringup.device", fromlist=["Device"]).Device("cpu")


def test_plan_orders_eager_then_cold_then_warm() -> None:
    cases = train.build_cases(_args(cache="both", steps=3), CPU)
    assert [c.name for c in cases] == ["eager", "compile-cold", "regional-cold", "compile-warm", "regional-warm"]
    assert all(c.isolated for c in cases)
    assert len({c.case_id for c in cases}) == 5
    specs = [TrainSpec.from_params(c.params) for c in cases]
    assert all(s.warmup == 2 and s.steps == 3 for s in specs)
    # a warm case shares its cold case's cache key; every mode shares the eager reference key
    assert specs[1].cache_key == specs[3].cache_key != specs[2].cache_key
    assert len({s.reference_key for s in specs}) == 1
    assert TrainSpec.from_params(cases[1].params) == specs[1]  # round trip through Case.params


def test_amp_dtypes_plan_and_run_full_uses_amp_bf16_on_accelerators() -> None:
    from types import SimpleNamespace

    for given, name in (("amp-bf16", "amp-bf16"), ("amp_fp16", "amp-fp16"), ("bfloat16", "bf16")):
        (c,) = train.build_cases(_args(modes="eager", steps=2, dtype=given), CPU)
        assert TrainSpec.from_params(c.params).dtype == name
    assert train.low_precision(SimpleNamespace(is_cpu=False)) == "amp-bf16"  # type: ignore[arg-type]
    assert train.low_precision(CPU) == "bf16"


def test_plan_modes_canonical_and_warmup_default() -> None:
    cases = train.build_cases(_args(modes="regional,eager", steps=2), CPU)
    assert [c.name for c in cases] == ["eager", "regional-cold"]
    assert TrainSpec.from_params(cases[0].params).warmup == 1


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"modes": "eager,turbo"}, "bad --modes"),
        ({"modes": ","}, "bad --modes"),
        ({"steps": 1}, "must be more than --warmup"),
        ({"steps": 3, "warmup": 3}, "must be more than --warmup"),
        ({"model": "qwen3-huge"}, "unknown model"),
        ({"override": ["num_key_value_heads=3"]}, "multiple of num_key_value_heads"),
        ({"override": ["no_such_field=1"]}, "has no field"),
        ({"flops_only": True, "nproc": 2}, "--flops-only trains nothing: drop --nproc"),
        ({"compile_backend": "no_such_backend"}, "unknown --compile-backend"),
        ({"model": "os:no_such_fn"}, "model os:no_such_fn"),
        ({"model": "os:getcwd", "override": ["a=1"]}, "--override applies to presets"),
        ({"dtype": "amp-int8"}, "unknown dtype 'amp-int8'"),
    ],
)
def test_build_cases_rejects(kw: dict, needle: str) -> None:
    with pytest.raises(BadInput, match=None) as ei:
        train.build_cases(_args(**kw), CPU)
    assert needle in str(ei.value), str(ei.value)


def test_an_override_reaches_what_the_config_derives_from_it() -> None:
    """More layers than the preset has: transformers 5 keeps one `layer_types` entry per layer, derived when
    the config is built; set afterwards, the list stayed at 4 and building the model raised IndexError."""
    cfg = lm.load_config("qwen3-tiny", ["num_hidden_layers=8"])
    assert cfg.num_hidden_layers == 8 and len(getattr(cfg, "layer_types", None) or [None] * 8) == 8
    assert len(lm.decoder_layers(lm.build_model("qwen3-tiny", ["num_hidden_layers=8"], device="meta"))) == 8


def test_learnable_batches_are_seeded_and_learnable() -> None:
    a = list(lm.synthetic_batches(4096, 2, 64, 3, seed=7, learnable=True))
    b = list(lm.synthetic_batches(4096, 2, 64, 3, seed=7, learnable=True))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True)) and a[0].shape == (2, 64)
    assert not torch.equal(a[0], next(lm.synthetic_batches(4096, 2, 64, 1, seed=8, learnable=True)))
    x = torch.cat(a)
    assert x.unique().numel() <= 256  # a 256-token subset ...
    # ... where most tokens follow a fixed successor: the next token is predictable most of the time
    pairs: dict[int, list[int]] = {}
    for row in x.tolist():
        for u, v in zip(row, row[1:], strict=False):
            pairs.setdefault(u, []).append(v)
    top = sum(max(vs.count(v) for v in set(vs)) for vs in pairs.values())
    assert top / sum(len(vs) for vs in pairs.values()) > 0.8
    # default (uniform) batches are unchanged: the profile suite relies on them
    u = next(lm.synthetic_batches(100, 2, 5, 1))
    assert torch.equal(u, torch.randint(0, 100, (2, 5), generator=torch.Generator().manual_seed(1234)))


def test_loss_band() -> None:
    fp32 = numerics.band_for("fp32")
    eager = [8.3, 8.1, 7.9]
    ok = numerics.compare([8.3, 8.1 * (1 + 5e-5), 7.9], eager, fp32)
    assert ok.ok and ok.first_bad_step is None and 0 < ok.max_rel_dev < 1e-4
    bad = numerics.compare([8.3, 8.1, 7.9 * 1.01], eager, fp32)
    assert not bad.ok and bad.first_bad_step == 3 and "step 3" in bad.summary("compile")
    assert numerics.compare([8.3, 8.1 * 1.01, 7.9], eager, numerics.band_for("bf16")).first_bad_step == 2
    assert numerics.compare([8.3, 8.1 * 1.004, 7.9], eager, numerics.band_for("bf16")).ok
    assert numerics.compare([8.3, float("nan"), 7.9], eager, fp32).first_bad_step == 2
    assert not numerics.compare([8.3, 8.1], eager, fp32).ok  # a shorter curve never passes
    assert numerics.band_for("fp32", 0.5).rel == 0.5
    assert numerics.first_nonfinite([1.0, float("inf")]) == 2 and numerics.first_nonfinite([1.0]) is None


def test_compile_breakdown_from_dynamo_times() -> None:
    cold = {
        "entire_frame_compile": 41.4,
        "backend_compile": 37.3,
        "entire_backward_compile": 19.8,
        "inductor_compile": 51.5,
        "total_wall_time": 61.2,
    }  # (measured on this machine)
    b = compile_metrics.breakdown(cold)
    assert b["total_s"] == pytest.approx(61.2)
    assert b["dynamo_s"] == pytest.approx(4.1) and b["backend_s"] == pytest.approx(51.5)
    assert b["aot_autograd_s"] == pytest.approx(37.3 + 19.8 - 51.5)
    assert sum(b[k] for k in ("dynamo_s", "aot_autograd_s", "backend_s")) == pytest.approx(b["total_s"])
    warm = compile_metrics.breakdown({"entire_frame_compile": 3.6, "backend_compile": 1.6})
    assert warm == {"total_s": 3.6, "dynamo_s": 2.0, "aot_autograd_s": 1.6, "backend_s": 0.0}
    snap = {"graphs": 0, "recompile_limit_hit": False, "recompiles": 0}
    assert "no graph" in compile_metrics.silent_eager_reason(snap, "compile")
    assert compile_metrics.silent_eager_reason({**snap, "graphs": 1}, "compile") == ""


def test_compile_breakdown_of_an_ahead_of_time_compile() -> None:
    """aot_compile runs no frame compile: its whole compile is dynamo's `fullgraph_capture` event (was
    reported as 0 s compile with 31.6 s of inductor inside it)."""
    aot = {"fullgraph_capture": 39.75, "bytecode_tracing": 1.72, "inductor_compile": 31.58, "backend_compile": 0.001}
    b = compile_metrics.breakdown(aot)  # measured on this machine (qwen3-tiny, 2 x 64)
    assert b == {"total_s": 39.75, "dynamo_s": 1.72, "aot_autograd_s": pytest.approx(6.45), "backend_s": 31.58}
    assert compile_metrics.breakdown({"fullgraph_capture": 2.0, "inductor_compile": 5.0})["backend_s"] == 2.0


def _entry(status: str, ttfs: float, step: float) -> dict:
    return {"status": status, "ttfs_s": ttfs, "step_s": step}


def test_fast_start_advice_is_measured() -> None:
    rows = [
        ("eager", _entry("pass", 2.0, 1.0)),
        ("compile (cold cache)", _entry("pass", 40.0, 0.5)),
        ("compile (warm cache)", _entry("pass", 4.0, 0.5)),
        ("regional (cold cache)", _entry("fail_numeric", 1.0, 0.1)),
    ]
    fs = summary.fast_start(rows)
    assert fs is not None and fs["entry"] == "eager" and fs["fastest_steady"] == "compile (cold cache)"
    assert fs["steady_cost_vs_fastest"] == pytest.approx(2.0)
    assert fs["break_even_steps"] == 76  # (40 - 2) / (1.0 - 0.5)
    assert "20.0x sooner than compile (cold cache)" in fs["advice"]
    assert "regional" not in fs["advice"]  # a failed mode gives no advice
    only = summary.fast_start([("compile (warm cache)", _entry("pass", 4.0, 0.5))])
    assert only is not None and "fastest steady step too" in only["advice"]
    assert summary.fast_start([("eager", _entry("crash", 0, 0))]) is None


def test_preset_that_fits_uses_the_memory_estimate() -> None:
    from bringup.models.lm import PRESETS, QWEN3_COMMON

    est = {n: summary.training_bytes({**QWEN3_COMMON, **PRESETS[n]}, 2, 2048) for n in PRESETS}
    assert est["qwen3-tiny"] < est["qwen3-0.6b"] < est["qwen3-1.7b"] < est["qwen3-4b"] < est["qwen3-8b"]
    assert 8 * 8.19e9 < est["qwen3-8b"] < 141e9 * 0.8  # an 8B bf16 AdamW run fits one H200 at batch 2 x 2048
    assert summary.preset_that_fits(CPU, 2, 2048) == "qwen3-0.6b"  # cpu: total memory unknown


def test_summary_entry_from_a_result() -> None:
    spec = TrainSpec(mode="compile", cache="cold", steps=3)
    r = CaseResult.for_case(train.plan(spec, ("compile",), ("cold",))[0], Status.PASS)
    r.metric("ttfs_s", 10.0)
    r.metric("step_s", 0.5)
    r.metric("peak_mem_bytes", 1e9)
    r.series["loss"] = [(1, 8.0), (2, 7.5), (3, 7.0)]
    e = summary.entry(r)
    assert e["cache"] == "cold" and e["ttfs_s"] == 10.0 and e["peak_mem_bytes"] == 10**9
    assert e["loss"] == [8.0, 7.5, 7.0] and e["mfu"] is None
