"""profile's HTML section: per case the step split (busy / idle / host), top ops and kernels, transfers,
CPU-fallback ops, compiled regions and links to the traces."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bringup.api import Page
from bringup.case import CaseResult
from bringup.report import plots
from bringup.report.kit import (
    Where,
    badge,
    dict_table,
    esc,
    fmt,
    fmt_bytes,
    get,
    kv_table,
    listish,
    num,
)


def _ms(v: Any) -> str:
    f = num(v)
    if f is None:
        return "n/a"
    return f"{f:.3g} s" if abs(f) >= 1 else f"{f * 1e3:.3g} ms"


def render(results: Sequence[CaseResult], page: Page) -> str | None:
    where = Where(page.out_dir, page.run_dir, page.run.run_id)
    if not results:
        return None
    body: list[str] = []
    for i, r in enumerate(results):
        body += _head(r)
        body += _step_split(r)
        body += _tables(r, i)
        body += _transfers(r, i)
        body += _regions(r, i)
        body += _links(r, where)
    return "".join(body)


def _head(r: CaseResult) -> list[str]:
    desc = ", ".join(f"{k} {r.params[k]}" for k in ("model", "mode", "steps", "batch", "seq") if k in r.params)
    out = [f"<h3>{esc(r.name)} {badge(r.status)}</h3>" + (f'<p class="muted">{esc(desc)}</p>' if desc else "")]
    if r.reason:
        out.append(f'<p class="reason">{esc(r.reason)}</p>')
    return out


_SPLIT = {"busy_s": "device busy", "idle_s": "device idle", "host_s": "host overhead"}


def _step_split(r: CaseResult) -> list[str]:
    """The step's time: device busy / idle / host overhead, as a line and a stacked bar."""
    step = get(r, "step_s")
    times = {k: get(r, k) for k in _SPLIT}
    parts = [f"{_SPLIT[k]} {_ms(v)}" for k, v in times.items()]
    head = f"per step: {_ms(step)}; " if num(step) is not None else ""
    out = [f'<p class="summary-line">{esc(head + "; ".join(parts))}</p>']
    if all(num(v) is None for v in times.values()):
        out.append(
            '<p class="muted">busy / idle / host: n/a: the trace holds no device events '
            "(on cpu the device timeline is the host timeline).</p>"
        )
    else:
        segs = [(_SPLIT[k], float(num(v) or 0.0)) for k, v in times.items() if num(v) is not None]
        out.append(plots.stacked_bars([(r.name, [(k, v * 1e3) for k, v in segs])], "Step time split", "ms"))
    return out


def _tables(r: CaseResult, i: int) -> list[str]:
    """Top ops by self time and top device kernels."""
    out = []
    top = r.fields.get("top_ops")
    if isinstance(top, list) and top:
        rows = [
            {
                **o,
                "self_s": o.get("self_s", o.get("self_time", o.get("self_time_s"))),
                "name": str(o.get("name", "?")) + (" [CPU fallback]" if o.get("fallback") else ""),
            }
            for o in top
            if isinstance(o, dict)
        ]
        cols: list[tuple[str, str, Callable[[Any], str]]] = [
            ("name", "op", str),
            ("kind", "kind", str),
            ("calls", "calls", fmt),
        ]
        cols += [("self_s", "self time", _ms), ("pct", "%", fmt)]
        out.append("<h3>Top ops by self time (per step)</h3>" + dict_table(f"tbl-profile-ops-{i}", rows, cols))
    kern = r.fields.get("top_kernels")
    if isinstance(kern, list) and kern:
        cols = [
            ("name", "kernel", str),
            ("kind", "kind", str),
            ("calls", "calls", fmt),
        ]
        cols += [("time_s", "time", _ms), ("pct_busy", "% busy", fmt)]
        out.append("<h3>Top device kernels (per step)</h3>" + dict_table(f"tbl-profile-kernels-{i}", kern, cols))
    return out


def _transfers(r: CaseResult, i: int) -> list[str]:
    """Host <-> device transfers per step: none, a table per direction, or n/a."""
    tr = r.fields.get("transfers")
    out = ["<h3>Host &lt;-&gt; device transfers (per step)</h3>"]
    moved = isinstance(tr, dict) and any(num(v.get("count")) for v in tr.values() if isinstance(v, dict))
    if isinstance(tr, dict) and tr and not moved and all(isinstance(v, dict) for v in tr.values()):
        out.append('<p class="muted">none (no tensor crossed a host/device boundary; on cpu there is none)</p>')
    elif isinstance(tr, dict) and tr and all(isinstance(v, dict) for v in tr.values()):
        rows = [{"name": str(d).upper(), **v} for d, v in tr.items()]
        cols: list[tuple[str, str, Callable[[Any], str]]] = [
            ("name", "direction", str),
            ("count", "count", fmt),
            ("bytes", "bytes", lambda v: fmt_bytes(num(v))),
            ("time_s", "time", _ms),
            ("time_from", "time from", str),
        ]
        out.append(dict_table(f"tbl-profile-transfers-{i}", rows, cols))
    elif isinstance(tr, dict) and tr:
        out.append(kv_table(tr))
    else:
        out.append('<p class="muted">n/a (the profiler recorded no tensor devices)</p>')
    return out


def _regions(r: CaseResult, i: int) -> list[str]:
    """CPU-fallback ops, compiled regions, the case's note."""
    out = []
    if fb := r.fields.get("fallback_ops"):
        out.append(f"<p><b>CPU-fallback ops</b>: {esc(', '.join(listish(fb)))}</p>")
    regions = r.fields.get("compiled_regions")
    if isinstance(regions, list) and regions:
        out.append(
            f"<h3>Compiled regions ({esc(_ms(get(r, 'compiled_s')))} of the step)</h3>"
            + dict_table(
                f"tbl-profile-regions-{i}",
                regions,
                [("name", "region", str), ("calls", "calls", fmt), ("time_s", "time", _ms)],
            )
        )
    if r.fields.get("note"):
        out.append(f'<p class="muted">{esc(r.fields["note"])}</p>')
    return out


def _links(r: CaseResult, where: Where) -> list[str]:
    """The case's artifacts (a trace opens offline in ui.perfetto.dev) and its traceback."""
    out = []
    for name, path in r.artifacts.items():
        hint = (
            " (opens offline in ui.perfetto.dev)"
            if str(path).endswith((".json.gz", ".json")) and "trace" in name
            else ""
        )
        out.append(f"<p>{esc(name)}: {where.link(path)}{esc(hint)}</p>")
    if r.error:
        out.append(f"<details><summary>traceback</summary><pre>{esc(r.error)}</pre></details>")
    return out
