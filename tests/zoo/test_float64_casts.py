"""A model whose code casts to fp32 and mixes the result with its weights gets a float64 reference (zoo/run.py:
_float64_run, zoo/steps.py: Float64Casts), not `ref_fail`.

inkling2's router runs `F.linear(hidden.float(), self.weight)` (a weight transformers keeps in fp32 in every dtype);
in the float64 reference the weight is float64 and the cast makes the input fp32: "expected m1 and m2 to have the same
dtype". Both hf-causal inkling2 types were `ref_fail` in the sweep. Such a model's reference now keeps every fp32 cast
at float64, said in its note; every other model's reference is what it was (the bounds were measured on it)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bringup.models.tiny import Built
from bringup.zoo.run import CASTS_NOTE, _casts_note, _float64_run
from bringup.zoo.steps import Float64Casts, RunHow, finite_curve, train_run


class _Fp32Router(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.weight = torch.nn.Parameter(torch.randn(4, 6) * 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.proj(x).float(), self.weight)


class _Plain(_Fp32Router):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.proj(x), self.weight)


def _built(model: torch.nn.Module) -> Built:
    torch.manual_seed(0)
    xs = [torch.randn(3, 6) for _ in range(2)]
    return Built(
        model=model,
        make_batch=lambda i: {"x": xs[i]},
        forward=lambda m, b: m(b["x"]),
        loss=lambda out, b: out.float().pow(2).mean(),
        logits=lambda out: out,
    )


def _run(built: Built) -> tuple[Built, object]:
    init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
    batches = [built.make_batch(i) for i in range(2)]
    return _float64_run(built, init, batches, RunHow())


def test_a_model_casting_to_fp32_gets_a_float64_reference_and_says_so() -> None:
    torch.manual_seed(0)
    built = _built(_Fp32Router())
    init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
    with pytest.raises(RuntimeError, match="dtype"):  # as written, the reference cannot run
        train_run(built, init, [built.make_batch(0)], torch.device("cpu"), torch.float64)
    ran, ref = _run(built)
    assert ran.float64_casts and _casts_note(ran) == CASTS_NOTE
    assert finite_curve(ref.curve) and ref.tensors["logits"].dtype == torch.float64
    assert ref.tensors["grad.weight"].dtype == torch.float64


def test_every_other_reference_is_left_as_it_was() -> None:
    torch.manual_seed(0)
    ran, ref = _run(_built(_Plain()))
    assert not ran.float64_casts and _casts_note(ran) == ""


def test_casts_to_fp32_stay_float64_only_inside_the_mode() -> None:
    x = torch.randn(3, dtype=torch.float64)
    i = torch.arange(3)
    with Float64Casts():
        got = [
            x.float(),
            x.to(torch.float32),
            x.to("cpu", torch.float32),
            x.to(dtype=torch.float32),
            x.type(torch.float32),
            i.float(),
            torch.zeros(2, dtype=torch.float32),
            torch.softmax(x, 0, dtype=torch.float32),
            x.to(torch.bfloat16),
        ]
    assert [t.dtype for t in got] == [torch.float64] * 8 + [torch.bfloat16]
    assert x.float().dtype == torch.float32
