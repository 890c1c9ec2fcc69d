"""The answer of a Hub sweep at the articles' granularity: ids and downloads by outcome, per architecture and
overall, the config failures by reason, the worst offenders, and a CSV of every id.

Every id gets one outcome (`OUTCOMES`), from its signature's case (the verdict fans out to every id that
shares the signature) or from its config:

- pass: judged, passed, no graph break; graph_breaks: passed, with graph breaks (dynamo split the graph);
- fallback, fail_numeric, fail_compile, unsupported: the device's failures, as the zoo judges them;
- other_fail: budget, crash, oom, silent_eager, error;
- not_judged: the case's own reference could not judge the device (ref_fail "reference: ..."): counts
  neither way;
- config: the id's config could not be fetched, read or built (gated, not_found_or_private, missing_config,
  bad_config, unknown_model_type, custom_code, tiny_config, revision_not_found, not_cached_offline,
  fetch_error, or "build" when the tiny model of its signature failed to build);
- pending: its case has no result (yet: an interrupted run, `--resume`).

Input: the store's `hub_ids` rows (joined with their case's status) and the run's results; nothing else.
"""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from bringup.case import CaseResult, Status
from bringup.files import atomic_write_text

if TYPE_CHECKING:
    from rich.console import Console

if TYPE_CHECKING:
    from rich.console import Console

CSV_NAME = "hub-ids.csv"
OUTCOMES = (
    "pass",
    "graph_breaks",
    "fallback",
    "fail_numeric",
    "fail_compile",
    "unsupported",
    "other_fail",
    "not_judged",
    "config",
    "pending",
)
DEVICE_FAILURES = ("fallback", "fail_numeric", "fail_compile", "unsupported", "other_fail")
ID_COLUMNS = (
    "model_id",
    "revision",
    "sha",
    "architecture",
    "model_type",
    "task",
    "downloads",
    "likes",
    "signature",
)  # the sweep's id row, as stored
CSV_COLUMNS = ID_COLUMNS + ("case", "outcome", "status", "reason", "graph_breaks", "full_status", "full_reason")
SHOW_ARCHS = 25
SHOW_WORST = 15


def outcome(row: dict[str, Any], r: CaseResult | None) -> tuple[str, str]:
    """(outcome, reason) of one id."""
    if row.get("config_status") != "ok":
        return "config", str(row.get("reason") or row.get("config_status"))
    if r is None:
        return "pending", "its case has no result yet"
    if r.status is Status.PASS:
        breaks = r.fields.get("graph_breaks") or 0
        return ("graph_breaks", f"{breaks} graph break(s)") if breaks else ("pass", "")
    if r.status is Status.REF_FAIL:
        if r.reason.startswith("config:"):
            return "config", "build: " + r.reason.removeprefix("config:").strip()
        return "not_judged", r.reason
    if r.status.value in DEVICE_FAILURES:
        return r.status.value, r.reason
    return "other_fail", f"{r.status.value}: {r.reason}"


def config_reason(row: dict[str, Any], o: str, why: str) -> str:
    """The reason class of a config outcome (the id's fetch / planning status, or build)."""
    if row.get("config_status") != "ok":
        return str(row.get("config_status"))
    return "build" if o == "config" else ""


@dataclass
class _Tally:
    """The sweep's counts as the store's rows are read: by outcome, architecture, config failure, worst case."""

    overall: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {o: {"ids": 0, "downloads": 0} for o in OUTCOMES}
    )
    archs: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)
    worst: dict[str, dict[str, Any]] = field(default_factory=dict)
    sigs: set[str] = field(default_factory=set)

    def add(self, row: dict[str, Any], r: CaseResult | None, o: str, why: str) -> None:
        dl = int(row.get("downloads") or 0)
        self.overall[o]["ids"] += 1
        self.overall[o]["downloads"] += dl
        if row.get("signature"):
            self.sigs.add(row["signature"])
        arch = row.get("architecture") or "(unknown)"
        a = self.archs.setdefault(
            arch, {"architecture": arch, "ids": 0, "downloads": 0, "signatures": set(), **{k: 0 for k in OUTCOMES}}
        )
        a["ids"] += 1
        a["downloads"] += dl
        a[o] += 1
        if row.get("signature"):
            a["signatures"].add(row["signature"])
        if o == "config":
            f = self.failures.setdefault(config_reason(row, o, why), {"ids": 0, "downloads": 0, "examples": []})
            f["ids"] += 1
            f["downloads"] += dl
            if len(f["examples"]) < 3:
                f["examples"].append(row["model_id"])
        if o in DEVICE_FAILURES and r is not None:
            w = self.worst.setdefault(r.case_id, _worst_row(row, r, arch))
            w["ids"] += 1
            w["downloads"] += dl


