"""The probe's HTML section: one row per feature, its verdict and detail."""

from __future__ import annotations

from collections.abc import Sequence

from bringup.api import Page
from bringup.case import CaseResult, Status
from bringup.report.kit import (
    STATUS_ORDER,
    Col,
    badge,
    col_reason,
    col_text,
    counts_line,
    data_table,
    esc,
    get,
)


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    if not results:
        return None
    word = {Status.PASS: "supported"}
    cols = [
        col_text("feature", lambda r: get(r, "feature") or r.name),
        Col(
            "verdict",
            lambda r: (f"{badge(r.status)} {esc(word.get(r.status, ''))}", STATUS_ORDER.index(r.status.value)),
        ),
        col_reason("detail"),
    ]
    return counts_line(results) + data_table("tbl-probe", cols, results)


# ---- the backend scorecard (`bringup compare`): what the articles compare backends by -------------------
SCORECARD_ROWS = (
    ("distributed.default", "torch.distributed"),
    ("distributed.dtensor", "DTensor"),
    ("distributed.fsdp2", "FSDP2"),
)


def _said(r: CaseResult, limit: int = 100) -> str:
    backend = r.fields.get("backend")
    text = ("yes" if r.status is Status.PASS else r.status.value) + (f" ({backend})" if backend else "")
    if r.status is not Status.PASS and r.reason:
        why = r.reason.split(": ", 2)[-1] if r.reason.count(": ") > 1 else r.reason
        text += f": {why[:limit]}" + ("..." if len(why) > limit else "")
    return text


def scorecard(results: Sequence[CaseResult]) -> list[tuple[str, str]]:
    by = {r.name: r for r in results}
    rows: list[tuple[str, str]] = []
    if (ex := by.get("execution.eager")) is not None:
        text = "yes" if ex.status is Status.PASS else f"no: {ex.fields.get('execution', ex.status.value)}"
        if ex.fields.get("dropped_ms") is not None and ex.status is not Status.PASS:
            text += f" (an unread GEMM {ex.fields['dropped_ms']:.2g} ms vs a read one {ex.fields['kept_ms']:.3g} ms)"
        if sw := ex.fields.get("eager_switch"):
            text += f"; {sw['name']}: {sw['execution']}"
        rows.append(("eager execution", text))
    comp = [r for n, r in by.items() if n.startswith("compile.")]
    if comp:
        rows.append(("torch.compile", ", ".join(f"{r.name.split('.', 1)[1]} {r.status.value}" for r in comp)))
    for name, label in SCORECARD_ROWS:
        if (r := by.get(name)) is not None:
            rows.append((label, _said(r)))
    return rows
