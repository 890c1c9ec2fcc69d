"""The zoo's module-level verdict (checks/module_check.py) beside its whole-model one: step 0 of the
eager run on the device is recorded module by module; each module is replayed on the device (eager),
and compiled on its own with the run's backend (the compiled run's verdict), then judged against
float64 and the trusted run on the same inputs. On cpu the eager run IS the trusted run: it is
recorded (its inputs feed the compiled replays) but not judged against itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from bringup.case import CaseResult, Status
from bringup.checks.errors import first_line
from bringup.checks.module_check import ModuleCheck
from bringup.device.adapter import LAZY
from bringup.precision import Precision
from bringup.zoo.steps import experts_impl
from bringup.zoo.steps import fail as _fail

if TYPE_CHECKING:
    from bringup.device import Device

# `--module-check`: auto by default (None in a case's params): on for the tiny models (the check replays
# every module three times and compiles each class of module once more for the compiled run: docs/zoo.md
# "Module check" has the cost), except on a lazy device, where each module's replay is a graph of its own
# to compile: PyTorch/XLA on PJRT's cpu client ran gpt2's case past 600 s with it, 190 s without (measured
# 2026-12-02); `--module-check on` runs it there too.
DEFAULT: bool | None = None
LAZY_NOTE = "module check off: auto on a lazy device (each module's replay is its own graph compile); --module-check on"


def from_arg(value: str | None) -> bool | None:
    """`--module-check on|off|auto` -> True, False, None (auto: decided on the device, `enabled`)."""
    value = value or "auto"
    return None if value == "auto" else value == "on"


def enabled(value: bool | None, device: Device) -> bool:
    """Whether a case runs the module check on `device` (a bringup Device)."""
    if value is not None:
        return bool(value)

    return device.adapter.execution != LAZY


def experts_for(module: torch.nn.Module, dtype: torch.dtype) -> None:
    """A cpu copy about to replay: float64 MoE layers take the eager expert loop (zoo/steps.py)."""

    experts_impl(module, "eager" if dtype == torch.float64 else None)


def new_check(model: torch.nn.Module, prec: Precision, device: torch.device) -> Any:

    return ModuleCheck(model, prec, device, prepare_reference=experts_for)


def judge(r: CaseResult, label: str, rep: Any) -> None:
    """Record a ModuleReport on the case; a module off fails it (fail_numeric, reason "<label>: module check ...")."""

    r.fields[f"{label}_modules"] = rep.fields()
    r.fields["module_check_s"] = round(float(r.fields.get("module_check_s") or 0.0) + rep.seconds, 3)
    r.fields["modules_judged"] = max(int(r.fields.get("modules_judged") or 0), len(rep.judged))
    if not rep.ok:
        _fail(r, Status.FAIL_NUMERIC, f"{label}: {rep.summary()}")


def judge_compiled(r: CaseResult, mc: Any, backend: str, ctx: Any, budget_s: float) -> None:
    """The compiled run's module check: every recorded module compiled alone with `backend` on the device."""

    if mc is None or not mc.recorded:
        r.fields["compiled_modules"] = {"ok": None, "why": "no eager recording to replay (the eager run failed)"}
        return
    try:
        with ctx.phase("compile", budget_s=budget_s):
            rep = mc.judge_compiled(backend)
    except Exception as e:  # the check itself could not run: said, the whole-model verdict stands
        r.fields["compiled_modules"] = {"ok": None, "why": f"module check raised {first_line(e)}"}
        return
    judge(r, "compiled", rep)
