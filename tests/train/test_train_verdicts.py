"""The train verdicts without training: how checks combine into a status, what a compiled mode with no
valid reference becomes, how a broken tie is named; and the tying helper itself on cpu."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from bringup.case import CaseResult, Status
from bringup.device import Device
from bringup.models import tying
from bringup.precision import PRECISIONS
from bringup.train import suite
from bringup.train.reference import RefCheck, plan
from bringup.train.spec import TrainSpec


def test_verdict_precedence_and_reference() -> None:
    assert suite.verdict([]) == (Status.PASS, "")
    assert suite.verdict([(Status.REF_FAIL, "no ref")]) == (Status.REF_FAIL, "no ref")
    st, why = suite.verdict([(Status.REF_FAIL, "no ref"), (Status.FAIL_NUMERIC, "loss not finite")])
    assert st is Status.FAIL_NUMERIC and why == "no ref; loss not finite"
    assert suite.verdict([(Status.REF_FAIL, "a"), (Status.OOM, "b")])[0] is Status.OOM  # never lost as pass
    assert suite.verdict([(Status.FALLBACK, "a"), (Status.ERROR, "b")])[0] is Status.ERROR
    st, why = suite.verdict([], "tying broken by .to(x)")
    assert st is Status.PASS and why == "tying broken by .to(x)"


def test_compiled_mode_with_nproc_and_no_eager_case_has_no_reference(tmp_path: Path) -> None:
    """--nproc 2, no eager case in the run (or one that failed its cpu check: it saves no curve)."""
    spec = TrainSpec(mode="compile", cache="cold", nproc=2)
    ref, why = suite._eager_reference(spec, SimpleNamespace(run_dir=tmp_path))
    assert ref is None and why.startswith("none:")
    st, reason = suite.verdict([(Status.REF_FAIL, f"no valid loss reference: {why.removeprefix('none: ')}")])
    assert st is Status.REF_FAIL and "no eager case" in reason
    suite._save_reference(spec.with_(mode="eager", cache="none"), SimpleNamespace(run_dir=tmp_path), [1.0, 0.5])
    ref, why = suite._eager_reference(spec, SimpleNamespace(run_dir=tmp_path))
    assert ref == [1.0, 0.5] and why.startswith("eager case")


def test_eager_check_outcomes_become_statuses() -> None:
    r = CaseResult(case_id="x", suite="train", name="eager", status=Status.PASS)
    cpu = Device("cpu")
    assert suite._record_check(r, RefCheck(True, "cpu fp64", "ok", 1e-6, 50), cpu) == []
    bad = suite._record_check(r, RefCheck(False, "cpu fp64", "3/50 tensors off", 1e-2, 50), cpu)
    assert bad == [(Status.FAIL_NUMERIC, "eager vs cpu fp64: 3/50 tensors off")]
    none = suite._record_check(r, RefCheck(None, "none: too big", "no cpu reference: too big"), cpu)
    assert none == [(Status.REF_FAIL, "no cpu reference: too big")]
    tied = RefCheck(True, "cpu fp64", "ok", 1e-6, 50, broken_ties=[["transformer.wte.weight", "lm_head.weight"]])
    assert suite._record_check(r, tied, cpu) == []
    assert r.metrics["broken_ties"].value == 1 and "tie_weights()" in r.fields["tying_finding"]
    assert "transformer.wte.weight = lm_head.weight" in r.fields["tying_finding"]


def test_reference_precision_by_size() -> None:
    """float64 where the cpu run fits; a Qwen3 preset past the budget is checked shrunk."""
    assert plan(TrainSpec(model="qwen3-tiny", batch=2, seq=64))[1:] == (PRECISIONS["fp64"], "cpu fp64")
    overrides, prec, what = plan(TrainSpec(model="qwen3-32b", batch=2, seq=2048))
    assert prec is not None and "shrunk" in what and "num_hidden_layers=2" in overrides


def _gpt2() -> torch.nn.Module:
    from transformers import AutoModelForCausalLM, GPT2Config

    cfg = GPT2Config(n_embd=32, n_head=2, n_layer=1, vocab_size=64, n_positions=32, bos_token_id=0, eos_token_id=0)
    return AutoModelForCausalLM.from_config(cfg)


def test_tying_move_names_a_split_tie_and_reties() -> None:
    """A device whose tensors can't be shallow-copied makes Module.to create new Parameters; on cpu the
    same happens with torch.__future__'s overwrite flag, so the helper is checked here cheaply (the
    real device: tests/testdev/test_testdev_tying.py)."""
    m = _gpt2()
    assert tying.tied_groups(m) == [["transformer.wte.weight", "lm_head.weight"]]
    assert tying.move(m, "cpu", torch.float64) == []  # cpu keeps ties
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        plain = _gpt2()
        groups = tying.tied_groups(plain)
        plain.to(torch.float32)
        assert tying.split(plain, groups) == groups  # what happens without the helper
        m = _gpt2()
        assert tying.move(m, "cpu", torch.float32) == [["transformer.wte.weight", "lm_head.weight"]]
        assert m.lm_head.weight is m.transformer.wte.weight  # re-tied
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)
