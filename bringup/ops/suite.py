"""ops: op coverage of the device from PyTorch's own OpInfo database.

For each OpInfo in `torch.testing._internal.common_methods_invocations.op_db` (needs `expecttest`) and
each dtype, one case: the first N reference inputs (sample inputs first, then
extremal ones) run on cpu (the reference) and on the device, under
the fallback detector, as PyTorch's `test_compare_cpu` does. Per (op, dtype):

    pass          every sample matched cpu, natively
    fallback      matched cpu, but some of the op's work ran only through the backend's CPU fallback
    fail_numeric  a result differs from cpu beyond the tolerance (judge.py) (or in dtype / shape)
    unsupported   the device raised NotImplementedError or "not implemented for ..." (a gap)
    crash         the device raised anything else where cpu did not, or the worker died (signal named)
    ref_fail      cpu itself could not run the op in that dtype: says nothing about the device

Cases reuse warm worker processes (op_db is imported once per worker), each with its own budget.

Modules: `cases.py` plans (op table, dtypes), `run.py` is the worker's entry, `judge.py` the rule and
its tolerance table; this module registers the suite and prints its summary.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from bringup.api import register_capability, specs
from bringup.case import CaseResult, Status
from bringup.console import STATUS_STYLE, styled
from bringup.ops import args as face  # the torch-free face (cli)
from bringup.ops import section as ops_section
from bringup.ops.cases import build_cases, run_cases
from bringup.ops.run import run_op  # noqa: F401  (stored cases name "bringup.ops.suite:run_op")

if TYPE_CHECKING:
    from rich.console import Console


# ---- summary --------------------------------------------------------------------------------------
def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    dtypes: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    reasons: dict[str, str] = {}
    kernels: Counter[str] = Counter()
    for r in results:
        op, dt = r.params.get("op", r.name), r.params.get("dtype", "")
        if dt not in dtypes:
            dtypes.append(dt)
        matrix.setdefault(op, {})[dt] = r.status.value
        if r.status is not Status.PASS and r.reason and op not in reasons:
            reasons[op] = r.reason
        for k in r.fields.get("fallback_ops", []) or []:
            kernels[k] += 1
    by_dtype = {dt: dict(Counter(row[dt] for row in matrix.values() if dt in row)) for dt in dtypes}
    shown = [op for op in matrix if len(matrix) <= 40 or any(s != "pass" for s in matrix[op].values())]
    t = Table(title=f"ops: {len(matrix)} OpInfos x {len(dtypes)} dtype(s)", title_justify="left")
    t.add_column("op")
    for dt in dtypes:
        t.add_column(dt)
    t.add_column("first problem", overflow="fold", max_width=70)
    limit = 80
    for op in shown[:limit]:
        cells = [styled(Status(matrix[op][dt])) if dt in matrix[op] else "-" for dt in dtypes]
        t.add_row(op, *cells, escape(reasons.get(op, "")))
    console.print(t)
    if len(shown) > limit:
        console.print(f"... {len(shown) - limit} more op(s) with a non-pass status: see the JSON")
    for dt in dtypes:
        counts = by_dtype[dt]
        parts = ", ".join(f"[{STATUS_STYLE.get(Status(s), 'red')}]{n} {s}[/]" for s, n in sorted(counts.items()))
        considered = sum(n for s, n in counts.items() if s != Status.REF_FAIL.value)
        rate = f" -> {counts.get('pass', 0) / considered:.0%} pass natively" if considered else ""
        console.print(f"{dt}: {parts}{rate} (ref_fail excluded)")
    if kernels:
        top = ", ".join(f"{k} ({n})" for k, n in kernels.most_common(10))
        console.print(f"most common CPU fallbacks (cases): {escape(top)}")
    return {
        "by_dtype": by_dtype,
        "matrix": matrix,
        "fallback_ops": dict(kernels.most_common()),
    }


def scorecard(results: list[CaseResult]) -> list[tuple[str, str]]:
    """Op coverage in one line: how many (op, dtype) cases ran natively, through the fallback, not at all."""
    c = Counter(r.status.value for r in results if r.status is not Status.REF_FAIL)
    if not c:
        return []
    text = ", ".join(f"{n} {s}" for s, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
    fell = sorted({op for r in results for op in (r.fields.get("fallback_ops") or [])})
    return [("ops (OpInfo cases)", text + (f"; fallback ops: {', '.join(fell[:4])}" if fell else ""))]


register_capability(
    face,
    build_cases,
    run_cases,
    summarize,
    title="Op coverage",
    section=ops_section.render,
    scorecard=scorecard,
    metrics=specs("samples", "fallback_calls", "max_abs_err"),
)
