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
from typing import TYPE_CHECKING, Any

from bringup.case import CaseResult, Status, is_failure
from bringup.console import unjudged_line, unjudged_suites
from bringup.files import atomic_write_text
from bringup.metrics import SECONDS, MetricSpec, metric_spec, metric_specs, specs
from bringup.store import RunInfo

if TYPE_CHECKING:
    from bringup.api import CaseMarks

# XML 1.0 forbids most control characters (ANSI colour codes in a traceback would make the file invalid).
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s: Any) -> str:
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


def junit_xml(run: RunInfo, results: Sequence[CaseResult], marks: CaseMarks | None = None) -> str:
    """`marks`: a post-run step's judgement (bringup.api.CaseMarks; the expectations gate's: expected
    failures become <skipped>, new ones <failure>)."""
    allow = _allow_unsupported(run)
    root = ET.Element("testsuites", name=xml_text(f"bringup {run.command}"))
    by_suite: dict[str, list[CaseResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for suite, rs in by_suite.items():
        counts, t = _testsuite(root, run, suite, rs, allow, marks)
        for k in totals:
            totals[k] += counts[k]
        total_time += t
    for k, n in totals.items():
        root.set(k, str(n))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _testsuite(
    root: ET.Element, run: RunInfo, suite: str, rs: list[CaseResult], allow: bool, marks: CaseMarks | None
) -> tuple[dict[str, int], float]:
    """One suite's <testsuite>: its properties and a <testcase> per case; its counts and time."""
    kinds = [junit_kind(r.status, allow) for r in rs]
    notes: list[str | None] = [None] * len(rs)
    if marks is not None:
        kinds, notes = map(list, zip(*(marks.junit(r.case_id, k) for r, k in zip(rs, kinds, strict=True)), strict=True))
    unjudged = bool(unjudged_suites(rs))  # all ref_fail: one failing testcase says so (CI reads JUnit)
    counts = {
        "tests": len(rs) + unjudged,
        "failures": kinds.count("failure") + unjudged,
        "errors": kinds.count("error"),
        "skipped": kinds.count("skipped"),
    }
    t = sum(r.wall_s for r in rs)
    ts = ET.SubElement(
        root,
        "testsuite",
        name=xml_text(f"bringup.{suite}"),
        hostname=xml_text(run.host),
        time=f"{t:.3f}",
        **{k: str(v) for k, v in counts.items()},  # type: ignore[arg-type]  # **extra: str, not attrib
    )
    props = ET.SubElement(ts, "properties")
    for k, v in (
        ("run_id", run.run_id),
        ("device", run.device),
        ("device_name", run.device_name),
        ("torch", run.torch_version),
        ("bringup", run.bringup_version),
    ):
        ET.SubElement(props, "property", name=k, value=xml_text(v))
    for r, kind, note in zip(rs, kinds, notes, strict=True):
        _testcase(ts, suite, r, kind, note)
    if unjudged:
        tc = ET.SubElement(ts, "testcase", classname=xml_text(f"bringup.{suite}"), name="nothing judged", time="0")
        msg = unjudged_line([suite])
        el = ET.SubElement(tc, "failure", message=xml_text(msg), type="nothing_judged")
        el.text = xml_text(msg)
    return counts, t


def _testcase(ts: ET.Element, suite: str, r: CaseResult, kind: str, note: str | None) -> None:
    tc = ET.SubElement(
        ts, "testcase", classname=xml_text(f"bringup.{suite}"), name=xml_text(r.name), time=f"{r.wall_s:.3f}"
    )
    if note and not kind:
        ET.SubElement(tc, "system-out").text = xml_text(note)
    if kind:
        msg = xml_text(f"{r.status.value}: {r.reason}" if r.reason else r.status.value)
        msg = xml_text(f"{note}; {msg}") if note else msg
        el = ET.SubElement(tc, kind, message=msg)
        if kind != "skipped":
            el.set("type", r.status.value)
            el.text = xml_text(r.error or msg)
    if r.error and kind == "":
        ET.SubElement(tc, "system-err").text = xml_text(r.error)


def write_junit(
    path: str | os.PathLike[str], run: RunInfo, results: Sequence[CaseResult], marks: CaseMarks | None = None
) -> None:
    atomic_write_text(path, junit_xml(run, results, marks))


# ---- CSV ----------------------------------------------------------------------------------------------
# The dynamo harness's columns (dev, name, batch_size, accuracy, speedup, abs_latency, compilation_latency,
# peak memory), mapped from our metrics, then bringup's own metrics (catalogue names: one column per
# metric, whichever suite recorded it), then any other catalogued metric the run's cases recorded (a
# plugin suite's metrics reach the CSV too).
HARNESS_COLUMNS: tuple[str, ...] = (
    "dev",
    "suite",
    "name",
    "batch_size",
    "accuracy",
    "speedup",
    "abs_latency",
    "compilation_latency",
    "peak_mem_gb",
)
METRIC_COLUMNS: tuple[MetricSpec, ...] = specs(
    "graph_breaks", "recompiles", "max_abs_err", "max_rel_err", "loss_divergence", "tokens_per_s", "mfu", "ttfs_s"
)
TAIL_COLUMNS: tuple[str, ...] = ("wall_s", "reason", "case_id", "expectation")
CSV_COLUMNS: tuple[str, ...] = (*HARNESS_COLUMNS, *(m.name for m in METRIC_COLUMNS), *TAIL_COLUMNS)
# Metrics the harness columns already show (in their own units) or that only make sense per suite.
_SHOWN_ELSEWHERE = frozenset({"step_s", "compile_s", "peak_mem_bytes", "fwd_ms"})


def csv_columns(results: Sequence[CaseResult]) -> list[str]:
    """CSV_COLUMNS, then the other catalogued metrics recorded in `results` (catalogue order)."""
    present = {s.name for r in results for n in r.metrics if (s := metric_spec(n)) is not None}
    taken = set(CSV_COLUMNS) | _SHOWN_ELSEWHERE
    return [*CSV_COLUMNS, *(m.name for m in metric_specs() if m.name in present and m.name not in taken)]


def _metric(r: CaseResult, *names: str) -> float | None:
    """The first of `names` the case recorded (catalogue names; old aliases are found too)."""
    for n in names:
        v = r.value(n)
        if v is not None:
            return v
    return None


def _seconds(r: CaseResult, name: str) -> float | None:
    m = r.metrics.get(name)
    return None if m is None else m.value * SECONDS.get(m.unit, 1.0)


def _eager_step(results: Sequence[CaseResult]) -> dict[tuple[str, Any], float]:
    """Per (suite, model) the eager steady step time: the denominator of a mode's speed-up."""
    out: dict[tuple[str, Any], float] = {}
    for r in results:
        mode = r.params.get("mode", r.fields.get("mode"))
        step = _seconds(r, "step_s")
        if mode == "eager" and step and r.status is Status.PASS:
            out.setdefault((r.suite, r.params.get("model")), step)
    return out


def csv_row(
    run: RunInfo, r: CaseResult, eager: dict[tuple[str, Any], float], marks: CaseMarks | None = None
) -> dict[str, Any]:
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
    batch = next(
        (
            r.params.get(k, r.fields.get(k))
            for k in ("batch_size", "batch")
            if r.params.get(k, r.fields.get(k)) is not None
        ),
        None,
    )
    row: dict[str, Any] = {
        "dev": run.device,
        "suite": r.suite,
        "name": r.name,
        "batch_size": batch,
        "accuracy": r.status.value,
        "speedup": speedup,
        "abs_latency": latency_ms,
        "compilation_latency": compile_s,
        "peak_mem_gb": peak / 1e9 if peak is not None else None,
        "wall_s": round(r.wall_s, 4),
        "reason": r.reason,
        "case_id": r.case_id,
        "expectation": marks.label(r.case_id) if marks is not None else "",
    }
    for m in [*METRIC_COLUMNS, *(s for s in metric_specs() if s not in METRIC_COLUMNS)]:
        if m.name not in row and m.name not in _SHOWN_ELSEWHERE:
            row[m.name] = _seconds(r, m.name) if m.unit == "s" else _metric(r, m.name)
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


def csv_text(run: RunInfo, results: Sequence[CaseResult], marks: CaseMarks | None = None) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=csv_columns(results), lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    eager = _eager_step(results)
    for r in results:
        w.writerow(csv_row(run, r, eager, marks))
    return buf.getvalue()


def write_csv(
    path: str | os.PathLike[str], run: RunInfo, results: Sequence[CaseResult], marks: CaseMarks | None = None
) -> None:
    atomic_write_text(path, csv_text(run, results, marks))
