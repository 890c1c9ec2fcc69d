"""The eager mode's numbers against a cpu reference: what makes an eager train case more than "the loss
is finite", and so what makes the compiled modes' loss band (numerics.py, around eager) mean anything.

What is compared with what: the same model (same seed, built on cpu and then moved, so both sides
start from the same weights), the same first REF_STEPS batches (DATA_SEED) fed like a training job's (ids
by rank-frequency, a padded microbatch with its attention_mask and a packed one with restarting
position_ids: bringup/models/batches.py, check_batches), the same AdamW, run eager (a) on the device in the
case's precision and (b) on cpu in the reference precision:
  - the loss at each of the REF_STEPS steps (`loss.step<i>`: the optimizer's updates included),
  - every parameter's gradient after the first backward (`grad.<name>`),
judged by `bringup.checks.parity.parity` in the case's compute dtype (its tolerance table, its bias
rule; nothing of ours on top). Off cpu and in a low precision, a third run, cpu in the case's own
precision, is parity's trusted baseline (how far a correct run at that precision is from the
reference); on cpu that run IS the device run, so a low-precision cpu run is judged as parity's trusted
run (gross errors only: rel_rmse over `gross`, non-finite, missing tensors), and fp32 in full.

Off cpu, the first step is also judged module by module (checks/module_check.py): each module of the
first block and the modules outside the stack of blocks (embeddings, final norm, head) replayed on the
device, forward and backward, on the inputs the device gave it, against float64 and cpu eager at the
case's precision on the same inputs. A bend of one function (a sharper activation, a wrong softmax
temperature) that the whole-model comparison lets through in bf16 is caught there. On cpu the device
run is the trusted run: nothing to replay it against.

Reference precision: float64 (rounding ~1e-16: the error measured is all the device's) when the cpu
run fits in REF_BYTES; else fp32 (a correct fp32 run is ~1e-6 off float64, far below any bound the
low precisions have, but an fp32 case then compares fp32 with fp32: the size check loses its margin and
the reason says so); else, for a Qwen3 preset, the same architecture shrunk (SHRINK: same code path
and op mix, a size a cpu reference can afford); else no reference (`ref_fail`, reason given).
The check runs on at most REF_TOKENS tokens (batch x seq cut down): enough for every op, cheap in
float64 on cpu; dropout is off in both runs (each device draws its own masks).

Tied parameters: the device model is moved with models.tying.move, which names ties the move split
(a finding about the device) and re-ties the model, so a broken tie is reported as such and the
gradients are compared on the model the user meant.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from bringup.checks.errors import first_line
from bringup.checks.module_check import ModuleCheck
from bringup.checks.module_replay import Dither
from bringup.checks.parity import TWIN_DITHER, exact_zeros, parity
from bringup.device import Device
from bringup.models import batches, lm, tying
from bringup.models import tiny as mz
from bringup.precision import PRECISIONS, Precision, parse_precision
from bringup.train.loop import DATA_SEED
from bringup.train.spec import TrainSpec

REF_STEPS = 3  # steps compared (loss per step); gradients at the first
REF_TOKENS = 1024  # batch x seq of the check at most (seq kept up to 256, then the batch cut)
REF_BYTES = 8 << 30  # a cpu reference run may use this much (or a quarter of the host's memory, if less)
MODULE_BLOCKS = 1  # the module check judges the first block of the stack (every block runs the same code)
# Qwen3 presets past REF_BYTES are checked at this size: same architecture and code path.
SHRINK = (
    "num_hidden_layers=2",
    "hidden_size=256",
    "intermediate_size=768",
    "num_attention_heads=4",
    "num_key_value_heads=2",
    "head_dim=64",
    "vocab_size=4096",
)


@dataclass
class RefCheck:
    ok: bool | None  # None: no reference (nothing judged)
    reference: str  # "cpu fp64" | "cpu fp32 (...)" | "none: why"
    summary: str
    max_rel_err: float | None = None
    tensors: int = 0
    model: str = ""  # what was checked, when not the case's model as is
    broken_ties: list[list[str]] = field(default_factory=list)
    modules: dict[str, Any] | None = None  # the module check's ModuleReport.fields() (None: not run)

    def fields(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "ok": self.ok,
            "summary": self.summary,
            "tensors": self.tensors,
            "model": self.model,
            "max_rel_err": self.max_rel_err,
            "modules": self.modules,
        }


def host_budget() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return REF_BYTES
    return min(REF_BYTES, total // 4)


def check_shape(spec: TrainSpec) -> tuple[int, int]:
    seq = min(spec.seq, 256)
    return max(1, min(spec.batch, REF_TOKENS // seq)), seq


def run_bytes(model: torch.nn.Module, batch: int, seq: int, itemsize: int) -> int:
    """Rough cpu footprint of a reference run: weights, grads and two AdamW moments, plus activations
    (~24 values per layer x token x hidden, and the logits with their softmax and grad)."""
    params, _ = lm.param_counts(model)
    cfg = getattr(model, "config", None)
    hidden = int(getattr(cfg, "hidden_size", 0) or 0)
    layers = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    vocab = int(getattr(cfg, "vocab_size", 0) or 0)
    return itemsize * (4 * params + batch * seq * (24 * hidden * layers + 3 * vocab))


def plan(spec: TrainSpec) -> tuple[list[str], Precision | None, str]:
    """(overrides to build with, reference precision or None, what the reference is / why none)."""
    if lm.is_user_fn(spec.model):
        return list(spec.overrides), PRECISIONS["fp64"], "cpu fp64"  # a user model: can't size it first
    batch, seq = check_shape(spec)
    budget = host_budget()
    overrides = list(spec.overrides)
    for attempt in range(2):
        meta = lm.build_model(spec.model, overrides, device="meta")
        n64, n32 = run_bytes(meta, batch, seq, 8), run_bytes(meta, batch, seq, 4)
        note = f" (shrunk: {', '.join(SHRINK)})" if attempt else ""
        if n64 <= budget:
            return overrides, PRECISIONS["fp64"], "cpu fp64" + note
        if n32 <= budget:
            return (
                overrides,
                PRECISIONS["fp32"],
                (
                    f"cpu fp32: float64 needs ~{n64 / 2**30:.1f} GiB, over the "
                    f"{budget / 2**30:.1f} GiB a reference may take{note}"
                ),
            )
        if attempt or spec.model not in lm.PRESETS:
            break
        overrides = [*overrides, *SHRINK]
    return (
        overrides,
        None,
        (
            f"none: a cpu reference of {spec.model} needs ~{n32 / 2**30:.1f} GiB even in fp32 "
            f"(over {budget / 2**30:.1f} GiB)"
        ),
    )


def _no_dropout(model: torch.nn.Module) -> None:
    """Dropout draws its masks from each device's own generator: the two runs would train different
    functions. The check compares the deterministic part (gpt2's configs default to 0.1)."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0
        if isinstance(getattr(m, "attention_dropout", None), float):
            m.attention_dropout = 0.0  # type: ignore[assignment]  # a float attribute


def first_steps(
    spec: TrainSpec,
    overrides: list[str],
    device: torch.device,
    prec: Precision,
    round_to: torch.dtype | None = None,
    module_check: Any = None,
    twin: bool = False,
) -> tuple[dict[str, torch.Tensor], list[list[str]]]:
    """REF_STEPS eager steps of the spec's model, built on cpu with its seed and moved to `device` in
    `prec` (weights first rounded through `round_to`: the reference starts from exactly the weights a
    bf16 run holds); {loss.step<i>, grad.<name> (first step)} on cpu, and the ties the move split.
    `module_check(model) -> ModuleCheck`: the first step is recorded (and replayed on the device). `twin`: the
    first step alone, every op result perturbed by parity.TWIN_DITHER (which grads are zero in exact arithmetic:
    parity.exact_zeros)."""
    cpu = torch.device("cpu")
    model = lm.build_model(spec.model, overrides, cpu, torch.float32, seed=spec.seed)
    if round_to is not None and round_to != prec.param_dtype:
        model.to(round_to)
    broken = tying.move(model, device, prec.param_dtype)
    model.train()
    _no_dropout(model)
    batch, seq = check_shape(spec)
    data, step = check_batches(model, batch, seq, DATA_SEED)
    if twin:
        data = data[:1]
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    scaler = prec.grad_scaler(device.type)
    out: dict[str, torch.Tensor] = {}
    old = torch.get_default_dtype()
    if prec.param_dtype == torch.float64:  # masks and tables some models build in the default dtype
        torch.set_default_dtype(torch.float64)
    mc = module_check(model) if module_check is not None else None
    try:
        for i, b in enumerate(data):
            b = batches.to_device(b, device)
            with mc.recording() if mc is not None and i == 0 else contextlib.nullcontext(), _twin(twin):
                with prec.autocast(device.type):
                    loss = step(model, b)
                (scaler.scale(loss) if scaler is not None else loss).backward()
            if scaler is not None:
                scaler.unscale_(opt)
            # one graph for the step on a lazy device, before ~50 reads would each cut (and compile) their own
            Device(device.type, device.index).materialize(loss, model)
            out[f"loss.step{i + 1}"] = loss.detach().to(cpu, torch.float64).reshape(())
            if i == 0:
                for name, p in model.named_parameters():
                    if p.grad is not None:
                        out[f"grad.{name}"] = p.grad.detach().to(cpu, torch.float64).clone()
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
    finally:
        torch.set_default_dtype(old)
    return out, broken


def _twin(on: bool) -> Any:
    return (
        Dither(TWIN_DITHER, torch.Generator().manual_seed(4242), every_dtype=True) if on else contextlib.nullcontext()
    )


def check_batches(model: torch.nn.Module, batch: int, seq: int, seed: int) -> tuple[list[Any], Any]:
    """The check's REF_STEPS step batches and how a step computes its loss. A transformers model is fed like a
    training job (bringup/models/batches.py): ids by rank-frequency, a padded microbatch (left and right padding,
    attention_mask) and a packed one (documents with restarting position_ids), `batch` rows split between them;
    the loss is their mean. A user's own module (no config) gets the learnable token chain of the loop."""
    if getattr(model, "config", None) is None:
        data = list(lm.synthetic_batches(lm.vocab_size(model), batch, seq, REF_STEPS, seed, learnable=True))
        return data, lambda m, tokens: m(input_ids=tokens, labels=tokens).loss
    make = mz.hf_batches(model, "causal-lm", mz.BatchSpec(batch=max(1, batch // 2), seq=seq), seed)
    return [make(i) for i in range(REF_STEPS)], lambda m, b: mz.hf_loss(mz.call_kwargs(m, b), b)


def check_eager(spec: TrainSpec, device: Device) -> RefCheck:
    """The device's eager first steps vs the cpu reference (module doc). Raises what the device run
    raises; a reference that itself fails gives ok=None with the reason."""
    prec = parse_precision(spec.dtype)
    overrides, ref_prec, what = plan(spec)
    shrunk = "" if overrides == list(spec.overrides) else f"{spec.model} with {', '.join(SHRINK)}"
    if ref_prec is None:
        return RefCheck(None, what, f"no cpu reference: {what.removeprefix('none: ')}")
    checks: list[Any] = []

    def module_check(model: torch.nn.Module) -> Any:
        checks.append(ModuleCheck(model, prec, device.torch_device, blocks=MODULE_BLOCKS))
        return checks[-1]

    got, broken = first_steps(
        spec, overrides, device.torch_device, prec, module_check=None if device.is_cpu else module_check
    )
    try:
        ref, _ = first_steps(spec, overrides, torch.device("cpu"), ref_prec, round_to=prec.param_dtype)
        twin, _ = first_steps(spec, overrides, torch.device("cpu"), ref_prec, round_to=prec.param_dtype, twin=True)
        base = None
        if not device.is_cpu and prec.low:  # a trusted run at the case's precision (module doc)
            base, _ = first_steps(spec, overrides, torch.device("cpu"), prec)
    except Exception as e:
        return RefCheck(
            None,
            f"none: the cpu reference failed: {first_line(e)}",
            "the cpu reference failed",
            model=shrunk,
            broken_ties=broken,
        )
    # On cpu a low-precision run IS the trusted run at its precision: judged for gross errors only, as the
    # zoo judges cpu eager (parity's fixed bf16 bias bound flags correct cpu bf16 runs at 1024 tokens).
    trusted = device.is_cpu and prec.low
    zeros = exact_zeros({k: v for k, v in ref.items() if k.startswith("grad.")}, twin)
    rep = parity(got, ref, prec.compute_dtype, baseline=base, trusted=trusted, zeros=zeros)
    ok, summary, modules = rep.ok, rep.summary(), None
    if checks and checks[0].recorded:
        mrep = checks[0].judge_eager()
        modules = mrep.fields()
        if not mrep.ok:
            ok, summary = False, (mrep.summary() if rep.ok else f"{summary}; {mrep.summary()}")
    return RefCheck(ok, what, summary, rep.max_rel_err, len(rep.tensors), shrunk, broken, modules)
