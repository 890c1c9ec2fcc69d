"""CI outputs of any command: `--junit FILE` (a testcase per case) and `--csv FILE` (dynamo-harness-like
columns). Both are written atomically.

JUnit mapping: pass -> a plain testcase; `ref_fail` -> <skipped> (the CPU reference failed: the case says
nothing about the device); `unsupported` -> <skipped> when the run allowed it (--allow-unsupported), else
<failure>; `error` (bringup's own bug) -> <error>; every other failing status -> <failure>. The message
is "status: reason"; the body is the traceback when there is one.
"""

from __future__ import annotations

import csv
import io
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from bringup.case import CaseResult, Status, is_failure
from bringup.console import unjudged_line, unjudged_suites
from bringup.files import atomic_write_text
from bringup.store import RunInfo

# XML 1.0 forbids most control characters (ANSI colour codes in a traceback would make the file invalid).
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(s: Any) -> str:
    return _BAD_XML.sub("\ufffd", str(s))


def _allow_unsupported(run: RunInfo) -> bool:
    opts = run.info.get("options")
    return bool(isinstance(opts, dict) and opts.get("allow_unsupported"))


def junit_kind(status: Status, allow_unsupported: bool) -> str:
    """'' (passed), 'skipped', 'error' or 'failure'."""
    if status is Status.REF_FAIL or (status is Status.UNSUPPORTED and allow_unsupported):
        return "skipped"
    if not is_failure(status, allow_unsupported):
        return ""
    return "error" if status is Status.ERROR else "failure"


