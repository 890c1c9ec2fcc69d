"""Dynamic shapes in `bringup train`: a schedule of sequence lengths (--seqs) and the dynamic-shape setting
of the compiled arms (--dynamic auto,on,off), planned, measured and shown.

The claim a user reads off these arms is "how many recompiles, and at which steps": the end-to-end test
shows the count is not a constant (off recompiles per new length, on never, auto once) on real dynamo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.errors import BadInput
from bringup.train import artifact
from bringup.train import suite as train
from bringup.train.loop import TrainOutcome
from bringup.train.spec import TrainSpec
from tests.train.test_train_units import CPU, _args


def test_every_compiled_arm_runs_once_per_dynamic_setting() -> None:
    cases = train.build_cases(_args(modes="eager,compile", dynamic="off,auto,on", steps=4), CPU)
    assert [c.name for c in cases] == ["eager", "compile-cold", "compile-cold-dynamic-on", "compile-cold-dynamic-off"]
    specs = [TrainSpec.from_params(c.params) for c in cases]
    assert [s.compile_dynamic for s in specs[1:]] == [None, True, False]
    assert len({c.case_id for c in cases}) == 4 and len({s.cache_key for s in specs[1:]}) == 3
    assert len({s.reference_key for s in specs}) == 1  # one loss curve: dynamic shapes change no number
    # the default plans exactly what it planned before these fields existed (case ids, --resume)
    assert "dynamic" not in TrainSpec(mode="compile").params() and "seqs" not in TrainSpec().params()


def test_a_schedule_sets_seq_and_a_warmup_that_covers_every_length() -> None:
    (c,) = [c for c in train.build_cases(_args(modes="eager", seqs="64,48,64,32", steps=8), CPU)]
    s = TrainSpec.from_params(c.params)
    assert s.seqs == (64, 48, 64, 32) and s.seq == 64 and s.warmup == 4  # 32 is first met at step 4
    assert [s.seq_at(i) for i in range(1, 7)] == [64, 48, 64, 32, 64, 48]
    assert s.tokens_at(4) == s.batch * 32 and s.tokens_per_step == s.batch * 64
    short = TrainSpec.from_params(train.build_cases(_args(modes="eager", seqs="64,48,32", steps=3), CPU)[0].params)
    assert short.warmup == 2  # capped: one steady step must remain


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"seqs": "64,x"}, "bad --seqs"),
        ({"seqs": "64,0"}, "bad --seqs"),
        ({"seqs": ","}, "bad --seqs"),
        ({"seqs": "64,32", "seq": 32}, "longest length (64)"),
        ({"dynamic": "maybe"}, "bad --dynamic"),
        ({"flops_only": True, "dynamic": "on"}, "--dynamic"),
    ],
)
def test_bad_dynamic_options_are_one_line(kw: dict, needle: str) -> None:
    with pytest.raises(BadInput) as e:
        train.build_cases(_args(steps=4, **kw), CPU)
    assert needle in str(e.value) and "\n" not in str(e.value)


def _outcome(step_s: list[float], fpt: dict[int, int]) -> TrainOutcome:
    return TrainOutcome(
        losses=[1.0] * len(step_s),
        step_s=step_s,
        setup_s=1.0,
        params=1,
        flops_per_token=fpt[64],
        peak_mem_bytes=None,
        first={},
        final={},
        flops_per_token_at=fpt,
    )


def test_the_steady_window_of_a_schedule_counts_its_own_tokens_and_flops() -> None:
    spec = TrainSpec(batch=2, seq=64, seqs=(64, 32), steps=6, warmup=2)
    out = _outcome([9.0, 5.0, 0.4, 0.2, 0.4, 0.2], {64: 100, 32: 80})
    step, tok_s, flop_s = out.window(spec)
    assert step == pytest.approx(0.3) and tok_s == pytest.approx((128 + 64 + 128 + 64) / 1.2)
    assert flop_s == pytest.approx((128 * 100 + 64 * 80) * 2 / 1.2)
    plain = TrainSpec(batch=2, seq=64, steps=6, warmup=2)  # one length: the median step, as always
    step, tok_s, flop_s = _outcome([9.0, 5.0, 0.4, 0.2, 0.4, 0.3], {64: 100}).window(plain)
    assert step == pytest.approx(0.35) and tok_s == pytest.approx(128 / 0.35) and flop_s == pytest.approx(100 * tok_s)


def test_an_artifact_for_another_dynamic_setting_or_schedule_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "a.bin"
    made = TrainSpec(mode="compile", dynamic="off", seqs=(64, 32), seq=64)
    artifact.write(p, artifact.header_for(made, "cpu", artifact.KIND_MEGA), b"x")
    assert artifact.check(p, made.with_(cache="artifact"), "cpu")
    for other, named in ((made.with_(dynamic="auto"), "dynamic 'off'"), (made.with_(seqs=()), "seqs [64, 32]")):
        with pytest.raises(BadInput) as e:
            artifact.check(p, other, "cpu")
        assert named in str(e.value) and "\n" not in str(e.value)
    old = {
        k: v
        for k, v in artifact.header_for(TrainSpec(mode="compile"), "cpu", artifact.KIND_MEGA).items()
        if k not in ("dynamic", "seqs")
    }  # a file made before these keys: their defaults
    artifact.write(p, old, b"x")
    assert artifact.check(p, TrainSpec(mode="compile"), "cpu")


def _schedule_run(cli, tmp_path: Path, modes: str) -> dict[str, dict]:
    p = cli(
        "--device",
        "cpu",
        "train",
        "--model",
        "qwen3-tiny",
        "--override",
        "num_hidden_layers=1",
        "--batch",
        "1",
        "--seqs",
        "32,24,16",
        "--steps",
        "5",
        "--modes",
        modes,
        "--dynamic",
        "auto,on,off",
        "--compile-backend",
        "aot_eager",
        "--json",
        "o.json",
        timeout=900,
    )
    assert p.returncode in (0, 1), p.stdout[-3000:] + p.stderr[-3000:]
    return {c["name"]: c for c in json.loads((tmp_path / "o.json").read_text())["cases"]}


def test_recompiles_per_dynamic_setting_on_a_schedule(cli, tmp_path: Path) -> None:
    """Three lengths, each compiled arm a fresh worker (aot_eager: dynamo's recompiles are the backend's
    business, and this one compiles in seconds): off compiles a graph per new length (steps 2 and 3),
    on compiles once, auto recompiles once (step 2, dynamic from then on)."""
    rows = _schedule_run(cli, tmp_path, "eager,compile")
    for name in ("eager", "compile-cold", "compile-cold-dynamic-on", "compile-cold-dynamic-off"):
        assert rows[name]["status"] == "pass", (name, rows[name]["reason"])
    assert set(rows["compile-cold-dynamic-off"]["recompiled_at"]) == {"2", "3"}
    assert rows["compile-cold-dynamic-off"]["recompiles"] == 2
    assert rows["compile-cold-dynamic-on"]["recompiled_at"] == {} and rows["compile-cold-dynamic-on"]["recompiles"] == 0
    assert set(rows["compile-cold"]["recompiled_at"]) == {"2"} and rows["compile-cold"]["recompiles"] == 1
    assert rows["eager"]["tokens_per_s"] > 0 and rows["compile-cold"]["loss_check"]


@pytest.mark.slow
def test_an_aot_function_serves_a_schedule_only_with_dynamic_shapes(cli, tmp_path: Path) -> None:
    """Nothing recompiles an AOT-compiled function: compiled for one shape it cannot serve the next
    (`unsupported`, named); compiled with dynamic shapes it trains the whole schedule."""
    rows = _schedule_run(cli, tmp_path, "eager,aot")
    assert rows["aot-cold-dynamic-on"]["status"] == "pass", rows["aot-cold-dynamic-on"]["reason"]
    for name in ("aot-cold", "aot-cold-dynamic-off"):
        assert rows[name]["status"] == "unsupported", rows[name]
        assert "does not serve input_ids of shape (1, 24)" in rows[name]["reason"]
