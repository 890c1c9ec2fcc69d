"""The seeds' sentence ("89/96 passed; 7 budget (all batch 4, seq 8192)") and heatmap-ready data.

Failures are grouped by status; for each group the parameters whose value is the same across the
whole group, and not across the whole run (head_dim 128 everywhere says nothing), are named.
ref_fail cases are left out of the pass rate (the reference failing says nothing about the device).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bringup.case import CaseResult, Status
from bringup.flex.mods import display_name

GROUP_FIELDS = ("mod", "batch", "seq", "heads", "head_dim", "dtype", "backward")
# Which status wins when two cases land in one heatmap cell (worst first).
_SEVERITY = (
    Status.ERROR,
    Status.CRASH,
    Status.OOM,
    Status.FAIL_COMPILE,
    Status.BUDGET,
    Status.FAIL_NUMERIC,
    Status.SILENT_EAGER,
    Status.FALLBACK,
    Status.UNSUPPORTED,
    Status.REF_FAIL,
    Status.PASS,
)


def field_value(r: CaseResult, name: str) -> Any:
    p = r.params
    if name == "heads":
        return f"{p.get('q_heads')}/{p.get('kv_heads')}"
    if name == "mod":
        return display_name(str(p.get("mod", r.name)))
    if name == "backward":
        return "on" if p.get("backward") else "off"
    return p.get(name)


def shared_params(group: Sequence[CaseResult], everyone: Sequence[CaseResult]) -> dict[str, Any]:
    """Parameters with one value across `group` that not every case of the run has."""
    out: dict[str, Any] = {}
    for f in GROUP_FIELDS:
        vals = {str(field_value(r, f)) for r in group}
        if len(vals) != 1:
            continue
        v = field_value(group[0], f)
        if all(str(field_value(r, f)) == str(v) for r in everyone):
            continue
        out[f] = v
    return out


def groups(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """Non-pass statuses, biggest group first, each with its shared parameters."""
    by: dict[Status, list[CaseResult]] = {}
    for r in results:
        if r.status is not Status.PASS:
            by.setdefault(r.status, []).append(r)
    ordered = sorted(by.items(), key=lambda kv: (kv[0] is Status.REF_FAIL, -len(kv[1]), kv[0].value))
    return [{"status": s.value, "count": len(rs), "shared": shared_params(rs, results)} for s, rs in ordered]


def sentence(results: Sequence[CaseResult]) -> str:
    counted = [r for r in results if r.status is not Status.REF_FAIL]
    passed = sum(r.status is Status.PASS for r in counted)
    parts = [f"{passed}/{len(counted)} passed"]
    for g in groups(results):
        shared = g["shared"]
        text = f"{g['count']} {g['status']}"
        if g["status"] == Status.REF_FAIL.value:
            text += " (excluded: the cpu reference failed)"
        elif shared:
            inner = ", ".join(f"{k} {v}" for k, v in shared.items())
            text += f" ({'all ' if g['count'] > 1 else ''}{inner})"
        parts.append(text)
    return "; ".join(parts)


def shape_label(r: CaseResult, vary_dtype: bool, vary_backward: bool) -> str:
    p = r.params
    label = f"b{p.get('batch')} s{p.get('seq')} h{p.get('q_heads')}/{p.get('kv_heads')} d{p.get('head_dim')}"
    if vary_dtype:
        label += f" {p.get('dtype')}"
    if vary_backward:
        label += " fwd+bwd" if p.get("backward") else " fwd"
    return label


def _shape_key(r: CaseResult) -> tuple[Any, ...]:
    p = r.params
    return (
        p.get("batch", 0),
        p.get("seq", 0),
        p.get("q_heads", 0),
        -int(p.get("kv_heads", 0) or 0),
        p.get("head_dim", 0),
        str(p.get("dtype")),
        bool(p.get("backward")),
    )


def heatmap(results: Sequence[CaseResult]) -> dict[str, Any]:
    """{mods: [...], shapes: [...], status: [[...]], ...}: rows are mods (matrix order), columns are
    shapes (sorted); a cell with no case is null; a cell with two cases shows the worse status."""
    vary_dtype = len({r.params.get("dtype") for r in results}) > 1
    vary_bwd = len({bool(r.params.get("backward")) for r in results}) > 1
    mods: list[str] = []
    shapes: dict[str, tuple[Any, ...]] = {}
    for r in results:
        m = field_value(r, "mod")
        if m not in mods:
            mods.append(m)
        shapes.setdefault(shape_label(r, vary_dtype, vary_bwd), _shape_key(r))
    cols = sorted(shapes, key=lambda s: shapes[s])
    n, k = len(mods), len(cols)
    status: list[list[str | None]] = [[None] * k for _ in range(n)]
    names: list[list[str | None]] = [[None] * k for _ in range(n)]
    metrics: dict[str, list[list[float | None]]] = {
        m: [[None] * k for _ in range(n)] for m in ("compile_s", "fwd_ms", "tflops", "max_abs_err")
    }
    for r in results:
        i, j = mods.index(field_value(r, "mod")), cols.index(shape_label(r, vary_dtype, vary_bwd))
        cur = status[i][j]
        if cur is not None and _SEVERITY.index(Status(cur)) <= _SEVERITY.index(r.status):
            continue
        status[i][j] = r.status.value
        names[i][j] = r.name
        for m, grid in metrics.items():
            grid[i][j] = r.metrics[m].value if m in r.metrics else None
    return {"mods": mods, "shapes": cols, "status": status, "cases": names, **metrics}