def junit_xml(run: RunInfo, results: Sequence[CaseResult], expect: Any = None) -> str:
    """`expect`: a bringup.expect Judgement: expected failures become <skipped>, new ones <failure>."""
    allow = _allow_unsupported(run)
    root = ET.Element("testsuites", name=_x(f"bringup {run.command}"))
    by_suite: dict[str, list[CaseResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for suite, rs in by_suite.items():
        kinds = [junit_kind(r.status, allow) for r in rs]
        notes: list[str | None] = [None] * len(rs)
        if expect is not None:
            from bringup.expect.classify import junit as expect_junit

            kinds, notes = map(list, zip(*(expect_junit(expect.of(r.case_id), k, expect.strict)
                                           for r, k in zip(rs, kinds, strict=True)), strict=True))  # fmt: skip
        unjudged = bool(unjudged_suites(rs))  # all ref_fail: one failing testcase says so (CI reads JUnit)
        counts = {"tests": len(rs) + unjudged, "failures": kinds.count("failure") + unjudged,
                  "errors": kinds.count("error"), "skipped": kinds.count("skipped")}  # fmt: skip
        t = sum(r.wall_s for r in rs)
        ts = ET.SubElement(root, "testsuite", name=_x(f"bringup.{suite}"), hostname=_x(run.host),
                           time=f"{t:.3f}", **{k: str(v) for k, v in counts.items()})  # fmt: skip
        props = ET.SubElement(ts, "properties")
        for k, v in (("run_id", run.run_id), ("device", run.device), ("device_name", run.device_name),
                     ("torch", run.torch_version), ("bringup", run.bringup_version)):  # fmt: skip
            ET.SubElement(props, "property", name=k, value=_x(v))
        for r, kind, note in zip(rs, kinds, notes, strict=True):
            tc = ET.SubElement(ts, "testcase", classname=_x(f"bringup.{suite}"), name=_x(r.name),
                               time=f"{r.wall_s:.3f}")  # fmt: skip
            if note and not kind:
                ET.SubElement(tc, "system-out").text = _x(note)
            if kind:
                msg = _x(f"{r.status.value}: {r.reason}" if r.reason else r.status.value)
                msg = _x(f"{note}; {msg}") if note else msg
                el = ET.SubElement(tc, kind, message=msg)
                if kind != "skipped":
                    el.set("type", r.status.value)
                    el.text = _x(r.error or msg)
            if r.error and kind == "":
                ET.SubElement(tc, "system-err").text = _x(r.error)
        if unjudged:
            tc = ET.SubElement(ts, "testcase", classname=_x(f"bringup.{suite}"), name="nothing judged", time="0")
            msg = unjudged_line([suite])
            el = ET.SubElement(tc, "failure", message=_x(msg), type="nothing_judged")
            el.text = _x(msg)
        for k in totals:
            totals[k] += counts[k]
        total_time += t
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | os.PathLike[str], run: RunInfo, results: Sequence[CaseResult], expect: Any = None) -> None:
    atomic_write_text(path, junit_xml(run, results, expect))


# ---- CSV ----------------------------------------------------------------------------------------------
# The dynamo harness's columns (dev, name, batch_size, accuracy, speedup, abs_latency, compilation_latency,
# peak memory, graph_breaks, ...), mapped from our metrics, then bringup's own.
CSV_COLUMNS: tuple[str, ...] = (
    "dev", "suite", "name", "batch_size", "accuracy", "speedup", "abs_latency", "compilation_latency",
    "peak_mem_gb", "graph_breaks", "recompiles", "max_abs_err", "max_rel_err", "loss_divergence",
    "tokens_per_s", "mfu", "ttfs_s", "wall_s", "reason", "case_id", "expectation",
)  # fmt: skip


def _metric(r: CaseResult, *names: str) -> float | None:
    for n in names:
        if n in r.metrics:
            return r.metrics[n].value
        v = r.fields.get(n)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def _seconds(r: CaseResult, name: str) -> float | None:
    m = r.metrics.get(name)
    if m is None:
        return _metric(r, name)
    return m.value * {"ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}.get(m.unit, 1.0)


def _eager_step(results: Sequence[CaseResult]) -> dict[tuple[str, Any], float]:
    """Per (suite, model) the eager steady step time: the denominator of a mode's speed-up."""
    out: dict[tuple[str, Any], float] = {}
    for r in results:
        mode = r.params.get("mode", r.fields.get("mode"))
        step = _seconds(r, "step_s")
        if mode == "eager" and step and r.status is Status.PASS:
            out.setdefault((r.suite, r.params.get("model")), step)
    return out


def csv_row(run: RunInfo, r: CaseResult, eager: dict[tuple[str, Any], float], expect: Any = None) -> dict[str, Any]:
    step = _seconds(r, "step_s")
    latency_ms = step * 1e3 if step is not None else _metric(r, "fwd_ms", "abs_latency_ms", "latency_ms")
    speedup = _metric(r, "speedup", "speedup_vs_eager")
    if speedup is None and step:
        base = eager.get((r.suite, r.params.get("model")))
        speedup = base / step if base else None
    compile_s = _seconds(r, "compile_s")
    if compile_s is None:
        phases = [_seconds(r, k) for k in r.metrics if k.startswith("compile_") and "total" not in k]
        compile_s = sum(p for p in phases if p is not None) if phases else None
    peak = _metric(r, "peak_mem_bytes")
    batch = next((r.params.get(k, r.fields.get(k)) for k in ("batch_size", "batch") if
                  r.params.get(k, r.fields.get(k)) is not None), None)  # fmt: skip
    row: dict[str, Any] = {
        "dev": run.device, "suite": r.suite, "name": r.name, "batch_size": batch, "accuracy": r.status.value,
        "speedup": speedup, "abs_latency": latency_ms, "compilation_latency": compile_s,
        "peak_mem_gb": peak / 1e9 if peak is not None else None,
        "graph_breaks": _metric(r, "graph_breaks"), "recompiles": _metric(r, "recompiles"),
        "max_abs_err": _metric(r, "max_abs_err"), "max_rel_err": _metric(r, "max_rel_err"),
        "loss_divergence": _metric(r, "loss_divergence"), "tokens_per_s": _metric(r, "tokens_per_s"),
        "mfu": _metric(r, "mfu"), "ttfs_s": _seconds(r, "ttfs_s"), "wall_s": round(r.wall_s, 4),
        "reason": r.reason, "case_id": r.case_id,
        "expectation": (o.klass.value if (o := expect.of(r.case_id)) else "") if expect is not None else "",
    }  # fmt: skip
    return {k: _cell(v) for k, v in row.items()}


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return ""
        return f"{v:.6g}"
    if isinstance(v, str):
        v = v.replace("\r", " ").replace("\n", " ")
        # a cell a spreadsheet would run as a formula (=, +, -, @) is quoted with a leading apostrophe
        return "'" + v if v[:1] in ("=", "+", "-", "@") else v
    return v


def csv_text(run: RunInfo, results: Sequence[CaseResult], expect: Any = None) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    w.writeheader()
    eager = _eager_step(results)
    for r in results:
        w.writerow(csv_row(run, r, eager, expect))
    return buf.getvalue()


def write_csv(path: str | os.PathLike[str], run: RunInfo, results: Sequence[CaseResult], expect: Any = None) -> None:
    atomic_write_text(path, csv_text(run, results, expect))
