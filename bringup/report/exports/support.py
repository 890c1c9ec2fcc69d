"""`bringup export --format support-table`: what a vendor's op-support page declares (TorchNeuron's
`torch_api_compatibility.md`: every op supported / CPU fallback / not supported), measured, in Markdown and CSV.

Three parts, each cell linked to its evidence (the case ids, listed at the end of the Markdown with their status
and reason; a column of the CSV):

    OpInfo ops x dtype   `bringup ops`: supported (pass: every sample matched, natively), CPU fallback, not
                         supported (the backend said so), wrong (fail_numeric), fails (crash, oom, budget, ...),
                         not judged (cpu itself cannot: ref_fail)
    aten ops x dtype     what ran in any case that watched the dispatcher (ops' native and fallback ops, zoo's,
                         train's and probe's fallback counts, the backend's own counter): native, or CPU fallback
                         with the number of calls and of models (zoo) that needed it
    features             `bringup probe`: supported / CPU fallback / not supported / wrong / fails

Dtypes are torch's names (fp32 -> float32); a mixed-precision case's column is its precision (amp-bf16).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.options import TORCH_DTYPE_NAMES
from bringup.outcomes import NOT_FALLBACKS as HOST_SIDE  # transfers and host reads: never an op's support
from bringup.store import RunInfo

SUPPORTED, FALLBACK, NOT_SUPPORTED, WRONG, FAILS, NOT_JUDGED = (
    "supported",
    "CPU fallback",
    "not supported",
    "wrong",
    "fails",
    "not judged",
)
WORDS: dict[Status, str] = {
    Status.PASS: SUPPORTED, Status.FALLBACK: FALLBACK, Status.UNSUPPORTED: NOT_SUPPORTED,
    Status.FAIL_NUMERIC: WRONG, Status.REF_FAIL: NOT_JUDGED,
}  # fmt: skip
RANK = (FAILS, WRONG, NOT_SUPPORTED, FALLBACK, SUPPORTED, NOT_JUDGED)  # when cases disagree, the worst one shows
PRECISIONS = TORCH_DTYPE_NAMES  # fp32 -> float32: torch's names, the one table (bringup/options.py)


OPINFO_LEGEND = (
    "supported: every sample matched cpu and float64 natively; CPU fallback: matched, through the "
    "backend's CPU fallback; not supported: the backend said so; wrong: a result off; fails: crashed, "
    "out of memory or over budget; not judged: cpu cannot."
)
ATEN_LEGEND = "native, or CPU fallback with the calls counted and the models (zoo) that needed it."


def word(status: Status) -> str:
    return WORDS.get(status, FAILS)


def dtype_of(r: CaseResult) -> str:
    d = r.params.get("dtype", r.fields.get("dtype"))
    return PRECISIONS.get(str(d), str(d)) if d else "any"


@dataclass
class Cell:
    support: str
    cases: list[str] = field(default_factory=list)  # evidence: case ids
    calls: int = 0  # CPU-fallback calls counted (aten part)
    models: set[str] = field(default_factory=set)  # zoo models that needed the fallback

    def add(self, support: str, case_id: str, calls: int = 0, model: str | None = None) -> None:
        if RANK.index(support) < RANK.index(self.support):
            self.support = support
        if case_id not in self.cases:
            self.cases.append(case_id)
        self.calls += calls
        if model:
            self.models.add(model)

    def detail(self) -> str:
        out = []
        if self.calls:
            out.append(f"{self.calls} call{'s' if self.calls != 1 else ''}")
        if self.models:
            n = len(self.models)
            out.append(f"{n} model{'s' if n != 1 else ''}: {', '.join(sorted(self.models))}")
        return "; ".join(out)


Grid = dict[str, dict[str, Cell]]  # row -> dtype -> cell


def _put(
    grid: Grid, row: str, dtype: str, support: str, case_id: str, calls: int = 0, model: str | None = None
) -> None:
    cell = grid.setdefault(row, {}).get(dtype)
    if cell is None:
        cell = grid[row][dtype] = Cell(support)
    cell.add(support, case_id, calls, model)


def _ops(value: Any) -> Iterable[tuple[str, int]]:
    if isinstance(value, Mapping):
        return ((str(k), int(v) if isinstance(v, (int, float)) else 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ((str(k), 0) for k in value)
    return ()


@dataclass
class SupportTable:
    run: RunInfo
    opinfo: Grid
    aten: Grid
    features: dict[str, tuple[str, str]]  # feature -> (support, case id)
    cases: dict[str, CaseResult]  # evidence

    def dtypes(self, grid: Grid) -> list[str]:
        order = ["float32", "bfloat16", "float16", "float64"]
        seen = {d for row in grid.values() for d in row}
        return [d for d in order if d in seen] + sorted(seen - set(order))

    # ---- CSV: one row per (part, op, dtype) -------------------------------------------------------
    def rows(self) -> list[dict[str, str]]:
        out = []
        for part, grid in (("opinfo", self.opinfo), ("aten", self.aten)):
            for op in sorted(grid):
                for dtype in self.dtypes(grid):
                    c = grid[op].get(dtype)
                    if c is not None:
                        out.append(
                            {
                                "part": part,
                                "op": op,
                                "dtype": dtype,
                                "support": c.support,
                                "detail": c.detail(),
                                "case_ids": " ".join(c.cases),
                            }
                        )
        for feat in sorted(self.features):
            support, cid = self.features[feat]
            out.append({"part": "feature", "op": feat, "dtype": "", "support": support, "detail": "", "case_ids": cid})
        return out

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(
            buf, fieldnames=["part", "op", "dtype", "support", "detail", "case_ids"], lineterminator="\n"
        )
        w.writeheader()
        for row in self.rows():
            w.writerow({k: ("'" + v if v[:1] in ("=", "+", "-", "@") else v) for k, v in row.items()})
        return buf.getvalue()

    # ---- Markdown --------------------------------------------------------------------------------
    def _cell(self, c: Cell | None) -> str:
        if c is None:
            return ""
        links = " ".join(f"[{cid[:8]}](#case-{cid})" for cid in c.cases[:3]) + (" ..." if len(c.cases) > 3 else "")
        detail = f" ({c.detail()})" if c.detail() else ""
        return _md(f"{c.support}{detail}") + f" {links}"

    def _grid_md(self, title: str, grid: Grid, what: str) -> list[str]:
        if not grid:
            return []
        dts = self.dtypes(grid)
        lines = ["", f"## {title}", "", what, "", "| op | " + " | ".join(dts) + " |", "|---" * (len(dts) + 1) + "|"]
        for op in sorted(grid):
            lines.append(f"| `{_md(op)}` | " + " | ".join(self._cell(grid[op].get(d)) for d in dts) + " |")
        return lines

    def markdown(self) -> str:
        r = self.run
        counts: dict[str, int] = {}
        for row in self.opinfo.values():
            for c in row.values():
                counts[c.support] = counts.get(c.support, 0) + 1
        lines = [
            f"# Op support on {_md(r.device)} ({_md(r.device_name)})",
            "",
            f"Measured by bringup {r.bringup_version} with torch {_md(r.torch_version)}, run `{r.run_id}` "
            f"(`bringup {_md(r.command)}`). Each cell links to its evidence: the cases, listed at the end.",
        ]
        if counts:
            lines += ["", "OpInfo op x dtype: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + "."]
        lines += self._grid_md("OpInfo ops (`bringup ops`)", self.opinfo, OPINFO_LEGEND)
        lines += self._grid_md("aten ops (every case that watched the dispatcher)", self.aten, ATEN_LEGEND)
        if self.features:
            lines += ["", "## Features (`bringup probe`)", "", "| feature | support |", "|---|---|"]
            for feat in sorted(self.features):
                support, cid = self.features[feat]
                lines.append(f"| `{_md(feat)}` | {_md(support)} [{cid[:8]}](#case-{cid}) |")
        lines += ["", "## Evidence", ""]
        for cid in sorted(self.cases, key=lambda c: (self.cases[c].suite, self.cases[c].name)):
            cr = self.cases[cid]
            why = f": {_md(cr.reason[:200])}" if cr.reason else ""
            lines.append(f'- <a id="case-{cid}"></a>`{cid}` {cr.suite}/{_md(cr.name)}: {cr.status.value}{why}')
        return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    """Text safe in a Markdown table cell (and in GitHub's HTML rendering of it)."""
    s = str(s).replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    return s.replace("<", "&lt;").replace(">", "&gt;")


def support_table(run: RunInfo, results: Sequence[CaseResult]) -> SupportTable:
    opinfo: Grid = {}
    aten: Grid = {}
    features: dict[str, tuple[str, str]] = {}
    used: dict[str, CaseResult] = {}
    for r in results:
        dtype = dtype_of(r)
        if r.suite == "ops" and "op" in r.params:
            _put(opinfo, str(r.params["op"]), dtype, word(r.status), r.case_id)
            used[r.case_id] = r
        if r.suite == "probe":
            features[r.name] = (word(r.status), r.case_id)
            used[r.case_id] = r
        fell = dict(_ops(r.fields.get("fallback_ops")))
        for name, calls in _ops(r.fields.get("backend_fallback_ops")):
            fell[name] = max(fell.get(name, 0), calls)
        model = str(r.params.get("model")) if r.suite == "zoo" and r.params.get("model") else None
        for name, calls in fell.items():
            if name.split(".")[0] not in HOST_SIDE:
                _put(aten, name, dtype, FALLBACK, r.case_id, calls, model)
                used[r.case_id] = r
        for name, _ in _ops(r.fields.get("native_ops")):
            if name not in fell and name.split(".")[0] not in HOST_SIDE:
                _put(aten, name, dtype, SUPPORTED, r.case_id)
                used[r.case_id] = r
    if not (opinfo or aten or features):
        raise BadInput(
            f"run {run.run_id} has no op-level result to tabulate (no ops, probe or fallback counts: "
            "run `bringup ops`, `probe` or `zoo`)"
        )
    return SupportTable(run, opinfo, aten, features, used)