def _worst_row(row: dict[str, Any], r: CaseResult, arch: str) -> dict[str, Any]:
    return {
        "case": r.name,
        "signature": row.get("signature"),
        "architecture": arch,
        "status": r.status.value,
        "reason": r.reason[:200],
        "ids": 0,
        "downloads": 0,
    }


def _id_row(row: dict[str, Any], r: CaseResult | None, o: str, why: str, full: CaseResult | None) -> dict[str, Any]:
    """One id's line of the CSV."""
    return {
        **{k: row.get(k) for k in ID_COLUMNS},
        "case": r.name if r is not None else "",
        "outcome": o,
        "status": r.status.value if r is not None else row.get("config_status"),
        "reason": why,
        "graph_breaks": r.fields.get("graph_breaks") if r is not None else None,
        "full_status": full.status.value if full is not None else "",
        "full_reason": full.reason if full is not None else "",
    }


def coverage(rows: Sequence[dict[str, Any]], results: Sequence[CaseResult]) -> dict[str, Any]:
    """Everything the terminal, the JSON and the report show, computed from the store's rows."""
    by_case = {r.case_id: r for r in results}
    total_ids = len(rows)
    total_dl = sum(int(r.get("downloads") or 0) for r in rows)
    t = _Tally()
    per_id: list[dict[str, Any]] = []
    for row in rows:
        r = by_case.get(row.get("case_id") or "")
        o, why = outcome(row, r)
        t.add(row, r, o, why)
        per_id.append(_id_row(row, r, o, why, by_case.get(row.get("full_case_id") or "")))
    arch_rows = sorted(
        ({**a, "signatures": len(a["signatures"])} for a in t.archs.values()),
        key=lambda a: (-a["downloads"], -a["ids"], a["architecture"]),
    )
    overall = t.overall
    for o in OUTCOMES:
        overall[o]["ids_pct"] = _pct(overall[o]["ids"], total_ids)
        overall[o]["downloads_pct"] = _pct(overall[o]["downloads"], total_dl)
    judged = sum(overall[o]["ids"] for o in OUTCOMES if o != "config")
    return {
        "ids": total_ids,
        "downloads": total_dl,
        "signatures": len(t.sigs),
        "ids_per_signature": round(judged / max(1, len(t.sigs)), 2),
        "overall": overall,
        "by_architecture": arch_rows,
        "config_failures": dict(sorted(t.failures.items(), key=lambda kv: -kv[1]["ids"])),
        "worst": sorted(t.worst.values(), key=lambda w: (-w["downloads"], -w["ids"]))[:50],
        "full": _full(results),
        "baseline": _baseline(rows, by_case),
        "per_id": per_id,
    }


def _pct(n: int, total: int) -> float | None:
    return round(100.0 * n / total, 2) if total else None


def _full(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    return [
        {
            "case": r.name,
            "status": r.status.value,
            "reason": r.reason[:200],
            "nproc": r.params.get("nproc", 1),
            "sharded": bool(r.fields.get("sharded")),
        }
        for r in results
        if r.params.get("source") == "hub-cfg"
    ]


def _baseline(rows: Sequence[dict[str, Any]], by_case: dict[str, CaseResult]) -> dict[str, Any] | None:
    """--baseline per signature: which signatures (and how many ids, downloads) were compared, which differ."""
    checks: dict[str, Any] = {
        cid: r.fields.get("baseline_check") for cid, r in by_case.items() if r.fields.get("baseline_check")
    }
    sig_cases = {cid for cid, r in by_case.items() if r.params.get("source") == "hub-sig"}
    if not checks:
        return None
    ids: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        cid = row.get("case_id")
        if cid in sig_cases:
            key = (checks.get(cid) or {}).get("status") or "not in the bundle"
            ids[key][0] += 1
            ids[key][1] += int(row.get("downloads") or 0)
    st = Counter((c or {}).get("status") for c in checks.values())
    return {
        "bundle": (next(iter(checks.values())) or {}).get("bundle"),
        "compared": st.get("ok", 0) + st.get("differs", 0),
        "differs": st.get("differs", 0),
        "not_in_bundle": len(sig_cases - set(checks)),
        "ids": {k: {"ids": v[0], "downloads": v[1]} for k, v in ids.items()},
    }


def write_csv(path: Path, per_id: Sequence[dict[str, Any]]) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in per_id:
        w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS})
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, buf.getvalue())


