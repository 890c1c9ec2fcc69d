"""`bringup export --format pytorch-tests`: what a PrivateUse1 backend passes to PyTorch's device-generic tests
(`PrivateUse1TestBase.set_test_configs(op_allowlist=..., op_overrides=..., test_exclusions=...)`, PyTorch's
docs/source/accelerator/testing.md), from a run's `bringup ops` cases, as a Python file and its JSON.

    op_allowlist    every OpInfo (its full name, variant included) that works in at least one dtype the run
                    tried: `pass`, or `fallback` (it works, through the CPU fallback: upstream's tests then
                    exercise the CPU kernel, and the file says so in a comment)
    op_overrides    per op: `unittest.skip("bringup: <status>: <reason>")` for each dtype the op does not work in
                    (wrong, not supported, crashed, ...), and, where the device's result is further from cpu's than
                    torch.testing's default tolerance for a working dtype, a `toleranceOverride({dtype: tol(atol,
                    rtol)})` for `TestCommon.test_compare_cpu` (the test that compares a device with cpu, as `ops`
                    does): atol = margin x the smallest atol that passes every value `ops` compared at the default
                    rtol (`error_vs_cpu.atol_needed`, recorded per case), rounded up to two digits; rtol the default
    test_exclusions {}: bringup measures ops, not upstream's test classes (the JSON's `excluded_ops` names each op
                    left out of the allowlist with its reasons)

A dtype `ops` did not try, or where cpu itself cannot run the op (`ref_fail`), gets no entry: upstream's own
dtype lists decide there. The tolerance covers the samples `ops` ran (`--samples`): upstream's tests run more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.store import RunInfo

DEFAULT_MARGIN = 2.0
WORKS = (Status.PASS, Status.FALLBACK)
TORCH_DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
)
COMPARE_TEST = ("TestCommon", "test_compare_cpu")


def round_up(x: float, digits: int = 2) -> float:
    """x rounded up to `digits` significant digits (a tolerance never ends below what was measured)."""
    if x <= 0 or not math.isfinite(x):
        return x
    e = math.floor(math.log10(x)) - digits + 1
    return float(f"{math.ceil(x / 10.0**e - 1e-9)}e{e}")


@dataclass
class OpConfig:
    works: dict[str, str] = field(default_factory=dict)  # dtype -> status (pass | fallback)
    skips: dict[str, str] = field(default_factory=dict)  # dtype -> reason
    tolerances: dict[str, dict[str, float]] = field(default_factory=dict)  # dtype -> atol, rtol, measured
    cases: dict[str, str] = field(default_factory=dict)  # dtype -> case id


@dataclass
class DeviceTestConfigs:
    run: RunInfo
    ops: dict[str, OpConfig]
    margin: float

    @property
    def allowlist(self) -> list[str]:
        return sorted(n for n, c in self.ops.items() if c.works)

    @property
    def excluded(self) -> dict[str, str]:
        return {
            n: "; ".join(f"{d}: {why}" for d, why in sorted(c.skips.items()))
            for n, c in sorted(self.ops.items())
            if not c.works
        }

    def to_json(self) -> dict[str, Any]:
        overrides: dict[str, list[dict[str, Any]]] = {}
        for name in self.allowlist:
            c = self.ops[name]
            entries: list[dict[str, Any]] = [
                {"kind": "skip", "dtypes": [d], "reason": why} for d, why in sorted(c.skips.items())
            ]
            entries += [
                {"kind": "tolerance", "cls_name": COMPARE_TEST[0], "test_name": COMPARE_TEST[1], "dtype": d, **t}
                for d, t in sorted(c.tolerances.items())
            ]
            if entries:
                overrides[name] = entries
        return {
            "format": "bringup-pytorch-tests",
            "version": 1,
            "run_id": self.run.run_id,
            "device": self.run.device,
            "torch": self.run.torch_version,
            "margin": self.margin,
            "op_allowlist": self.allowlist,
            "op_overrides": overrides,
            "test_exclusions": {},
            "excluded_ops": self.excluded,
            "fallback_only": {
                n: sorted(d for d, s in c.works.items() if s == "fallback")
                for n, c in sorted(self.ops.items())
                if "fallback" in c.works.values()
            },
            "evidence": {n: c.cases for n, c in sorted(self.ops.items())},
        }

    def python(self) -> str:
        r = self.run
        lines = [
            f'"""PyTorch device-generic test configuration for {r.device} ({r.device_name}), measured by bringup '
            f"{r.bringup_version}",
            f"with torch {r.torch_version} in run {r.run_id} (`bringup export --format pytorch-tests`; do not edit: "
            "export again).",
            "",
            "    from torch.testing._internal.common_device_type import PrivateUse1TestBase",
            "    PrivateUse1TestBase.set_test_configs(**test_configs())",
            '"""',
            "",
            "import unittest",
            "",
            "import torch",
            "from torch.testing._internal.common_device_type import tol, toleranceOverride",
            "from torch.testing._internal.opinfo.core import DecorateInfo",
            "",
            "OP_ALLOWLIST = [",
        ]
        for name in self.allowlist:
            fb = sorted(d for d, s in self.ops[name].works.items() if s == "fallback")
            note = "  # through the CPU fallback in " + ", ".join(fb) if fb else ""
            lines.append(f"    {name!r},{note}")
        lines += ["]", "", "# Not in the allowlist: no dtype works. op -> why, per dtype.", "EXCLUDED_OPS = {"]
        lines += [f"    {n!r}: {why!r}," for n, why in self.excluded.items()]
        lines += ["}", "", "OP_OVERRIDES = {"]
        for name in self.allowlist:
            c = self.ops[name]
            decs = [f"DecorateInfo(unittest.skip({why!r}), dtypes=(torch.{d},))" for d, why in sorted(c.skips.items())]
            for d, t in sorted(c.tolerances.items()):
                over = f"toleranceOverride({{torch.{d}: tol(atol={t['atol']!r}, rtol={t['rtol']!r})}})"
                decs.append(
                    f"DecorateInfo({over}, {COMPARE_TEST[0]!r}, {COMPARE_TEST[1]!r})"
                    f"  # measured atol {t['measured_atol']:.3g}"
                )
            if decs:
                lines.append(f"    {name!r}: [")
                lines += [f"        {d}," for d in decs]
                lines.append("    ],")
        lines += [
            "}",
            "",
            "TEST_EXCLUSIONS: dict = {}",
            "",
            "",
            "def test_configs() -> dict:",
            '    """The keyword arguments of set_test_configs."""',
            '    return {"op_allowlist": list(OP_ALLOWLIST),',
            '            "op_overrides": {k: list(v) for k, v in OP_OVERRIDES.items()},',
            '            "test_exclusions": dict(TEST_EXCLUSIONS)}',
        ]
        return "\n".join(lines) + "\n"


