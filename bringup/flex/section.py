"""flex's HTML section: the mods x shapes heatmap, the suite's sentence, the not-passing table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.api import Page
from bringup.case import CaseResult, Status
from bringup.flex import summary as flex_summary
from bringup.report import plots
from bringup.report.kit import (
    STATUS_ORDER,
    col_num,
    col_reason,
    col_status,
    col_text,
    data_table,
    esc,
    filter_bar,
    fmt,
    get,
    metric,
    num,
    seconds,
)

# -- flex
FLEX_SHAPE_KEYS: tuple[str, ...] = ("batch", "seq", "q_heads", "kv_heads", "head_dim", "dtype", "backward")
_FLEX_ALIASES: dict[str, tuple[str, ...]] = {
    "batch": ("batch", "batch_size", "b"), "seq": ("seq", "seq_len", "s"), "q_heads": ("q_heads", "heads", "h"),
    "kv_heads": ("kv_heads",), "head_dim": ("head_dim", "d"), "dtype": ("dtype",), "backward": ("backward", "bwd"),
}  # fmt: skip


def flex_params(r: CaseResult) -> dict[str, Any]:
    out: dict[str, Any] = {"mod": get(r, "mod", "mask_mod", "score_mod") or r.name.split("/")[0]}
    for k, aliases in _FLEX_ALIASES.items():
        v = get(r, *aliases)
        if v is not None:
            out[k] = v
    return out


def _short(k: str, v: Any, p: dict[str, Any]) -> str:
    """Compact heatmap column parts, like the flex suite's own labels: b4 s8192 h16/2 d128 fp32 +bwd."""
    if k == "backward":
        return "+bwd" if v is True or v in ("on", "true", "1") else "fwd"
    if k == "q_heads":
        return f"h{v}/{p['kv_heads']}" if "kv_heads" in p else f"h{v}"
    if k == "kv_heads":
        return "" if "q_heads" in p else f"kv{v}"
    return {"batch": f"b{v}", "seq": f"s{v}", "head_dim": f"d{v}"}.get(k, str(v))


def _pv(k: str, v: Any) -> str:
    if k == "backward":
        return "fwd+bwd" if v is True or v in ("on", "true", "1") else "fwd" if v in (False, "off", "false") else str(v)
    names = {"batch": "batch", "seq": "seq", "q_heads": "q heads", "kv_heads": "kv heads", "head_dim": "head dim"}
    return f"{names.get(k, k)} {v}"


def flex_summary_line(results: Sequence[CaseResult]) -> str:
    """The seeds' sentence: "89/96 passed; 7 budget (all batch 4, seq 8192)" — failures grouped by status
    and by the parameter values they all share (that are not shared by the whole matrix)."""
    rs = list(results)
    counted = [r for r in rs if r.status is not Status.REF_FAIL]
    passed = sum(r.status is Status.PASS for r in counted)
    parts = [f"{passed}/{len(counted)} passed"]
    ps = {id(r): flex_params(r) for r in rs}
    keys = ("mod", *FLEX_SHAPE_KEYS)
    varying = {k for k in keys if len({str(ps[id(r)].get(k)) for r in rs}) > 1}
    groups: dict[str, list[CaseResult]] = {}
    for r in counted:
        if r.status is not Status.PASS:
            groups.setdefault(r.status.value, []).append(r)
    for st in STATUS_ORDER:
        g = groups.get(st)
        if not g:
            continue
        shared = []
        for k in keys:
            vals = {str(ps[id(r)].get(k)) for r in g}
            if k in varying and len(vals) == 1 and ps[id(g[0])].get(k) is not None:
                shared.append(_pv(k, ps[id(g[0])][k]) if k != "mod" else f"mod {ps[id(g[0])][k]}")
        parts.append(f"{len(g)} {st}" + (f" (all {', '.join(shared)})" if shared else ""))
    excluded = len(rs) - len(counted)
    if excluded:
        parts.append(f"{excluded} ref_fail (excluded)")
    return "; ".join(parts)


def flex_sentence(results: Sequence[CaseResult], summary: Mapping[str, Any]) -> str:
    """The flex suite's own sentence (the same words as its terminal summary); for cases it can't read,
    the one the run's summary.json kept, else the grouped line of `flex_summary_line`."""
    try:
        return str(flex_summary.sentence(list(results)))
    except Exception:  # it can't read these cases (e.g. a bundle from another version with odd params)
        pass
    kept = summary.get("flex", {}).get("sentence") if isinstance(summary.get("flex"), dict) else None
    return kept if isinstance(kept, str) and kept else flex_summary_line(results)


