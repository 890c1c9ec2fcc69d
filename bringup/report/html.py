"""The scorecard: one self-contained HTML file (inline CSS, JS and SVG; no CDN; works offline).

It reads only the store (or a bundle) and never re-runs anything. Every string that came from a model,
a file, a device or an exception goes through `esc` (html.escape, quotes included) before it lands in
the page, in text and in attributes alike; the embedded JSON escapes `<`, `>` and `&`.

Sections: header; verdict tiles per area; smoke; probe; train (the seeds' table, loss curves, time to
first step); flex (heatmap, the "N/M passed; K budget (all ...)" line); zoo (sortable, filterable);
ops; profile; port; other suites; failures with their tracebacks.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from bringup.case import CaseResult, Status, is_failure
from bringup.report import plots
from bringup.report.plots import esc
from bringup.store import RunInfo, Store

# Areas in the order `bringup run` runs them; each has a section (empty ones say so).
AREAS: tuple[str, ...] = ("smoke", "probe", "train", "flex", "zoo", "ops", "profile", "port")
AREA_TITLES: dict[str, str] = {
    "smoke": "Smoke", "probe": "Feature probe", "train": "Training: eager vs compiled",
    "flex": "FlexAttention matrix", "zoo": "Model zoo", "ops": "Op coverage", "profile": "Profile",
    "port": "Port findings",
}  # fmt: skip
GAP_STATUSES = frozenset({Status.UNSUPPORTED, Status.FALLBACK})
STATUS_ORDER: tuple[str, ...] = tuple(s.value for s in Status)


# ---- small helpers -------------------------------------------------------------------------------
def fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return plots.fmt_num(float(v)) if abs(v) >= 1e4 or (v and abs(v) < 0.01) else f"{v:.{digits}g}"
    return str(v)


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(v) >= k:
            return f"{v / k:.3g} {unit}"
    return f"{v:.0f} B"


def fmt_dur(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 90:
        return f"{s:.1f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def fmt_time(t: float | None) -> str:
    if not t:
        return "-"
    return _dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def num(v: Any) -> float | None:
    """A finite float, or None (missing, NaN, inf, text)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            v = float(v)
        except (TypeError, ValueError):
            return None
    f = float(v)
    return f if f == f and abs(f) != float("inf") else None


def get(r: CaseResult, *keys: str) -> Any:
    """The first of `keys` found in the case's params, then fields, then metrics."""
    for k in keys:
        if k in r.params:
            return r.params[k]
        if k in r.fields:
            return r.fields[k]
        if k in r.metrics:
            return r.metrics[k].value
    return None


def metric(r: CaseResult, name: str) -> float | None:
    m = r.metrics.get(name)
    if m is not None:
        return num(m.value)
    return num(r.fields.get(name)) if name in r.fields else None


def seconds(r: CaseResult, name: str) -> float | None:
    """A duration metric in seconds, whatever unit it was recorded in."""
    m = r.metrics.get(name)
    if m is None:
        return num(r.fields.get(name))
    v = num(m.value)
    if v is None:
        return None
    return {"ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}.get(m.unit, 1.0) * v


def mfu_percent(r: CaseResult) -> float | None:
    m = r.metrics.get("mfu")
    v = num(m.value) if m is not None else num(r.fields.get("mfu"))
    if v is None:
        return None
    return v if m is not None and m.unit.strip() in ("%", "percent", "pct") else v * 100.0


def badge(status: Status | str) -> str:
    s = Status(status).value if isinstance(status, Status) else str(status)
    return f'<span class="st st-{esc(s)}">{esc(s)}</span>'


def json_for_script(data: Any) -> str:
    """JSON that is safe inside <script>: no '<', '>' or '&' can end the element or start a comment."""
    from bringup.files import json_safe

    text = json.dumps(json_safe(data), default=str, allow_nan=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))  # fmt: skip


def _template(name: str) -> str:
    return resources.files("bringup.report").joinpath("templates", name).read_text(encoding="utf-8")


@dataclass
class Col:
    """A table column: header, a cell function returning (html, sort key), numeric alignment."""

    title: str
    cell: Callable[[CaseResult], tuple[str, Any]]
    numeric: bool = False


def col_text(title: str, fn: Callable[[CaseResult], Any]) -> Col:
    def cell(r: CaseResult) -> tuple[str, Any]:
        v = fn(r)
        return ("-" if v in (None, "") else esc(v)), ("" if v is None else v)

    return Col(title, cell)


def col_num(title: str, fn: Callable[[CaseResult], float | None], show: Callable[[float], str] = fmt) -> Col:
    def cell(r: CaseResult) -> tuple[str, Any]:
        v = fn(r)
        return ("-", "") if v is None else (esc(show(v)), repr(float(v)))

    return Col(title, cell, numeric=True)


def col_status() -> Col:
    return Col("status", lambda r: (badge(r.status), STATUS_ORDER.index(r.status.value)))


def col_reason(title: str = "reason") -> Col:
    def cell(r: CaseResult) -> tuple[str, Any]:
        body = esc(r.reason) if r.reason else ""
        if r.error:
            body += f"<details><summary>traceback</summary><pre>{esc(r.error)}</pre></details>"
        return body or "-", r.reason

    return Col(title, cell)