def pytorch_test_configs(
    run: RunInfo, results: Sequence[CaseResult], margin: float = DEFAULT_MARGIN
) -> DeviceTestConfigs:
    ops: dict[str, OpConfig] = {}
    for r in results:
        if r.suite != "ops" or "op" not in r.params or r.status is Status.REF_FAIL:
            continue
        name, dtype = str(r.params["op"]), str(r.params.get("dtype", ""))
        if dtype not in TORCH_DTYPES:
            continue
        c = ops.setdefault(name, OpConfig())
        c.cases[dtype] = r.case_id
        if r.status in WORKS:
            c.works[dtype] = r.status.value
            err = r.fields.get("error_vs_cpu")
            if isinstance(err, dict) and isinstance(err.get("atol_needed"), (int, float)):
                need, default = float(err["atol_needed"]), float(err.get("default_atol", 1e-5))
                if need > default:
                    c.tolerances[dtype] = {
                        "atol": round_up(margin * need),
                        "rtol": float(err.get("rtol", 0.0)),
                        "measured_atol": need,
                    }
        else:
            why = (r.reason or "").splitlines()[0][:160] if r.reason else ""
            c.skips[dtype] = f"bringup: {r.status.value}" + (f": {why}" if why else "")
    if not ops:
        raise BadInput(f"run {run.run_id} has no `bringup ops` case to configure PyTorch's tests from")
    return DeviceTestConfigs(run, ops, margin)
