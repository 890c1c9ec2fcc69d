"""Upstream's verdict beside bringup's, row by row: for every expectation imported from an upstream expected-accuracy
CSV (`bringup expect import`: its note keeps the upstream row, expect/xpu_csv.py), the cell the upstream dashboard
gave the model at the case's precision, the status bringup gave the case of that very name (zoo `--source
dynamo:huggingface` names its cases as upstream does: zoo/upstream.py), and how they compare:

- `same`: bringup's status is the one the upstream cell maps to (xpu_csv.STATUS_IN: fail_accuracy is fail_numeric,
  pass_due_to_skip is pass, ...);
- `differs`: another status (a model upstream passes that fails here, or the other way round);
- `not judged`: bringup built or ran nothing to judge (`ref_fail`: a class this transformers release lacks, a
  reference that failed) where upstream has a verdict;
- `not run`: the file has the row, this run has no case of that name.

The rows are computed once, by the gate's classification (expect/classify.py), kept in the `expectations` block
(`upstream`), printed under the gate's line and shown in the scorecard's expectations section. The comparison is
never the exit code: the gate's classes are (the expected status is what a team accepted, which may have moved
since the import; the upstream cell stays as imported).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from bringup.case import CaseResult, Status
from bringup.expect import xpu_csv
from bringup.report.kit import esc

if TYPE_CHECKING:
    from rich.console import Console

VERDICTS = ("same", "differs", "not judged", "not run")


def verdict(upstream: str, status: Status | None) -> str:
    """How bringup's status compares with an upstream cell (the module docstring's four words)."""
    if status is None:
        return "not run"
    mapped = xpu_csv.STATUS_IN.get(upstream, Status.CRASH)
    if status is mapped:
        return "same"
    return "not judged" if status is Status.REF_FAIL else "differs"


def _column(params: Mapping[str, Any]) -> str:
    return xpu_csv.PRECISION.get(str(params.get("dtype") or "fp32"), "float32")


def rows(
    results: Sequence[CaseResult],
    outcomes: Sequence[Any],
    expectations: Mapping[str, Any],
    not_run: Sequence[str],
) -> list[dict[str, Any]]:
    """One row per imported expectation: the run's cases first (in run order), then the rows the run did not
    include (their column: the run's one precision, else float32)."""
    out: list[dict[str, Any]] = []
    by_id = {r.case_id: r for r in results}
    for o in outcomes:
        kept = xpu_csv.read_note(o.expected.note) if o.listed else None
        r = by_id.get(o.case_id)
        if kept is None or r is None:
            continue
        col = _column(r.params)
        cell = kept[0].get(col, "")
        if cell:
            out.append(_row(o.key, col, cell, o.status, o.klass.value))
    dtypes = {_column(r.params) for r in results}
    col = dtypes.pop() if len(dtypes) == 1 else "float32"
    for key in not_run:
        kept = xpu_csv.read_note(expectations[key].note)
        if kept is not None and kept[0].get(col):
            out.append(_row(key, col, kept[0][col], None, "not_run"))
    return out


def _row(case: str, column: str, cell: str, status: Status | None, klass: str) -> dict[str, Any]:
    return {
        "case": case,
        "column": column,
        "upstream": cell,
        "status": status.value if status is not None else None,
        "class": klass,
        "verdict": verdict(cell, status),
    }


def counts(rows_: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    c = Counter(str(r.get("verdict")) for r in rows_)
    return {v: c[v] for v in VERDICTS}


def summary_line(rows_: Sequence[Mapping[str, Any]]) -> str:
    cols = sorted({str(r.get("column")) for r in rows_})
    n = counts(rows_)
    return f"upstream vs bringup ({len(rows_)} imported row(s), {', '.join(cols)}): " + ", ".join(
        f"{v} {k}" for k, v in n.items()
    )


def print_rows(rows_: Sequence[Mapping[str, Any]], console: Console) -> None:
    """The table under the gate's line: case, upstream's cell, bringup's status, the verdict."""
    if not rows_:
        return
    t = Table(title=escape(summary_line(rows_)), title_justify="left", pad_edge=False, collapse_padding=True)
    for col in ("case", "upstream", "bringup", "verdict", "gate"):
        t.add_column(col, overflow="fold")
    style = {"same": "green", "differs": "red", "not judged": "yellow", "not run": "dim"}
    for r in rows_:
        v = str(r["verdict"])
        t.add_row(
            escape(str(r["case"])),
            escape(str(r["upstream"])),
            str(r["status"] or "-"),
            f"[{style[v]}]{v}[/]",
            str(r["class"]).replace("_", " "),
        )
    console.print(t)


def html_table(rows_: Sequence[Mapping[str, Any]]) -> str:
    """The same rows for the scorecard's expectations section."""
    if not rows_:
        return ""
    body = "".join(
        f"<tr><td>{esc(r['case'])}</td><td>{esc(r['upstream'])}</td><td>{esc(r['status'] or '-')}</td>"
        f"<td>{esc(r['verdict'])}</td><td>{esc(str(r['class']).replace('_', ' '))}</td></tr>"
        for r in rows_
    )
    return (
        f"<p>{esc(summary_line(rows_))}</p><table><thead><tr><th>case</th><th>upstream</th><th>bringup</th>"
        f"<th>verdict</th><th>gate</th></tr></thead><tbody>{body}</tbody></table>"
    )
