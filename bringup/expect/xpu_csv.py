"""Expectations to and from torch-xpu-ops-style expected-accuracy CSVs (`bringup expect import` / `export`).

Intel's torch-xpu-ops CI keeps, per benchmark suite, `.github/ci_expected_accuracy/<suite>.csv`:

    name,float32,bfloat16,float16,amp_bf16,amp_fp16
    # https://github.com/intel/torch-xpu-ops/issues/1768,,,,,
    AlbertForMaskedLM,pass,pass,pass,pass,pass
    DebertaV2ForQuestionAnswering,fail_accuracy,fail_accuracy,fail_accuracy,pass,pass

A row per model, a column per precision, `#` rows are comments (an issue link, a note) about the row below.
One bringup expectations section holds one precision (a zoo case is one model at the run's `--dtype`), so an
import takes one column (`--dtype`, default fp32) into entries `<suite>/<Model>`; each entry keeps the whole
row and its comments in its `note` (`torch-xpu-ops: float32=pass ... | # comment`), and the first link of
a comment becomes its `link`. Export writes the rows back: the other columns and the comments from the note,
the column of `--dtype` from the entry's status now (what `--update-expect` accepted since), so an import
followed by an export gives the same file back.

Statuses, both ways (STATUS_IN, STATUS_OUT): pass <-> pass, fail_accuracy <-> fail_numeric, fail_to_run <->
fail_compile, timeout <-> budget, eager_1st_run_OOM <-> oom, model_fail_to_load <-> ref_fail. One way in:
pass_due_to_skip -> pass, eager_fail_to_run and fail_exception -> crash (the note keeps the original, and
export writes it back while the status still maps to it). Not in torch-xpu-ops' vocabulary (CANNOT_OUT):
fallback (it ran: exported as pass), unsupported, silent_eager, crash, error (exported as fail_to_run); each
such cell gets a `# bringup: ...` comment row naming the real status. An unknown status in a CSV is imported as
crash (a failure of unknown kind) and named in the import's summary.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.case import Status
from bringup.errors import BadInput
from bringup.expect.taxonomy import _BY_STATUS
from bringup.options import DTYPES, TORCH_DTYPE_NAMES

# precision -> its column: torch's name of a pure one (the one table, bringup/options.py), amp-bf16 -> amp_bf16
PRECISION = {name: TORCH_DTYPE_NAMES.get(name, name.replace("-", "_")) for name in DTYPES}
COLUMNS = tuple(PRECISION.values())  # float32, bfloat16, float16, amp_bf16, amp_fp16
STATUS_IN: dict[str, Status] = {
    "pass": Status.PASS, "pass_due_to_skip": Status.PASS, "fail_accuracy": Status.FAIL_NUMERIC,
    "fail_to_run": Status.FAIL_COMPILE, "eager_fail_to_run": Status.CRASH, "fail_exception": Status.CRASH,
    "timeout": Status.BUDGET, "eager_1st_run_OOM": Status.OOM, "model_fail_to_load": Status.REF_FAIL,
}  # fmt: skip
STATUS_OUT: dict[Status, str] = {
    Status.PASS: "pass", Status.FAIL_NUMERIC: "fail_accuracy", Status.FAIL_COMPILE: "fail_to_run",
    Status.BUDGET: "timeout", Status.OOM: "eager_1st_run_OOM", Status.REF_FAIL: "model_fail_to_load",
}  # fmt: skip
CANNOT_OUT: dict[Status, str] = {
    Status.FALLBACK: "pass", Status.UNSUPPORTED: "fail_to_run", Status.SILENT_EAGER: "fail_to_run",
    Status.CRASH: "fail_to_run", Status.ERROR: "fail_to_run",
}  # fmt: skip
NOTE = "torch-xpu-ops: "
_LINK = re.compile(r"https?://\S+")


@dataclass
class Row:
    name: str
    cells: dict[str, str]
    comments: list[str] = field(default_factory=list)


def column_of(dtype: str) -> str:
    if dtype not in PRECISION:
        raise BadInput(f"--dtype {dtype}: one of {', '.join(PRECISION)}")
    return PRECISION[dtype]


def parse(path: str | Path) -> tuple[list[str], list[Row]]:
    """(the header's columns, the rows with the comments above each). Malformed: BadInput naming the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{p}: cannot read it ({e})") from None
    lines = list(csv.reader(io.StringIO(text)))
    if not lines or not lines[0] or lines[0][0].strip() != "name":
        raise BadInput(f"{p}:1: not a torch-xpu-ops expected-accuracy CSV (the header must start with 'name')")
    cols = [c.strip() for c in lines[0][1:]]
    bad = [c for c in cols if c not in COLUMNS]
    if bad or not cols:
        raise BadInput(f"{p}:1: unknown column {bad[0] if bad else '(none)'!r}; columns: {', '.join(COLUMNS)}")
    rows: list[Row] = []
    pending: list[str] = []
    for n, cells in enumerate(lines[1:], start=2):
        if not cells or not any(c.strip() for c in cells):
            continue
        if cells[0].lstrip().startswith("#"):
            pending.append(",".join(c for c in cells if c.strip()))  # a comment row keeps its text, not its commas
            continue
        if len(cells) != len(cols) + 1:
            raise BadInput(f"{p}:{n}: {len(cells)} cells, the header has {len(cols) + 1}")
        rows.append(Row(cells[0].strip(), dict(zip(cols, (c.strip() for c in cells[1:]), strict=True)), pending))
        pending = []
    return cols, rows


def note_of(row: Row, cols: Sequence[str]) -> str:
    out = NOTE + " ".join(f"{c}={row.cells.get(c, '')}" for c in cols)
    return out + "".join(f" | {c}" for c in row.comments)


def read_note(note: str) -> tuple[dict[str, str], list[str]] | None:
    if not note.startswith(NOTE):
        return None
    head, *comments = note[len(NOTE) :].split(" | ")
    cells = dict(kv.split("=", 1) for kv in head.split() if "=" in kv)
    return cells, comments


def import_csv(path: str | Path, section: Any, dtype: str, suite: str) -> dict[str, Any]:
    """Rows of `path` into `section` (a mapping of the expectations file); returns counts and what could not
    map. Each row becomes `<suite>/<name>`: the column of `dtype` as its status, the row in its note."""
    from ruamel.yaml.comments import CommentedMap

    col = column_of(dtype)
    cols, rows = parse(path)
    if col not in cols:
        raise BadInput(f"{path}: no column {col} (for --dtype {dtype}); columns: {', '.join(cols)}")
    unknown: list[str] = []
    for row in rows:
        raw = row.cells[col]
        status = STATUS_IN.get(raw)
        if status is None:
            unknown.append(f"{row.name} {col}={raw or '(empty)'}")
            status = Status.CRASH
        e = CommentedMap()
        e["status"] = status.value
        if status is not Status.PASS:
            e["reason"] = "config" if status is Status.REF_FAIL else _BY_STATUS.get(status, "other")
        link = next((m.group(0) for c in row.comments for m in [_LINK.search(c)] if m), None)
        if link:
            e["link"] = link
        e["note"] = note_of(row, cols)
        section[f"{suite}/{row.name}"] = e
    return {"rows": len(rows), "column": col, "unknown": unknown}


def export_csv(section: Any, dtype: str, suite: str) -> tuple[str, list[str]]:
    """The CSV of a section's `<suite>/...` entries (a mapping as the file holds it, in its order), and the cells
    that could not map."""
    col = column_of(dtype)
    rows: list[Row] = []
    cols: list[str] = list(COLUMNS)
    lossy: list[str] = []
    for key, entry in (section or {}).items():
        if not str(key).startswith(f"{suite}/"):
            continue
        name = str(key).removeprefix(f"{suite}/")
        status = Status(str(entry.get("status", "pass")))
        kept = read_note(str(entry.get("note") or ""))
        cells, comments = kept if kept is not None else ({}, [])
        original = cells.get(col, "")
        if original and STATUS_IN.get(original, Status.CRASH) is status:
            value = original  # still what the file said (pass_due_to_skip, eager_fail_to_run, an unknown one)
        elif status in STATUS_OUT:
            value = STATUS_OUT[status]
        else:
            value = CANNOT_OUT[status]
            why = f"{status.value} (no torch-xpu-ops status; written as {value})"
            comments = [*comments, f"# bringup: {name} {col}: {why}"]
            lossy.append(f"{name} {col}: {status.value} -> {value}")
        rows.append(Row(name, {**{c: cells.get(c, "") for c in cols}, col: value}, comments))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["name", *cols])
    for row in rows:
        for c in row.comments:
            w.writerow([c, *([""] * len(cols))])
        w.writerow([row.name, *(row.cells[c] for c in cols)])
    return buf.getvalue(), lossy