def data_table(
    table_id: str,
    cols: Sequence[Col],
    rows: Iterable[CaseResult],
    row_attrs: Callable[[CaseResult], dict[str, str]] | None = None,
) -> str:
    """A sortable table; columns with no value in any row are left out (the first one always stays)."""
    rows = list(rows)
    cols = [c for i, c in enumerate(cols) if i == 0 or any(c.cell(r)[1] not in ("", None) for r in rows)]
    out = [f'<table class="data sortable" id="{esc(table_id)}"><thead><tr>']
    for c in cols:
        out.append(f'<th class="{"num" if c.numeric else ""}">{esc(c.title)}</th>')
    out.append("</tr></thead><tbody>")
    for r in rows:
        attrs = {"status": r.status.value, **(row_attrs(r) if row_attrs else {})}
        attr_s = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in attrs.items())
        out.append(f"<tr{attr_s}>")
        for c in cols:
            html_, key = c.cell(r)
            cls = ' class="num"' if c.numeric else (' class="reason"' if c.title in ("reason", "error") else "")
            out.append(f'<td{cls} data-v="{esc(key)}">{html_}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def filter_bar(table_id: str, results: Sequence[CaseResult], checks: Sequence[tuple[str, str]] = ()) -> str:
    """Status select, free-text search and checkboxes (name, label) matched against row data-NAME="1"."""
    present = [s for s in STATUS_ORDER if any(r.status.value == s for r in results)]
    opts = '<option value="">all statuses</option>' + "".join(
        f'<option value="{esc(s)}">{esc(s)}</option>' for s in present
    )
    boxes = "".join(f'<label><input type="checkbox" name="{esc(n)}"> {esc(lbl)}</label>' for n, lbl in checks)
    return (
        f'<form class="filters" data-table="{esc(table_id)}" role="search">'
        f'<label>status <select name="status">{opts}</select></label>'
        f'<input type="search" name="q" placeholder="filter by text (name, reason, error)" aria-label="text filter">'
        f'{boxes}<span class="shown"></span></form>'
    )


def counts_line(results: Sequence[CaseResult]) -> str:
    c = Counter(r.status.value for r in results)
    parts = [f"{badge(s)} {c[s]}" for s in STATUS_ORDER if c[s]]
    return f'<p class="counts-inline">{" ".join(f"<span>{p}</span>" for p in parts)}</p>' if parts else ""


def section(area: str, title: str, body: str) -> str:
    return f'<section id="sec-{esc(area)}" data-area="{esc(area)}"><h2>{esc(title)}</h2>{body}</section>'


def none_here(area: str) -> str:
    return f'<p class="empty">No {esc(area)} cases in this run (skipped, not planned, or not available).</p>'


# ---- verdicts --------------------------------------------------------------------------------------
@dataclass
class Verdict:
    area: str
    key: str  # pass | gaps | fail | none
    big: str
    detail: str


def verdict(area: str, results: Sequence[CaseResult], allow_unsupported: bool) -> Verdict:
    if not results:
        return Verdict(area, "none", "not run", "no cases")
    counted = [r for r in results if r.status is not Status.REF_FAIL]
    fails = [r for r in results if is_failure(r.status, allow_unsupported)]
    passed = sum(r.status is Status.PASS for r in results)
    c = Counter(r.status.value for r in results)
    detail = ", ".join(f"{c[s]} {s}" for s in STATUS_ORDER if c[s])
    key = "pass" if not fails else "gaps" if all(r.status in GAP_STATUSES for r in fails) else "fail"
    if not counted:  # every case ref_fail: nothing about the device was judged, so not green
        why = f"{detail}: the cpu reference failed, the device was not checked"
        return Verdict(area, "fail", "nothing judged", why)
    if area == "probe":
        return Verdict(area, key, f"{passed}/{len(counted)} supported", detail)
    return Verdict(area, key, f"{passed}/{len(counted)} pass", detail)


def port_data(run: RunInfo, results: Sequence[CaseResult]) -> dict[str, Any] | None:
    """Port scan results: run.info["port"] (bringup run --port), else the port suite's case fields."""
    data = run.info.get("port")
    if isinstance(data, dict):
        return data
    findings: list[Any] = []
    summary: dict[str, Any] = {}
    found = False
    for r in results:
        if r.suite == "port":
            found = True
            f = r.fields.get("findings")
            if isinstance(f, list):
                findings += f
            if isinstance(r.fields.get("summary"), dict):
                summary.update(r.fields["summary"])
    return {"findings": findings, "summary": summary} if found else None


def port_verdict(data: dict[str, Any] | None) -> Verdict:
    if data is None:
        return Verdict("port", "none", "not run", "no --port PATH")
    findings = [f for f in data.get("findings", []) if isinstance(f, dict)]
    fixable = sum(bool(f.get("fixable")) for f in findings)
    if not findings:
        return Verdict("port", "pass", "clean", "no CUDA-only code found")
    return Verdict("port", "gaps", f"{len(findings)} findings", f"{fixable} auto-fixable")


def tiles(verdicts: Sequence[Verdict]) -> str:
    out = ['<div class="tiles">']
    for v in verdicts:
        out.append(
            f'<a class="tile v-{esc(v.key)}" href="#sec-{esc(v.area)}" data-area="{esc(v.area)}">'
            f'<div class="area">{esc(v.area)}</div><div class="big">{esc(v.big)}</div>'
            f'<div class="counts">{esc(v.detail)}</div></a>'
        )
    out.append("</div>")
    return "".join(out)


# ---- sections --------------------------------------------------------------------------------------
def header(run: RunInfo, results: Sequence[CaseResult], allow_unsupported: bool) -> str:
    dur = (run.ended_at - run.started_at) if run.ended_at else None
    counted = [r for r in results if r.status is not Status.REF_FAIL]
    passed = sum(r.status is Status.PASS for r in results)
    failing = sum(is_failure(r.status, allow_unsupported) for r in results)
    rows = [
        ("device", f"{run.device} ({run.device_name})" if run.device_name else run.device),
        ("torch", run.torch_version), ("bringup", run.bringup_version), ("host", run.host),
        ("started", fmt_time(run.started_at)), ("duration", fmt_dur(dur)),
        ("run", f"{run.run_id} ({run.command}, {run.status})"),
        ("command line", " ".join(["bringup", *map(str, run.argv)])),
    ]  # fmt: skip
    imports = run.info.get("imports")
    if imports:
        rows.append(("plugins", ", ".join(map(str, imports))))
    versions = run.info.get("versions")
    if isinstance(versions, dict) and versions:
        rows.append(("libraries", ", ".join(f"{k} {v}" for k, v in versions.items())))
    kv = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    from bringup.console import unjudged_suites

    none = unjudged_suites(results)
    head = (f"{passed}/{len(counted)} cases pass; {failing} failing"
            + (" (unsupported allowed)" if allow_unsupported else "")
            + (f"; nothing judged in {', '.join(none)} (all ref_fail)" if none else ""))  # fmt: skip
    if run.status != "finished":
        head += f" — run {run.status}: results are partial"
    return (
        f'<header class="top" id="sec-header"><h1>bringup scorecard: {esc(run.device)}'
        f"{' — ' + esc(run.device_name) if run.device_name else ''}</h1>"
        f'<p class="headline">{esc(head)}</p><table class="kv">{kv}</table></header>'
    )


def generic_section(area: str, results: Sequence[CaseResult], title: str | None = None) -> str:
    if not results:
        return section(area, title or area, none_here(area))
    names: list[str] = []
    for r in results:
        for m in r.metrics:
            if m not in names:
                names.append(m)
    cols = [col_text("case", lambda r: r.name), col_status()]
    cols += [col_num(m, lambda r, m=m: metric(r, m)) for m in names[:10]]
    cols += [col_num("wall s", lambda r: r.wall_s), col_reason()]
    return section(area, title or area, counts_line(results) + data_table(f"tbl-{area}", cols, results))


def probe_section(results: Sequence[CaseResult]) -> str:
    if not results:
        return section("probe", AREA_TITLES["probe"], none_here("probe"))
    word = {Status.PASS: "supported"}
    cols = [
        col_text("feature", lambda r: get(r, "feature") or r.name),
        Col(
            "verdict",
            lambda r: (f"{badge(r.status)} {esc(word.get(r.status, ''))}", STATUS_ORDER.index(r.status.value)),
        ),  # fmt: skip
        col_reason("detail"),
    ]
    return section("probe", AREA_TITLES["probe"], counts_line(results) + data_table("tbl-probe", cols, results))


# -- train
_MODE_ORDER = {"eager": 0, "compile": 1, "regional": 2}
_CACHE_ORDER = {"": 0, "cold": 1, "warm": 2}


def train_label(r: CaseResult) -> str:
    mode = str(get(r, "mode") or r.name)
    cache = get(r, "cache")
    nproc = get(r, "nproc")
    label = mode if not cache or cache == "none" or (mode == "eager" and cache == "cold") else f"{mode} ({cache})"
    return label + (f" x{nproc}" if isinstance(nproc, int) and nproc > 1 else "")


def _train_key(r: CaseResult) -> tuple[Any, ...]:
    mode, cache = str(get(r, "mode") or r.name), str(get(r, "cache") or "")
    return (_MODE_ORDER.get(mode, 9), mode, _CACHE_ORDER.get(cache, 9), cache, r.name)


def compile_phases(r: CaseResult) -> list[tuple[str, float]]:
    """Compile phase seconds: fields["compile_breakdown"] (phase -> s) or metrics named compile_* (not the
    totals compile_s / *total*)."""
    bd = r.fields.get("compile_breakdown")
    out: list[tuple[str, float]] = []
    if isinstance(bd, dict) and bd:
        for k, v in bd.items():
            f = num(v)
            if f is not None and "total" not in str(k):
                out.append((str(k).removesuffix("_s").replace("_", " "), f))
        return out
    for name in r.metrics:
        if name.startswith("compile_") and name != "compile_s" and not any(w in name for w in ("total", "after")):
            v = seconds(r, name)
            if v is not None:
                label = name.removeprefix("compile_").removesuffix("_s").replace("_", " ")
                out.append((label, v))
    return out


REST = "first step run (rest)"


def ttfs_bars(results: Sequence[CaseResult]) -> list[tuple[str, list[tuple[str, float]]]]:
    bars = []
    for r in results:
        ttfs = seconds(r, "ttfs_s")
        if ttfs is None:
            continue
        phases = compile_phases(r)
        rest = ttfs - sum(v for _, v in phases)
        segs = [(f"compile: {k}", v) for k, v in phases]
        segs.append((REST, max(rest, 0.0)))
        bars.append((train_label(r), segs))
    return bars


def _train_setup(r: CaseResult) -> str:
    """model: params, FLOPs/token; batch x seq x ranks, dtype; the MFU peak and its source."""
    parts = [str(get(r, "model") or "?")]
    n, f = metric(r, "params"), metric(r, "flops_per_token")
    if n:
        parts.append(f"{plots.fmt_num(n)} params")
    if f:
        parts.append(f"{f:.3g} FLOPs/token")
    shape = [f"{k} {r.params[k]}" for k in ("batch", "seq", "nproc", "dtype") if k in r.params]
    text = ", ".join(parts) + ("; " + ", ".join(shape) if shape else "")
    peak = metric(r, "peak_flops")
    if peak:
        text += f"; MFU against {peak:.3g} FLOP/s" + (f" ({r.fields['peak_flops_source']})"
                                                      if r.fields.get("peak_flops_source") else "")  # fmt: skip
    return text


def train_section(results: Sequence[CaseResult], summary: dict[str, Any] | None = None) -> str:
    if not results:
        return section("train", AREA_TITLES["train"], none_here("train"))
    flops_only = [r for r in results if get(r, "flops_only")]
    rs = sorted((r for r in results if not get(r, "flops_only")), key=_train_key)
    head = [f"<p>FLOPs only: {esc(_train_setup(r))} {badge(r.status)} {esc(r.reason)}</p>" for r in flops_only]
    if not rs:
        return section("train", AREA_TITLES["train"], "".join(head))
    eager = next((r for r in rs if str(get(r, "mode")) == "eager" and r.status is Status.PASS), None)
    e_tps = metric(eager, "tokens_per_s") if eager else None
    e_step = seconds(eager, "step_s") if eager else None

    def speedup(r: CaseResult) -> float | None:
        tps = metric(r, "tokens_per_s")
        if e_tps and tps:
            return tps / e_tps
        step = seconds(r, "step_s")
        return e_step / step if e_step and step else None

    def ratio(r: CaseResult) -> float | None:
        v = metric(r, "first_over_steady")
        if v is None:
            t, s = seconds(r, "ttfs_s"), seconds(r, "step_s")
            v = t / s if t and s else None
        return v

    cols = [
        col_text("mode", train_label), col_status(),
        col_num("first step s", lambda r: seconds(r, "ttfs_s")),
        col_num("steady step s", lambda r: seconds(r, "step_s")),
        col_num("ratio", ratio, lambda v: f"{v:.1f}x"),
        col_num("tok/s", lambda r: metric(r, "tokens_per_s"), lambda v: f"{v:,.0f}"),
        col_num("tok/s/device", lambda r: metric(r, "tokens_per_s_per_device"), lambda v: f"{v:,.0f}"),
        col_num("MFU %", mfu_percent, lambda v: f"{v:.2f}"),
        col_num("speed-up vs eager", speedup, lambda v: f"{v:.2f}x"),
        col_num("peak mem", lambda r: metric(r, "peak_mem_bytes"), fmt_bytes),
        col_num("graph breaks", lambda r: metric(r, "graph_breaks"), lambda v: f"{v:.0f}"),
        col_num("recompiles", lambda r: metric(r, "recompiles"), lambda v: f"{v:.0f}"),
        col_reason(),
    ]  # fmt: skip
    first = next((r for r in rs if "params" in r.metrics), rs[0])
    body = [
        *head,
        f'<p class="muted">{esc(_train_setup(first))}</p>',
        counts_line(rs),
        data_table("tbl-train", cols, rs),
    ]
    t_extra = (summary or {}).get("train")
    advice = t_extra.get("advice") if isinstance(t_extra, dict) else None
    if isinstance(advice, str) and advice:
        body.append(f'<p class="summary-line">{esc(advice[0].upper() + advice[1:])}</p>')
    fast = [r for r in rs if r.status is Status.PASS and seconds(r, "ttfs_s") is not None
            and str(get(r, "mode")) != "eager"]  # fmt: skip
    if fast:
        best = min(fast, key=lambda r: seconds(r, "ttfs_s") or 0.0)
        sp = speedup(best)
        e_ttfs = seconds(eager, "ttfs_s") if eager else None
        body.append(
            f'<p class="summary-line">Fastest compiled start: {esc(train_label(best))}, first step '
            f"{esc(fmt(seconds(best, 'ttfs_s')))} s" + (f" (eager {esc(fmt(e_ttfs))} s)" if e_ttfs else "")
            + f"; steady {esc(fmt(seconds(best, 'step_s')))} s/step"
            + (f", {esc(f'{sp:.2f}')}x eager throughput" if sp else "") + "</p>"
        )  # fmt: skip
    losses = {train_label(r): r.series["loss"] for r in rs if r.series.get("loss")}
    plots_html = [plots.line_chart(losses, "Loss per step (same seed, same data)", "step", "loss")]
    ref = dict(eager.series.get("loss", [])) if eager else {}
    if ref and len(losses) > 1:
        dev = {
            label: [(s, v - ref[s]) for s, v in pts if s in ref]
            for label, pts in losses.items()
            if label != train_label(eager)
        }  # type: ignore[arg-type]
        plots_html.append(plots.line_chart(dev, "Loss minus eager loss, per step", "step", "difference"))
    nested = [train_label(r) for r in rs if (seconds(r, "ttfs_s") or 0) * 1.02 < sum(v for _, v in compile_phases(r))]
    if nested:
        body.append(f'<p class="muted">compile phases add up to more than the first step for {esc(", ".join(nested))}'
                    ": the recorded phases overlap (nested timers); their bars show the phases' sum.</p>")  # fmt: skip
    plots_html.append(plots.stacked_bars(ttfs_bars(rs), "Time to first step: compile phases + first step", "s",
                                         last=[REST], colours={REST: "#7f8c8d"}))  # fmt: skip
    body.append(f'<div class="plots">{"".join(plots_html)}</div>')
    return section("train", AREA_TITLES["train"], "".join(body))


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


def flex_sentence(results: Sequence[CaseResult], summary: dict[str, Any]) -> str:
    """The flex suite's own sentence (the same words as its terminal summary) when its module is in this
    checkout; else the one its summary.json kept; else computed here."""
    try:
        from bringup.flex import summary as flex_summary

        return str(flex_summary.sentence(list(results)))
    except Exception:  # the module is absent or can't read these cases (e.g. a bundle from another version)
        pass
    kept = summary.get("flex", {}).get("sentence") if isinstance(summary.get("flex"), dict) else None
    return kept if isinstance(kept, str) and kept else flex_summary_line(results)


_STATUS_RANK = {s.value: i for i, s in enumerate(
    [Status.PASS, Status.REF_FAIL, Status.FALLBACK, Status.UNSUPPORTED, Status.SILENT_EAGER, Status.BUDGET,
     Status.FAIL_NUMERIC, Status.FAIL_COMPILE, Status.OOM, Status.CRASH, Status.ERROR])}  # fmt: skip


def flex_section(results: Sequence[CaseResult], summary: dict[str, Any]) -> str:
    if not results:
        return section("flex", AREA_TITLES["flex"], none_here("flex"))
    rs = list(results)
    ps = {id(r): flex_params(r) for r in rs}
    varying = [k for k in FLEX_SHAPE_KEYS if len({str(ps[id(r)].get(k)) for r in rs}) > 1]
    constant = [k for k in FLEX_SHAPE_KEYS if k not in varying and ps[id(rs[0])].get(k) is not None]

    def shape(r: CaseResult) -> str:
        p = ps[id(r)]
        return ", ".join(_pv(k, p.get(k)) for k in varying) or "all"

    def short(r: CaseResult) -> str:
        p = ps[id(r)]
        keys = list(varying) + (["kv_heads"] if "q_heads" in varying and "kv_heads" not in varying else [])
        keys += ["q_heads"] if "kv_heads" in varying and "q_heads" not in varying else []
        keys = [k for k in FLEX_SHAPE_KEYS if k in keys]
        return " ".join(x for x in (_short(k, p.get(k), p) for k in keys) if x) or "all"

    rows: list[str] = []
    cols: list[str] = []
    cells: dict[tuple[str, str], plots.Cell] = {}
    for r in sorted(rs, key=lambda r: tuple(_sortable(ps[id(r)].get(k)) for k in varying)):
        row, col = str(ps[id(r)]["mod"]), short(r)
        if row not in rows:
            rows.append(row)
        if col not in cols:
            cols.append(col)
        tip = f"{row} | {shape(r)}: {r.status.value}"
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
    line = flex_sentence(rs, summary)
    body = [f'<p class="summary-line" id="flex-line">{esc(line)}</p>']
    if constant:
        body.append(f'<p class="muted">every case: {esc(", ".join(_pv(k, ps[id(rs[0])][k]) for k in constant))}</p>')
    body.append(plots.heatmap(rows, cols, cells, "mods x shapes, coloured by status (hover for details)"))
    metric_cols = [
        col_num("compile s", lambda r: seconds(r, "compile_s")),
        col_num("fwd ms", lambda r: metric(r, "fwd_ms")), col_num("bwd ms", lambda r: metric(r, "bwd_ms")),
        col_num("TFLOP/s", lambda r: metric(r, "tflops")), col_num("sparsity", lambda r: metric(r, "sparsity")),
        col_num("max abs err", lambda r: metric(r, "max_abs_err")),
    ]  # fmt: skip
    cols_t = [col_text("mod", lambda r: ps[id(r)]["mod"]), col_text("shape", shape), col_status(),
              *metric_cols, col_reason()]  # fmt: skip
    bad = [r for r in rs if r.status is not Status.PASS]
    if bad:
        body.append(f"<h3>Not passing ({len(bad)})</h3>" + data_table("tbl-flex-fail", cols_t, bad))
    body.append(f"<details><summary>all {len(rs)} cases</summary>{filter_bar('tbl-flex', rs)}"
                f"{data_table('tbl-flex', cols_t, rs)}</details>")  # fmt: skip
    return section("flex", AREA_TITLES["flex"], "".join(body))


def _sortable(v: Any) -> tuple[int, Any]:
    n = num(v) if not isinstance(v, str) else None
    return (0, n) if n is not None else (1, str(v))


# -- zoo
def _listish(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, dict):
        return [f"{k} ({c})" if c not in (None, "", 1) else str(k) for k, c in v.items()]
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            if isinstance(x, dict):
                out.append(str(x.get("reason") or x.get("op") or x.get("name") or json.dumps(x, default=str)))
            else:
                out.append(str(x))
        return out
    return [str(v)]


def _count(r: CaseResult, name: str) -> float | None:
    v = metric(r, name)
    if v is None and isinstance(r.fields.get(name), (list, dict)):
        return float(len(r.fields[name]))
    return v


def zoo_section(results: Sequence[CaseResult]) -> str:
    if not results:
        return section("zoo", AREA_TITLES["zoo"], none_here("zoo"))
    rs = list(results)

    def listcell(title: str, key: str, count_key: str | None = None) -> Col:
        def cell(r: CaseResult) -> tuple[str, Any]:
            items = _listish(r.fields.get(key))
            n = _count(r, count_key) if count_key else float(len(items))
            if not items:
                return ("-" if n is None else esc(fmt(n))), ("" if n is None else repr(n))
            shown = esc(fmt(n)) if count_key and n is not None else str(len(items))
            lis = "".join(f"<li>{esc(x)}</li>" for x in items[:50])
            more = f"<li>... {len(items) - 50} more</li>" if len(items) > 50 else ""
            return f"<details><summary>{shown}</summary><ul>{lis}{more}</ul></details>", repr(n or len(items))

        return Col(title, cell, numeric=True)

    cols = [
        col_text("model", lambda r: r.name), col_status(),
        col_num("params", lambda r: metric(r, "params"), plots.fmt_num),
        listcell("graph breaks", "break_reasons", "graph_breaks"),
        listcell("fallback ops", "fallback_ops"),
        col_num("max rel err", lambda r: metric(r, "max_rel_err")),
        col_num("loss divergence", lambda r: metric(r, "loss_divergence")),
        col_num("compile s", lambda r: seconds(r, "compile_s")),
        col_num("wall s", lambda r: r.wall_s),
        col_num("peak mem", lambda r: metric(r, "peak_mem_bytes"), fmt_bytes),
        col_text("baseline", _baseline),
        col_reason("error"),
    ]  # fmt: skip

    def attrs(r: CaseResult) -> dict[str, str]:
        gb = _count(r, "graph_breaks") or 0
        fb = len(_listish(r.fields.get("fallback_ops"))) or (metric(r, "fallback_ops") or 0)
        return {"gb": "1" if gb > 0 else "0", "fb": "1" if fb > 0 else "0", "err": "1" if r.error or r.reason else "0"}

    body = [counts_line(rs)]
    reasons = Counter(_reason_key(r) for r in rs if is_failure(r.status) or r.status is Status.REF_FAIL)
    if reasons:
        lis = "".join(f"<li>{n} x {esc(k)}</li>" for k, n in reasons.most_common(15))
        body.append(f"<details><summary>failures by reason ({sum(reasons.values())})</summary><ul>{lis}</ul></details>")
    body.append(filter_bar("tbl-zoo", rs, [("gb", "graph breaks"), ("fb", "fallback ops"), ("err", "has error")]))
    body.append(data_table("tbl-zoo", cols, rs, attrs))
    return section("zoo", AREA_TITLES["zoo"], "".join(body))


def _baseline(r: CaseResult) -> str | None:
    """The zoo's comparison with a --baseline bundle, when the run had one."""
    bl = r.fields.get("baseline_check")
    if not isinstance(bl, dict):
        return None
    return str(bl.get("status") or "compared")


def _reason_key(r: CaseResult) -> str:
    line = (r.reason or r.error.strip().splitlines()[-1:] and r.error.strip().splitlines()[-1] or "").strip()
    return f"{r.status.value}: {line[:90]}" if line else r.status.value


# -- ops
def ops_section(results: Sequence[CaseResult]) -> str:
    if not results:
        return section("ops", AREA_TITLES["ops"], none_here("ops"))
    rs = list(results)
    cols = [
        col_text("op", lambda r: get(r, "op") or r.name), col_text("dtype", lambda r: get(r, "dtype")),
        col_status(), col_num("samples", lambda r: metric(r, "samples"), lambda v: f"{v:.0f}"),
        col_text("CPU-fallback ops", lambda r: ", ".join(_listish(r.fields.get("fallback_ops"))) or None),
        col_num("max abs err", lambda r: metric(r, "max_abs_err")), col_reason(),
    ]  # fmt: skip
    by_dtype: dict[str, Counter[str]] = {}
    for r in rs:
        by_dtype.setdefault(str(get(r, "dtype") or "-"), Counter())[r.status.value] += 1
    present = [s for s in STATUS_ORDER if any(r.status.value == s for r in rs)]
    pivot = ['<table class="data"><thead><tr><th>dtype</th>']
    pivot += [f'<th class="num">{badge(s)}</th>' for s in present] + ["</tr></thead><tbody>"]
    for d, c in by_dtype.items():
        pivot.append(f"<tr><td>{esc(d)}</td>" + "".join(f'<td class="num">{c[s]}</td>' for s in present) + "</tr>")
    pivot.append("</tbody></table>")
    body = [counts_line(rs), "".join(pivot), filter_bar("tbl-ops", rs), data_table("tbl-ops", cols, rs)]
    return section("ops", AREA_TITLES["ops"], "".join(body))


# -- profile
@dataclass(frozen=True)
class Where:
    """Where the report goes (`out_dir`) and where the run's folder is now (`run_dir`), to link artifacts."""

    out_dir: Path | None = None
    run_dir: Path | None = None
    run_id: str = ""

    def locate(self, path: str) -> Path:
        """An artifact path as stored (absolute, or relative to the directory the run was started in)
        -> where it is now: re-rooted under the run's folder when it names that folder."""
        p = Path(path)
        if self.run_dir is not None and self.run_id and self.run_id in p.parts:
            moved = self.run_dir / Path(*p.parts[p.parts.index(self.run_id) + 1 :])
            if moved.exists() or not p.exists():
                return moved
        return p

    def link(self, path: str) -> str:
        p = self.locate(path)
        href = p.as_uri() if p.is_absolute() else path
        if self.out_dir is not None:
            try:
                href = os.path.relpath(p.absolute(), self.out_dir)
            except ValueError:
                pass
        return f'<a href="{esc(href)}">{esc(path)}</a>'


def _kv_table(d: dict[str, Any]) -> str:
    def show(v: Any) -> str:
        return json.dumps(v, default=str) if isinstance(v, (dict, list)) else fmt(v)

    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(show(v))}</td></tr>" for k, v in d.items())
    return f'<table class="kv">{rows}</table>'


