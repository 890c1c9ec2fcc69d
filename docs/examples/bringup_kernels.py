"""A backend team's kernel tests as a bringup suite, loaded as a plugin with `--import`.

    PYTHONPATH=docs/examples bringup --import bringup_kernels --device cpu kernels
    PYTHONPATH=docs/examples bringup --import bringup_kernels --device cpu run --quick   # includes kernels
    bringup report                     # its section, from `section` below (the report imports no suite)

One module, one registry line (at the bottom): `bringup kernels` becomes a sub-command, `bringup run`
plans its `run_cases`, the HTML scorecard renders its `section`, and its metric `kernel_ms` is in the
catalogue (CSV column, unit, direction for `compare`). Each kernel runs on the device and, in float64,
on cpu; `bringup.checks.parity` judges the device output against the float64 reference *and* against
the same kernel on cpu at the run's precision (the device may be as far from float64 as cpu is, not
more), so a kernel that is 1% off fails as fail_numeric.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from bringup.api import CommandOptions, MetricSpec, Options, Page, Suite, measured, register_suite, specs
from bringup.case import Case, CaseResult, Status
from bringup.checks.errors import classify, first_line
from bringup.checks.parity import ParityReport, parity
from bringup.device import Device
from bringup.errors import BadInput
from bringup.options import positive_int
from bringup.precision import parse_precision

HELP = "a backend team's kernels (softmax, layer_norm, rms_norm, gelu) on the device vs float64 cpu"
KERNEL_MS = MetricSpec("kernel_ms", "ms", False, "kernels: median time of one call on the device")
KERNELS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "rms_norm": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
    "gelu": F.gelu,
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernels", default="all", help=f"comma list of {', '.join(KERNELS)} (default all)")
    p.add_argument("--rows", type=positive_int, default=256, help="rows of the input (default 256)")
    p.add_argument("--dtype", default="fp32", help="fp32 | bf16 | fp16 (default fp32)")


@dataclass(frozen=True)
class KernelsOptions(CommandOptions):
    """The command's options, typed and frozen: one field per dest add_arguments gives (bringup's face builds
    them once from the command line; build_cases reads them, never a Namespace). Each says whether it changes
    what a run measures (measured / not_measured: `report --history` keys a run's lines by the measured ones)."""

    kernels: str = measured("all")
    rows: int = measured(256)
    dtype: str = measured("fp32")


def _cases(names: Sequence[str], rows: int, dtype: str) -> list[Case]:
    return [
        Case(
            "kernels",
            f"{k}.{dtype}",
            {"kernel": k, "rows": rows, "cols": 512, "dtype": dtype},
            f"{__name__}:run_kernel",
            120,
        )
        for k in names
    ]


def build_cases(options: Options, device: Device) -> list[Case]:
    args = options.of(KernelsOptions)
    names = list(KERNELS) if args.kernels == "all" else [k.strip() for k in args.kernels.split(",") if k.strip()]
    bad = [k for k in names if k not in KERNELS]
    if bad:
        raise BadInput(f"--kernels: unknown kernel {bad[0]!r}; kernels: {', '.join(KERNELS)}")
    return _cases(names, args.rows, parse_precision(args.dtype, allow_mixed=False).name)


def run_cases(device: Device, quick: bool) -> list[Case]:
    return _cases(["softmax", "layer_norm"] if quick else list(KERNELS), 256, "fp32")


def judge(name: str, got: torch.Tensor, x: torch.Tensor, dtype: torch.dtype) -> ParityReport:
    """The device's output of kernel `name` on `x` (float64, cpu) against float64 and cpu at `dtype`."""
    fn = KERNELS[name]
    return parity({"out": got.cpu()}, {"out": fn(x)}, dtype, baseline={"out": fn(x.to(dtype))})


def run_kernel(case: Case, ctx: Any) -> CaseResult:
    p = case.params
    dtype = parse_precision(p["dtype"]).compute_dtype
    x = torch.randn(int(p["rows"]), int(p["cols"]), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    dev: Device = ctx.device
    fn = KERNELS[p["kernel"]]
    try:
        xd = x.to(dev.torch_device, dtype)
        got = fn(xd)
        times = []
        for _ in range(5):
            dev.synchronize()
            t0 = time.perf_counter()
            fn(xd)
            dev.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    except Exception as e:
        return CaseResult.for_case(case, classify(e), first_line(e))
    rep = judge(p["kernel"], got, x, dtype)
    r = CaseResult.for_case(case, Status.PASS if rep.ok else Status.FAIL_NUMERIC, "" if rep.ok else rep.summary())
    r.metric("max_abs_err", rep.max_abs_err)
    r.metric("max_rel_err", rep.max_rel_err)
    r.metric("kernel_ms", statistics.median(times))
    return r


def summarize(results: list[CaseResult], console: Any) -> dict[str, Any]:
    from bringup.console import case_table

    console.print(case_table("kernels", results, ["max_rel_err", "kernel_ms"]))
    return {"passed": sum(r.status is Status.PASS for r in results), "cases": len(results)}


def section(results: Sequence[CaseResult], page: Page) -> str | None:
    """Its HTML section, written with the report's toolkit (everything escaped by it)."""
    from bringup.report.html import col_num, col_reason, col_status, col_text, counts_line, data_table, metric

    if not results:
        return None
    cols = [
        col_text("kernel", lambda r: r.params.get("kernel")),
        col_text("dtype", lambda r: r.params.get("dtype")),
        col_status(),
        col_num("max rel err", lambda r: metric(r, "max_rel_err")),
        col_num("ms / call", lambda r: metric(r, "kernel_ms")),
        col_reason(),
    ]
    return counts_line(results) + data_table("tbl-kernels", cols, results)


register_suite(
    Suite(
        name="kernels",
        help=HELP,
        add_arguments=add_arguments,
        build_cases=build_cases,
        run_cases=run_cases,
        summarize=summarize,
        order=65,
        title="Backend kernels",
        section=section,
        metrics=(KERNEL_MS, *specs("max_abs_err", "max_rel_err")),
        options=KernelsOptions,
    )
)
