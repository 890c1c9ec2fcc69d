"""smoke: the smallest honest device check: a GEMM and one training step of a tiny MLP, each against a
float64 CPU reference. It runs first in `bringup run`, so a broken device shows up in seconds.

Each result is judged by `checks.parity` against float64 *and* against a trusted run at the same
precision (the same computation on cpu in the run dtype): in bf16/fp16 the device may be as far from
float64 as cpu is (times the parity table's multiplier), not as far as a fixed floor allows, so a
matmul that accumulates in bf16 (2% off at K=256, where cpu's bf16 GEMM accumulates in fp32) or a 1%
activation error fails. Off cpu the MLP step is also judged module by module (checks/module_check.py):
each Linear, GELU and Tanh replayed on the device, forward and backward, on the inputs the device gave
it, against float64 and cpu at the same precision on the same inputs: a bent activation (a sharper
gate) that the whole-step comparison lets through in bf16 fails there. Proven on the test device's
numeric faults (tests/testdev/test_testdev_faults.py)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from bringup.api import register_capability, specs
from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.checks.module_check import ModuleCheck
from bringup.checks.parity import parity
from bringup.console import case_table
from bringup.device import Device, dtype_name, parse_dtype
from bringup.options import Options
from bringup.precision import PRECISIONS
from bringup.smoke import args as face  # the torch-free face (cli)
from bringup.smoke.args import DEFAULT_BUDGET_S, SmokeOptions

if TYPE_CHECKING:
    from rich.console import Console


def _cases(dtype: str, budget_s: float = DEFAULT_BUDGET_S) -> list[Case]:
    return [
        Case("smoke", "gemm", {"kind": "gemm", "n": 256, "dtype": dtype}, "bringup.smoke.suite:run_gemm", budget_s),
        Case("smoke", "mlp_step", {"kind": "mlp_step", "dtype": dtype}, "bringup.smoke.suite:run_mlp", budget_s),
    ]


def build_cases(options: Options, device: Device) -> list[Case]:
    opts = options.of(SmokeOptions)
    return _cases(opts.dtype, opts.case_budget)  # the vocabulary's name: the parser's --dtype gave it


def run_cases(device: Device, quick: bool) -> list[Case]:
    return _cases("fp32")


def run_gemm(case: Case, ctx: Any) -> CaseResult:
    n = int(case.params["n"])
    dtype = parse_dtype(case.params["dtype"])
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g, dtype=torch.float64), torch.randn(n, n, generator=g, dtype=torch.float64)
    ref = a @ b
    base = a.to(dtype) @ b.to(dtype)  # the trusted run at the run's precision: cpu
    try:
        got = (a.to(ctx.device.torch_device, dtype) @ b.to(ctx.device.torch_device, dtype)).cpu()
    except Exception as e:
        return CaseResult.for_case(case, classify(e), first_line(e))
    rep = parity({"out": got}, {"out": ref}, dtype, baseline={"out": base})
    r = CaseResult.for_case(case, Status.PASS if rep.ok else Status.FAIL_NUMERIC, "" if rep.ok else rep.summary())
    r.metric("max_abs_err", rep.max_abs_err)
    r.metric("max_rel_err", rep.max_rel_err)
    return r


def _mlp_step(device: torch.device, dtype: torch.dtype, module_check: Any = None) -> dict[str, torch.Tensor]:
    """One SGD step of a 3-layer MLP on fixed data; returns loss, output, grads and updated weights.
    `module_check(model) -> ModuleCheck`: the step's forward and backward are recorded module by module."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8)
    ).to(torch.float64)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 32, generator=g, dtype=torch.float64)
    y = torch.randn(16, 8, generator=g, dtype=torch.float64)
    model = model.to(device=device, dtype=dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mc = module_check(model) if module_check is not None else None
    with mc.recording() if mc is not None else contextlib.nullcontext():
        out = model(x.to(device, dtype))
        loss = torch.nn.functional.mse_loss(out, y.to(device, dtype))
        loss.backward()
    res = {"loss": loss.detach(), "out": out.detach()}
    res |= {f"grad.{k}": p.grad.detach().clone() for k, p in model.named_parameters()}  # type: ignore[union-attr]  # backward ran: all have grads
    opt.step()
    res |= {f"param.{k}": p.detach().clone() for k, p in model.named_parameters()}
    return {k: v.cpu() for k, v in res.items()}


def run_mlp(case: Case, ctx: Any) -> CaseResult:
    dtype = parse_dtype(case.params["dtype"])
    try:
        ref = _mlp_step(torch.device("cpu"), torch.float64)
        base = _mlp_step(torch.device("cpu"), dtype)  # the trusted run at the run's precision
    except Exception as e:
        return CaseResult.for_case(case, Status.REF_FAIL, first_line(e))
    trusted = parity(base, ref, dtype, trusted=True)
    if not trusted.ok:
        return CaseResult.for_case(case, Status.REF_FAIL, f"cpu {dtype_name(dtype)} run itself: {trusted.summary()}")
    checks: list[Any] = []

    def module_check(model: torch.nn.Module) -> Any:
        prec = next(p for p in PRECISIONS.values() if not p.mixed and p.param_dtype == dtype)
        checks.append(ModuleCheck(model, prec, ctx.device.torch_device))
        return checks[-1]

    try:  # on cpu the device run is the trusted run: no module replay to judge against it
        got = _mlp_step(ctx.device.torch_device, dtype, None if ctx.device.is_cpu else module_check)
        mrep = checks[0].judge_eager() if checks and checks[0].recorded else None
    except Exception as e:
        return CaseResult.for_case(case, classify(e), first_line(e))
    rep = parity(got, ref, dtype, baseline=base)
    ok = rep.ok and (mrep is None or mrep.ok)
    whys = [] if rep.ok else [rep.summary()]
    if mrep is not None and not mrep.ok:
        whys.append(mrep.summary())
    why = "; ".join(whys)
    r = CaseResult.for_case(case, Status.PASS if ok else Status.FAIL_NUMERIC, why)
    r.metric("max_abs_err", rep.max_abs_err)
    r.metric("max_rel_err", rep.max_rel_err)
    r.fields["tensors_compared"] = len(rep.tensors)
    if mrep is not None:
        r.fields["modules"] = mrep.fields()
    return r


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    console.print(case_table("smoke", results, ["max_rel_err"]))
    return {}


register_capability(
    face,
    build_cases,
    run_cases,
    summarize,
    title="Smoke",
    metrics=specs("max_abs_err", "max_rel_err"),
)