def dict_table(table_id: str, rows: Sequence[Any], cols: Sequence[tuple[str, str, Callable[[Any], str]]]) -> str:
    """A sortable table of dict rows: cols = (key, title, format); non-dict rows are skipped."""
    head = "".join(f'<th class="{"" if k == "name" else "num"}">{esc(t)}</th>' for k, t, _ in cols)
    body = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        cells = []
        for k, _, f in cols:
            v = row.get(k)
            n = num(v)
            key = repr(n) if n is not None else ("" if v is None else str(v))
            cls = "" if k == "name" else ' class="num"'
            cells.append(f'<td{cls} data-v="{esc(key)}">{esc(f(v) if v is not None else "-")}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<table class="data sortable" id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")  # fmt: skip


def _ms(v: Any) -> str:
    f = num(v)
    if f is None:
        return "n/a"
    return f"{f:.3g} s" if abs(f) >= 1 else f"{f * 1e3:.3g} ms"


def profile_section(results: Sequence[CaseResult], where: Where) -> str:
    if not results:
        return section("profile", AREA_TITLES["profile"], none_here("profile"))
    body: list[str] = []
    for i, r in enumerate(results):
        desc = ", ".join(f"{k} {r.params[k]}" for k in ("model", "mode", "steps", "batch", "seq") if k in r.params)
        body.append(f"<h3>{esc(r.name)} {badge(r.status)}</h3>" + (f'<p class="muted">{esc(desc)}</p>' if desc else ""))
        if r.reason:
            body.append(f'<p class="reason">{esc(r.reason)}</p>')
        step = get(r, "step_s")
        times = {k: get(r, k) for k in ("busy_s", "idle_s", "host_s")}
        names = {"busy_s": "device busy", "idle_s": "device idle", "host_s": "host overhead"}
        parts = [f"{names[k]} {_ms(v)}" for k, v in times.items()]
        head = f"per step: {_ms(step)}; " if num(step) is not None else ""
        body.append(f'<p class="summary-line">{esc(head + "; ".join(parts))}</p>')
        if all(num(v) is None for v in times.values()):
            body.append('<p class="muted">busy / idle / host: n/a: the trace holds no device events '
                        "(on cpu the device timeline is the host timeline).</p>")  # fmt: skip
        else:
            segs = [(names[k], float(num(v) or 0.0)) for k, v in times.items() if num(v) is not None]
            body.append(plots.stacked_bars([(r.name, [(k, v * 1e3) for k, v in segs])], "Step time split", "ms"))
        top = r.fields.get("top_ops")
        if isinstance(top, list) and top:
            rows = [{**o, "self_s": o.get("self_s", o.get("self_time", o.get("self_time_s"))),
                     "name": str(o.get("name", "?")) + (" [CPU fallback]" if o.get("fallback") else "")}
                    for o in top if isinstance(o, dict)]  # fmt: skip
            body.append("<h3>Top ops by self time (per step)</h3>" + dict_table(
                f"tbl-profile-ops-{i}", rows, [("name", "op", str), ("kind", "kind", str), ("calls", "calls", fmt),
                                               ("self_s", "self time", _ms), ("pct", "%", fmt)]))  # fmt: skip
        kern = r.fields.get("top_kernels")
        if isinstance(kern, list) and kern:
            body.append("<h3>Top device kernels (per step)</h3>" + dict_table(
                f"tbl-profile-kernels-{i}", kern, [("name", "kernel", str), ("kind", "kind", str),
                                                   ("calls", "calls", fmt), ("time_s", "time", _ms),
                                                   ("pct_busy", "% busy", fmt)]))  # fmt: skip
        tr = r.fields.get("transfers")
        body.append("<h3>Host &lt;-&gt; device transfers (per step)</h3>")
        moved = isinstance(tr, dict) and any(num(v.get("count")) for v in tr.values() if isinstance(v, dict))
        if isinstance(tr, dict) and tr and not moved and all(isinstance(v, dict) for v in tr.values()):
            body.append('<p class="muted">none (no tensor crossed a host/device boundary; on cpu there is none)</p>')
        elif isinstance(tr, dict) and tr and all(isinstance(v, dict) for v in tr.values()):
            rows = [{"name": str(d).upper(), **v} for d, v in tr.items()]
            body.append(dict_table(f"tbl-profile-transfers-{i}", rows, [
                ("name", "direction", str), ("count", "count", fmt), ("bytes", "bytes", lambda v: fmt_bytes(num(v))),
                ("time_s", "time", _ms), ("time_from", "time from", str)]))  # fmt: skip
        elif isinstance(tr, dict) and tr:
            body.append(_kv_table(tr))
        else:
            body.append('<p class="muted">n/a (the profiler recorded no tensor devices)</p>')
        fb = r.fields.get("fallback_ops")
        if fb:
            body.append(f"<p><b>CPU-fallback ops</b>: {esc(', '.join(_listish(fb)))}</p>")
        regions = r.fields.get("compiled_regions")
        if isinstance(regions, list) and regions:
            body.append(f"<h3>Compiled regions ({esc(_ms(get(r, 'compiled_s')))} of the step)</h3>" + dict_table(
                f"tbl-profile-regions-{i}", regions, [("name", "region", str), ("calls", "calls", fmt),
                                                      ("time_s", "time", _ms)]))  # fmt: skip
        if r.fields.get("note"):
            body.append(f'<p class="muted">{esc(r.fields["note"])}</p>')
        for name, path in r.artifacts.items():
            hint = (
                " (opens offline in ui.perfetto.dev)"
                if str(path).endswith((".json.gz", ".json")) and "trace" in name
                else ""
            )
            body.append(f"<p>{esc(name)}: {where.link(path)}{esc(hint)}</p>")
        if r.error:
            body.append(f"<details><summary>traceback</summary><pre>{esc(r.error)}</pre></details>")
    return section("profile", AREA_TITLES["profile"], "".join(body))


# -- port
def port_section(data: dict[str, Any] | None) -> str:
    if data is None:
        hint = '<p class="empty">No port scan in this run (use <code>bringup run --port PATH</code>).</p>'
        return section("port", AREA_TITLES["port"], hint)
    findings = [f for f in data.get("findings", []) if isinstance(f, dict)]
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    body = []
    if not findings:
        body.append('<p class="summary-line">No CUDA-only code found.</p>')
    else:
        fixable = sum(bool(f.get("fixable")) for f in findings)
        by_code = Counter(str(f.get("code", "?")) for f in findings)
        rules = ", ".join(f"{k} {n}" for k, n in sorted(by_code.items()))
        body.append(f'<p class="summary-line">{len(findings)} findings, {fixable} fixable with '
                    f"<code>bringup port --fix</code>; by rule: {esc(rules)}</p>")  # fmt: skip
        rows = []
        for f in findings:
            loc = f"{f.get('file', '?')}:{f.get('line', '?')}:{f.get('col', '?')}"
            fx = "1" if f.get("fixable") else "0"
            word = "fixable" if fx == "1" else "manual"
            rows.append(f'<tr data-status="{word}" data-fixable="{fx}"><td data-v="{esc(loc)}">{esc(loc)}</td>'
                        f'<td>{esc(f.get("code", ""))}</td><td class="reason">{esc(f.get("message", ""))}</td>'
                        f"<td>{word}</td></tr>")  # fmt: skip
        body.append('<form class="filters" data-table="tbl-port" role="search">'
                    '<input type="search" name="q" placeholder="filter findings" aria-label="filter findings">'
                    '<label><input type="checkbox" name="fixable"> fixable only</label>'
                    '<span class="shown"></span></form>')  # fmt: skip
        body.append('<table class="data sortable" id="tbl-port"><thead><tr><th>where</th><th>code</th>'
                    f"<th>message</th><th>fix</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")  # fmt: skip
    extra = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
    if extra:
        body.append("<details><summary>scan summary</summary>" + _kv_table(extra) + "</details>")
    return section("port", AREA_TITLES["port"], "".join(body))


def failures_section(results: Sequence[CaseResult], allow_unsupported: bool) -> str:
    bad = [r for r in results if is_failure(r.status, allow_unsupported)]
    if not bad:
        return section("failures", "Failures", '<p class="empty">No failing cases.</p>')
    items = []
    for r in bad:
        tb = f"<details><summary>traceback</summary><pre>{esc(r.error)}</pre></details>" if r.error else ""
        items.append(f"<li>{esc(r.suite)}/{esc(r.name)} {badge(r.status)} {esc(r.reason)}{tb}</li>")
    return section("failures", f"Failures ({len(bad)})", f'<ul class="failures">{"".join(items)}</ul>')


# ---- the page --------------------------------------------------------------------------------------
def _expectations(block: dict[str, Any]) -> str:
    from bringup.expect.html import section_html  # --expect FILE: classes per area (docs/expect.md)

    return section_html(block)


def render(run: RunInfo, results: Sequence[CaseResult], summary: dict[str, Any] | None = None,
           out_dir: Path | None = None, run_dir: Path | None = None) -> str:  # fmt: skip
    """The whole page as a string. Reads nothing but its arguments and the packaged templates (and
    checks whether artifact files exist under `run_dir`, to link them from `out_dir`)."""
    from bringup.report.contract import contract

    summary = summary or {}
    opts = run.info.get("options") if isinstance(run.info.get("options"), dict) else {}
    allow = bool(opts.get("allow_unsupported", False))
    by_suite: dict[str, list[CaseResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    port = port_data(run, results)
    verdicts = [verdict(a, by_suite.get(a, []), allow) for a in AREAS if a != "port"]
    verdicts.append(port_verdict(port))
    others = [s for s in by_suite if s not in AREAS]
    verdicts += [verdict(s, by_suite[s], allow) for s in others]
    sections = [
        section("verdict", "Verdict by area", tiles(verdicts)),
        *([_expectations(run.info["expectations"])] if isinstance(run.info.get("expectations"), dict) else []),
        generic_section("smoke", by_suite.get("smoke", []), AREA_TITLES["smoke"]),
        probe_section(by_suite.get("probe", [])),
        train_section(by_suite.get("train", []), summary),
        flex_section(by_suite.get("flex", []), summary),
        zoo_section(by_suite.get("zoo", [])),
        ops_section(by_suite.get("ops", [])),
        profile_section(by_suite.get("profile", []), Where(out_dir, run_dir, run.run_id)),
        port_section(port),
        *[generic_section(s, by_suite[s]) for s in others],
        failures_section(results, allow),
    ]
    toc_ids = ["verdict", *AREAS, *others, "failures"]
    toc = "".join(f'<a href="#sec-{esc(a)}">{esc(a)}</a>' for a in toc_ids)
    data = contract(run, list(results), {"port": port} if port else None)
    title = f"bringup scorecard: {run.device} {run.device_name} {fmt_time(run.started_at)}"
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\';'
        " script-src 'unsafe-inline'; img-src data:\">",
        f"<title>{esc(title)}</title><style>{_template('report.css')}</style></head><body>",
        header(run, results, allow), f'<nav class="toc">{toc}</nav><main>', *sections, "</main>",
        f'<footer>Generated by bringup {esc(run.bringup_version)} from run {esc(run.run_id)} on '
        f"{esc(fmt_time(time.time()))}. Self-contained: no network access needed.</footer>",
        f'<script type="application/json" id="bringup-data">{json_for_script(data)}</script>',
        f"<script>{_template('report.js')}</script></body></html>\n",
    ])  # fmt: skip


def read_summary(run: RunInfo) -> dict[str, Any]:
    """The run's summary.json (suite extras such as flex's line), when it is still there and readable."""
    path = run.info.get("summary")
    if not isinstance(path, str):
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def default_path(store: Store, run_id: str) -> Path:
    return store.path.parent / run_id / "report.html"


def write_report(store: Store, run_id: str, out: str | os.PathLike[str] | None) -> Path:
    """Render run `run_id` from `store` into `out` (default `<db dir>/<run_id>/report.html`), atomically."""
    from bringup.files import atomic_write_text

    run = store.get_run(run_id)
    results = store.results(run_id)
    path = Path(out) if out else default_path(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    run_dir = (store.path.parent / run_id).absolute()
    text = render(run, results, read_summary(run), path.resolve().parent, run_dir)
    return atomic_write_text(path, text)
