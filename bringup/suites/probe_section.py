"""The probe's HTML section: one row per feature, its verdict and detail."""

from __future__ import annotations

from collections.abc import Sequence

from bringup.api import Page
from bringup.case import CaseResult, Status
from bringup.report.html import (
    STATUS_ORDER,
    Col,
    badge,
    col_reason,
    col_text,
    counts_line,
    data_table,
    get,
)  # fmt: skip
from bringup.report.plots import esc


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    if not results:
        return None
    word = {Status.PASS: "supported"}
    cols = [
        col_text("feature", lambda r: get(r, "feature") or r.name),
        Col(
            "verdict",
            lambda r: (f"{badge(r.status)} {esc(word.get(r.status, ''))}", STATUS_ORDER.index(r.status.value)),
        ),  # fmt: skip
        col_reason("detail"),
    ]
    return counts_line(results) + data_table("tbl-probe", cols, results)