_STATUS_RANK = {
    s.value: i
    for i, s in enumerate(
        [
            Status.PASS,
            Status.REF_FAIL,
            Status.FALLBACK,
            Status.UNSUPPORTED,
            Status.SILENT_EAGER,
            Status.BUDGET,
            Status.FAIL_NUMERIC,
            Status.FAIL_COMPILE,
            Status.OOM,
            Status.CRASH,
            Status.ERROR,
        ]
    )
}


@dataclass(frozen=True)
class _Shapes:
    """The cases' flex params, and which shape keys vary across them (the heatmap's columns) or not."""

    ps: dict[int, dict[str, Any]]
    varying: list[str]
    constant: list[str]

    @classmethod
    def of(cls, rs: list[CaseResult]) -> _Shapes:
        ps = {id(r): flex_params(r) for r in rs}
        varying = [k for k in FLEX_SHAPE_KEYS if len({str(ps[id(r)].get(k)) for r in rs}) > 1]
        constant = [k for k in FLEX_SHAPE_KEYS if k not in varying and ps[id(rs[0])].get(k) is not None]
        return cls(ps, varying, constant)

    def shape(self, r: CaseResult) -> str:
        p = self.ps[id(r)]
        return ", ".join(_pv(k, p.get(k)) for k in self.varying) or "all"

    def short(self, r: CaseResult) -> str:
        p, varying = self.ps[id(r)], self.varying
        keys = list(varying) + (["kv_heads"] if "q_heads" in varying and "kv_heads" not in varying else [])
        keys += ["q_heads"] if "kv_heads" in varying and "q_heads" not in varying else []
        keys = [k for k in FLEX_SHAPE_KEYS if k in keys]
        return " ".join(x for x in (_short(k, p.get(k), p) for k in keys) if x) or "all"


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    if not results:
        return None
    rs = list(results)
    sh = _Shapes.of(rs)
    body = [f'<p class="summary-line" id="flex-line">{esc(flex_sentence(rs, page.summary))}</p>']
    if sh.constant:
        every = ", ".join(_pv(k, sh.ps[id(rs[0])][k]) for k in sh.constant)
        body.append(f'<p class="muted">every case: {esc(every)}</p>')
    body.append(plots.heatmap(*_heatmap(rs, sh), "mods x shapes, coloured by status (hover for details)"))
    cols_t = [
        col_text("mod", lambda r: sh.ps[id(r)]["mod"]),
        col_text("shape", sh.shape),
        col_status(),
        col_num("compile s", lambda r: seconds(r, "compile_s")),
        col_num("fwd ms", lambda r: metric(r, "fwd_ms")),
        col_num("bwd ms", lambda r: metric(r, "bwd_ms")),
        col_num("TFLOP/s", lambda r: metric(r, "tflops")),
        col_num("sparsity", lambda r: metric(r, "sparsity")),
        col_num("max abs err", lambda r: metric(r, "max_abs_err")),
        col_reason(),
    ]
    bad = [r for r in rs if r.status is not Status.PASS]
    if bad:
        body.append(f"<h3>Not passing ({len(bad)})</h3>" + data_table("tbl-flex-fail", cols_t, bad))
    body.append(
        f"<details><summary>all {len(rs)} cases</summary>{filter_bar('tbl-flex', rs)}"
        f"{data_table('tbl-flex', cols_t, rs)}</details>"
    )
    return "".join(body)


def _heatmap(rs: list[CaseResult], sh: _Shapes) -> tuple[list[str], list[str], dict[tuple[str, str], plots.Cell]]:
    """Rows (mods), columns (shapes) and one cell per pair: the worst status of its cases, its tooltip."""
    rows: list[str] = []
    cols: list[str] = []
    cells: dict[tuple[str, str], plots.Cell] = {}
    for r in sorted(rs, key=lambda r: tuple(_sortable(sh.ps[id(r)].get(k)) for k in sh.varying)):
        row, col = str(sh.ps[id(r)]["mod"]), sh.short(r)
        if row not in rows:
            rows.append(row)
        if col not in cols:
            cols.append(col)
        tip = f"{row} | {sh.shape(r)}: {r.status.value}"
        for m, u in (("compile_s", "s"), ("fwd_ms", "ms"), ("bwd_ms", "ms"), ("tflops", "TFLOP/s")):
            v = metric(r, m)
            if v is not None:
                tip += f"; {m} {fmt(v)} {u}"
        if r.reason:
            tip += f"; {r.reason}"
        old = cells.get((row, col))
        if old is None or _STATUS_RANK.get(r.status.value, 99) > _STATUS_RANK.get(old.status, 99):
            label = {"pass": "✓", "budget": "T", "unsupported": "U", "fail_numeric": "N"}.get(r.status.value, "✗")
            cells[(row, col)] = plots.Cell(r.status.value, tip, label)
    return rows, cols, cells


def _sortable(v: Any) -> tuple[int, Any]:
    n = num(v) if not isinstance(v, str) else None
    return (0, n) if n is not None else (1, str(v))
