"""A low-precision run keeps in fp32 what transformers keeps in fp32 when a job loads the model in that dtype
(zoo/steps.py: fp32_kept, _load_init).

`from_pretrained(dtype=torch.bfloat16)` keeps a model's `_keep_in_fp32_modules_strict` (36 causal-LM types: MoE
routers and their correction biases, inkling2's convolutions) in fp32; the zoo cast them to bf16, so it ran a model
no job runs, and inkling2's router (`F.linear(hidden.float(), self.weight)`) raised: a harness `error` in bf16. The
run now holds them in fp32, and the float64 reference starts from their fp32 values, not from a bf16 rounding of
them. The kept tensors are the run's own copies: a run trains them in place, and one that trained the start state
itself made every later run start elsewhere (the compiled arm failed by 7x the trusted error, on a backend that gives
eager's bits)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from bringup.models.kept_fp32 import floating_state, fp32_kept
from bringup.zoo.build import build_model
from bringup.zoo.spec import ZooSpec
from bringup.zoo.steps import RunHow, _load_init, train_run

CPU = torch.device("cpu")


def _built() -> object:
    # deepseek_v3: its router weight (`gate.weight`) and correction bias are kept fp32 in bf16 and fp16
    return build_model(ZooSpec(source="hf", model="deepseek_v3", task="causal-lm", inputs="text", dtype="bf16"))


def _floats(model: torch.nn.Module) -> dict[str, torch.dtype]:
    return {n: t.dtype for n, t in floating_state(model)}


def test_the_kept_tensors_are_those_transformers_loads_in_fp32(tmp_path: Path) -> None:
    built = _built()
    model = built.model  # type: ignore[attr-defined]
    kept = fp32_kept(model, torch.bfloat16)
    assert any(n.endswith("gate.weight") for n in kept) and any("e_score_correction_bias" in n for n in kept)
    assert fp32_kept(model, torch.float32) == frozenset() and fp32_kept(torch.nn.Linear(2, 2), torch.bfloat16) == set()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    # what the dtype plan decides: the parameters and persistent buffers (the loader also leaves the non-persistent
    # rotary frequencies fp32, as computed at init; a job that casts with `.to(bf16)` casts them, and so does the zoo)
    saved = set(loaded.state_dict())
    assert {n for n, d in _floats(loaded).items() if d == torch.float32 and n in saved} == kept


def test_a_bf16_run_holds_them_in_fp32_and_leaves_the_start_state_alone() -> None:
    built = _built()
    model = built.model  # type: ignore[attr-defined]
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    start = {k: v.clone() for k, v in init.items()}
    batches = [built.make_batch(i) for i in range(2)]  # type: ignore[attr-defined]
    runs = [train_run(built, init, batches, CPU, "bf16", RunHow()) for _ in range(2)]
    kept = fp32_kept(model, torch.bfloat16)
    assert kept and all(d == (torch.float32 if n in kept else torch.bfloat16) for n, d in _floats(model).items())
    assert all(torch.equal(init[k], start[k]) for k in init), "a run trained the start state in place"
    assert runs[0].curve == runs[1].curve
    assert all(torch.equal(runs[0].tensors[n], runs[1].tensors[n]) for n in runs[0].tensors)


def test_the_reference_starts_from_their_fp32_values() -> None:
    built = _built()
    model = built.model  # type: ignore[attr-defined]
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    kept = fp32_kept(model, torch.bfloat16)
    ref = _load_init(model, init, CPU, torch.float64, torch.bfloat16)
    state = dict(ref.state_dict())
    for n in kept:
        assert torch.equal(state[n], init[n].double())
    rounded = [n for n in init if n not in kept and init[n].is_floating_point()]
    assert all(torch.equal(state[n], init[n].bfloat16().double()) for n in rounded)
    assert any(not torch.equal(state[n], init[n].double()) for n in rounded)


def test_a_full_size_build_from_a_config_draws_them_in_fp32() -> None:
    """hub/build.py's seeded build (no cached weights: `zoo --size full`) holds them in fp32 as from_pretrained
    would, the rest in the run dtype."""
    from bringup.hub.build import build_full

    data = _built().model.config.to_dict()  # type: ignore[attr-defined]
    model, _, how = build_full(data, "t", CPU, torch.bfloat16, seed=1)
    kept = fp32_kept(model, torch.bfloat16)
    assert "seeded init" in how and kept
    assert all(
        d == (torch.float32 if n in kept else torch.bfloat16) for n, d in _floats(model).items() if ".rotary" not in n
    )
    assert all(bool(p.float().abs().sum() > 0) for n, p in model.named_parameters() if n in kept and "weight" in n)