def _fmt_n(n: int) -> str:
    return f"{n:,}"


def summarize(
    rows: Sequence[dict[str, Any]], results: Sequence[CaseResult], console: Console, csv_path: Path | None
) -> dict[str, Any]:
    """Print the answer; return it for the JSON (without the per-id list, which is the CSV)."""
    cov = coverage(rows, results)
    per_id = cov.pop("per_id")
    if csv_path is not None:
        cov["csv"] = str(write_csv(csv_path, per_id))
    console.print(_outcome_table(cov))
    console.print(_arch_table(cov))
    if len(cov["by_architecture"]) > SHOW_ARCHS:
        console.print(
            f"... {len(cov['by_architecture']) - SHOW_ARCHS} more architectures in the JSON and the CSV",
            highlight=False,
        )
    for line in _lines(cov):
        console.print(line, highlight=False, markup=False)
    if csv_path is not None:
        console.print(f"every id: {cov['csv']}", highlight=False, markup=False)
    return cov


def _outcome_table(cov: dict[str, Any]) -> Table:
    t = Table(
        title=f"Hub sweep: {cov['ids']:,} ids, {cov['downloads']:,} downloads, {cov['signatures']} distinct "
        f"signatures ({cov['ids_per_signature']} ids each)",
        title_justify="left",
    )
    for c in ("outcome", "ids", "% ids", "downloads", "% downloads"):
        t.add_column(c, justify="left" if c == "outcome" else "right")
    for o in OUTCOMES:
        v = cov["overall"][o]
        if v["ids"]:
            t.add_row(
                o,
                _fmt_n(v["ids"]),
                f"{v['ids_pct']:.1f}",
                _fmt_n(v["downloads"]),
                "-" if v["downloads_pct"] is None else f"{v['downloads_pct']:.1f}",
            )
    return t


_SHORT = {
    "graph_breaks": "breaks",
    "fail_numeric": "numeric",
    "fail_compile": "compile",
    "unsupported": "unsup",
    "other_fail": "other",
    "not_judged": "unjudged",
    "fallback": "fallbk",
}


def _arch_table(cov: dict[str, Any]) -> Table:
    a = Table(title="by architecture (most downloaded first)", title_justify="left")
    shown = [o for o in OUTCOMES if any(ar[o] for ar in cov["by_architecture"])]
    for c in ("architecture", "ids", "downloads", "sigs", *[_SHORT.get(o, o) for o in shown]):
        a.add_column(c, justify="left" if c == "architecture" else "right", overflow="fold")
    for ar in cov["by_architecture"][:SHOW_ARCHS]:
        a.add_row(
            ar["architecture"],
            _fmt_n(ar["ids"]),
            _fmt_n(ar["downloads"]),
            str(ar["signatures"]),
            *[str(ar[o]) if ar[o] else "" for o in shown],
        )
    return a


def _lines(cov: dict[str, Any]) -> list[str]:
    """Config failures by reason, the worst cases, the baseline comparison."""
    out = []
    if cov["config_failures"]:
        out.append(
            "config failures by reason: "
            + "; ".join(
                f"{k} {v['ids']} ids / {v['downloads']:,} downloads (e.g. {', '.join(v['examples'])})"
                for k, v in cov["config_failures"].items()
            )
        )
    for w in cov["worst"][:SHOW_WORST]:
        out.append(
            f"worst: {w['case']} [{w['architecture']}] {w['status']}: {w['ids']} ids, "
            f"{w['downloads']:,} downloads: {w['reason'][:120]}"
        )
    if b := cov["baseline"]:
        ids = ", ".join(f"{k} {v['ids']}" for k, v in sorted(b["ids"].items()))
        out.append(
            f"baseline {b['bundle']}: {b['compared']} signature(s) compared, {b['differs']} differ, "
            f"{b['not_in_bundle']} not in the bundle; ids: {ids}"
        )
    return out
