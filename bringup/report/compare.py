"""`bringup compare A B [--fail-on ...]`: what changed from run A (the baseline) to run B.

A and B are run ids in --db or bundle files (`bringup export`), so a run on one machine is the baseline
for another. Cases are matched by case id (same suite and parameters), then by (suite, name). Per case:
status change, throughput ratio (B/A: tokens/s, else steady step time, TFLOP/s or forward time),
time-to-first-step ratio (B/A: ttfs_s, else compile_s), loss-curve divergence (max relative difference
over the common steps) and parity deltas (max_rel_err / max_abs_over_peak / max_abs_err, A -> B).

Before the per-case changes, the backend scorecard: each suite's own rows (`Suite.scorecard`, through
the registry: e.g. probe's eager execution, torch.compile, torch.distributed, DTensor and FSDP2; train's
first step, tokens/s, MFU and fallbacks) for A and B side by side, with the device, its adapter
family and the run's peak FLOP/s: a run on a native eager device next to one on PyTorch/XLA shows what
each backend supports, measured. The scorecard changes no exit code.

Exit 1 when a change that `--fail-on` counts is found, else 0; 2 on bad input (unknown run, malformed,
truncated or newer-format bundle, bad --fail-on). Reads only the store or the bundles.
"""

from __future__ import annotations

import argparse
import sqlite3
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.api import suites
from bringup.case import CaseResult, Status, is_failure
from bringup.errors import BadInput
from bringup.metrics import MetricSpec, specs
from bringup.options import CommandOptions, measured, not_measured
from bringup.session import CommandSession
from bringup.store import RunInfo, Store

if TYPE_CHECKING:  # rich is imported where it prints: `bringup --help` builds the parser without it
    from rich.console import Console

DEFAULT_FAIL_ON = "status,throughput:0.9,ttfs:1.2,parity:10,loss:0.05"
# name -> default threshold of a bare name (None: takes no number)
KINDS: dict[str, float | None] = {
    "status": None,  # a case that passed in A does not pass in B
    "throughput": 0.9,  # B/A throughput below this
    "ttfs": 1.2,  # B/A time to first step (or compile time) above this
    "parity": 10.0,  # B's max error above this many times A's (and above PARITY_FLOOR)
    "loss": 0.05,  # loss curves differ by more than this, relative, at some common step
    "missing": None,  # a case of A has no result in B
}
PARITY_FLOOR = 1e-6
# Which catalogued metrics each kind compares, in order of preference (the first both sides have). The
# direction of a throughput ratio comes from the catalogue's higher_is_better.
THROUGHPUT: tuple[MetricSpec, ...] = specs("tokens_per_s", "step_s", "tflops", "fwd_ms")
TTFS: tuple[MetricSpec, ...] = specs("ttfs_s", "compile_s")
PARITY: tuple[MetricSpec, ...] = specs("max_rel_err", "max_abs_over_peak", "max_abs_err")


def parse_fail_on(spec: str) -> dict[str, float | None]:
    """'status,throughput:0.9,ttfs:1.2,parity,loss:0.05,missing' (or 'none') -> {kind: threshold}."""
    out: dict[str, float | None] = {}
    spec = spec.strip()
    if spec.lower() == "none":
        return out
    for tok in (t.strip() for t in spec.split(",")):
        if not tok:
            continue
        name, _, val = tok.partition(":")
        name = name.strip().lower()
        if name not in KINDS:
            raise BadInput(f"--fail-on: unknown kind {name!r}; kinds: {', '.join(KINDS)} (or 'none')")
        default = KINDS[name]
        if not val:
            out[name] = default
            continue
        if default is None:
            raise BadInput(f"--fail-on: {name} takes no threshold (got {tok!r})")
        try:
            th = float(val)
        except ValueError:
            raise BadInput(f"--fail-on: bad threshold in {tok!r}; expected a number") from None
        if not th > 0 or th == float("inf"):
            raise BadInput(f"--fail-on: threshold in {tok!r} must be a positive number")
        out[name] = th
    return out


@dataclass
class CaseDiff:
    suite: str
    name: str
    case_id: str
    status_a: str | None
    status_b: str | None
    change: str = "same"  # same | regression | improvement | changed | missing | new
    throughput_metric: str | None = None
    throughput_ratio: float | None = None
    ttfs_metric: str | None = None
    ttfs_ratio: float | None = None
    loss_divergence: float | None = None
    loss_series: str | None = None
    loss_steps: int = 0
    parity: dict[str, tuple[float, float]] = field(default_factory=dict)  # metric -> (A, B)
    regressions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _m(r: CaseResult, name: str) -> float | None:
    """A metric by catalogue name (old bundles: under an older alias too), finite, else None."""
    v = r.value(name)
    if v is None:
        return None
    v = float(v)
    return v if v == v and abs(v) != float("inf") else None


def loss_divergence(a: Sequence[tuple[int, float]], b: Sequence[tuple[int, float]]) -> tuple[float | None, int]:
    """Max |b - a| / max(|a|, 1e-8) over the steps both curves have; (None, 0) when none are shared.
    A non-finite loss on one side only counts as infinite divergence."""
    da, db = dict(a), dict(b)
    steps = sorted(set(da) & set(db))
    worst = 0.0
    for s in steps:
        x, y = da[s], db[s]
        fx, fy = x == x and abs(x) != float("inf"), y == y and abs(y) != float("inf")
        if not (fx and fy):
            if fx != fy:
                worst = float("inf")
            continue
        worst = max(worst, abs(y - x) / max(abs(x), 1e-8))
    return (worst if steps else None), len(steps)


def diff_case(a: CaseResult, b: CaseResult, fail_on: dict[str, float | None]) -> CaseDiff:
    d = CaseDiff(a.suite, a.name, a.case_id, a.status.value, b.status.value)
    fa, fb = is_failure(a.status), is_failure(b.status)
    if a.status != b.status:
        if Status.REF_FAIL in (a.status, b.status):
            d.change = "changed"
            d.notes.append("a CPU reference failed on one side: not counted")
        elif not fa and fb:
            d.change = "regression"
            if "status" in fail_on:
                d.regressions.append(f"status {a.status.value} -> {b.status.value}")
        elif fa and not fb:
            d.change = "improvement"
        else:
            d.change = "changed"
    for spec in THROUGHPUT:
        va, vb = _m(a, spec.name), _m(b, spec.name)
        if va and vb:
            d.throughput_metric = spec.name
            d.throughput_ratio = vb / va if spec.higher_is_better else va / vb
            break
    for spec in TTFS:
        va, vb = _m(a, spec.name), _m(b, spec.name)
        if va and vb:
            d.ttfs_metric, d.ttfs_ratio = spec.name, vb / va
            break
    for spec in PARITY:
        va, vb = _m(a, spec.name), _m(b, spec.name)
        if va is not None and vb is not None:
            d.parity[spec.name] = (va, vb)
    for name in sorted(set(a.series) & set(b.series)):
        # every loss curve ("loss", "loss.eager", "loss.compiled", ...) but the float64 cpu reference
        if (name == "loss" or name.startswith("loss.")) and name != "loss.ref" and a.series[name] and b.series[name]:
            div, steps = loss_divergence(a.series[name], b.series[name])
            if div is not None and (d.loss_divergence is None or div > d.loss_divergence):
                d.loss_divergence, d.loss_series, d.loss_steps = div, name, steps
    both_pass = a.status is Status.PASS and b.status is Status.PASS
    if both_pass:
        th = fail_on.get("throughput")
        if "throughput" in fail_on and th and d.throughput_ratio is not None and d.throughput_ratio < th:
            d.regressions.append(f"{d.throughput_metric} throughput x{d.throughput_ratio:.2f} (< {th:g})")
        th = fail_on.get("ttfs")
        if "ttfs" in fail_on and th and d.ttfs_ratio is not None and d.ttfs_ratio > th:
            d.regressions.append(f"{d.ttfs_metric} x{d.ttfs_ratio:.2f} (> {th:g})")
        th = fail_on.get("parity")
        for name, (va, vb) in d.parity.items():
            if "parity" in fail_on and th and vb > th * max(va, PARITY_FLOOR):
                d.regressions.append(f"{name} {va:.3g} -> {vb:.3g} (> x{th:g})")
        th = fail_on.get("loss")
        if "loss" in fail_on and th and d.loss_divergence is not None and d.loss_divergence > th:
            d.regressions.append(f"{d.loss_series} curves differ by {d.loss_divergence:.3g} (> {th:g})")
        if d.regressions and d.change == "same":
            d.change = "regression"
    if d.change == "regression" and not d.regressions:
        d.notes.append("not counted by --fail-on")
    return d


def match(
    a: Sequence[CaseResult], b: Sequence[CaseResult]
) -> tuple[list[tuple[CaseResult, CaseResult]], list[CaseResult], list[CaseResult]]:
    """Pairs by case id, then by (suite, name) where that is unique on both sides; A-only, B-only."""
    bid = {r.case_id: r for r in b}
    pairs, rest_a = [], []
    used: set[str] = set()
    for r in a:
        if r.case_id in bid and r.case_id not in used:
            pairs.append((r, bid[r.case_id]))
            used.add(r.case_id)
        else:
            rest_a.append(r)
    rest_b = [r for r in b if r.case_id not in used]

    def unique(rs: list[CaseResult]) -> dict[tuple[str, str], CaseResult]:
        seen: dict[tuple[str, str], list[CaseResult]] = {}
        for r in rs:
            seen.setdefault((r.suite, r.name), []).append(r)
        return {k: v[0] for k, v in seen.items() if len(v) == 1}

    ua, ub = unique(rest_a), unique(rest_b)
    by_name = [(ua[k], ub[k]) for k in ua if k in ub]
    paired_a = {id(x) for x, _ in by_name}
    paired_b = {id(y) for _, y in by_name}
    return (pairs + by_name, [r for r in rest_a if id(r) not in paired_a], [r for r in rest_b if id(r) not in paired_b])


def compare(a: Sequence[CaseResult], b: Sequence[CaseResult], fail_on: dict[str, float | None]) -> list[CaseDiff]:
    pairs, only_a, only_b = match(a, b)
    out = [diff_case(x, y, fail_on) for x, y in pairs]
    for r in only_a:
        d = CaseDiff(r.suite, r.name, r.case_id, r.status.value, None, "missing")
        if "missing" in fail_on:
            d.regressions.append("no result in B")
        out.append(d)
    for r in only_b:
        out.append(CaseDiff(r.suite, r.name, r.case_id, None, r.status.value, "new"))
    return out


# ---- the backend scorecard ----------------------------------------------------------------------------
def _side_rows(run: RunInfo, results: Sequence[CaseResult]) -> list[tuple[str, str]]:
    rows = [("device", f"{run.device} ({run.device_name}), torch {run.torch_version}")]
    peaks = run.info.get("peak_flops") or {}
    if peaks:
        rows.append(
            (
                "peak FLOP/s (this run's)",
                "; ".join(f"{k.split('/')[-1]} {v['flops']:.3g}" for k, v in sorted(peaks.items()) if v),
            )
        )
    by_suite: dict[str, list[CaseResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    for s in suites():
        rs = by_suite.get(s.name)
        if not rs:
            continue
        if s.scorecard is not None:
            rows += [(f"{s.name}: {label}", text) for label, text in s.scorecard(rs)]
        else:
            ok = sum(r.status is Status.PASS for r in rs)
            rows.append((f"{s.name}", f"{ok}/{len(rs)} {s.verdict_word}"))
    return rows


def scorecard(
    run_a: RunInfo, res_a: Sequence[CaseResult], run_b: RunInfo, res_b: Sequence[CaseResult]
) -> list[dict[str, str | None]]:
    """[{"row", "a", "b"}]: each suite's scorecard rows for both runs, in the registry's order."""
    a, b = dict(_side_rows(run_a, res_a)), dict(_side_rows(run_b, res_b))
    order = list(a)
    for k in b:  # a row only B has goes after the last row of its suite
        if k in order:
            continue
        same = [i for i, o in enumerate(order) if o.split(":")[0] == k.split(":")[0]]
        order.insert(same[-1] + 1 if same else len(order), k)
    return [{"row": k, "a": a.get(k), "b": b.get(k)} for k in order]


def print_scorecard(console: Console, rows: list[dict[str, str | None]]) -> None:
    from rich.markup import escape  # lazy: torch-free --help
    from rich.table import Table  # lazy: torch-free --help

    from bringup.console import print_wide  # lazy: torch-free --help

    if len(rows) <= 1:
        return
    t = Table(title="backend scorecard (measured in each run)", title_justify="left")
    for c in ("", "A", "B"):
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(escape(str(row["row"])), escape(row["a"] or "-"), escape(row["b"] or "-"))
    print_wide(console, t, 160)  # a log or CI: wider, unfolded


# ---- loading ------------------------------------------------------------------------------------------
def _is_bundle(arg: str) -> bool:
    return Path(arg).is_file() or arg.endswith(".json") or "/" in arg


def load_side(arg: str, db: Path) -> tuple[RunInfo, list[CaseResult]]:
    if _is_bundle(arg):
        from bringup.bundle import load_bundle  # lazy: torch-free --help

        return load_bundle(arg)
    try:
        with Store(db, create=False) as st:
            return st.get_run(arg), st.results(arg)
    except sqlite3.DatabaseError as e:
        raise BadInput(f"{db} is not a usable bringup database ({e})") from e


# ---- output ------------------------------------------------------------------------------------------
def _r(v: float | None, suffix: str = "x") -> str:
    return "-" if v is None else f"{v:.2f}{suffix}"


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def print_diffs(console: Console, run_a: RunInfo, run_b: RunInfo, diffs: list[CaseDiff], show_all: bool) -> None:
    from rich.markup import escape  # lazy: torch-free --help
    from rich.table import Table  # lazy: torch-free --help

    from bringup.console import print_wide  # lazy: torch-free --help

    def who(r: RunInfo) -> str:
        return f"{r.run_id} ({r.device} {r.device_name}, torch {r.torch_version}, {r.host})"

    console.print(f"A: {escape(who(run_a))}\nB: {escape(who(run_b))}", highlight=False)
    rows = [d for d in diffs if show_all or d.change != "same" or d.regressions]
    if rows:
        t = Table(title="changes A -> B" if not show_all else "all cases A -> B", title_justify="left")
        style = {"regression": "red", "improvement": "green", "missing": "yellow", "new": "cyan"}
        cols: list[tuple[str, Any]] = [
            ("case", lambda d: escape(f"{d.suite}/{d.name}")),
            ("A -> B", lambda d: f"{d.status_a or '-'} -> {d.status_b or '-'}"),
            ("change", lambda d: f"[{style.get(d.change, 'default')}]{escape(_change(d))}[/]"),
            ("throughput", lambda d: _r(d.throughput_ratio)),
            ("ttfs", lambda d: _r(d.ttfs_ratio)),
            ("loss div", lambda d: _g(d.loss_divergence)),
            (
                "error A -> B",
                lambda d: (
                    "; ".join(
                        f"{k.removeprefix('max_').removesuffix('_err')} {_g(va)} -> {_g(vb)}"
                        for k, (va, vb) in d.parity.items()
                    )
                    or "-"
                ),
            ),
            ("why", lambda d: escape("; ".join(d.regressions + d.notes)) or "-"),
        ]
        cells = [[fn(d) for _, fn in cols] for d in rows]
        keep = [i for i, (name, _) in enumerate(cols) if i < 3 or any(c[i] != "-" for c in cells)]
        for i in keep:
            name = cols[i][0]
            t.add_column(
                name,
                justify="right" if name in ("throughput", "ttfs", "loss div") else "left",
                overflow="fold",
                no_wrap=name in ("A -> B", "change", "throughput", "ttfs"),
            )
        for c in cells:
            t.add_row(*[c[i] for i in keep])
        print_wide(console, t, 160)  # a log or CI: wider, unfolded
    for d in diffs:  # plain lines too: what a CI log is searched for, never cut by the table's width
        if d.regressions:
            console.print(f"regression: {d.suite}/{d.name}: {'; '.join(d.regressions)}", highlight=False, markup=False)
    console.print(summary_line(diffs), highlight=False)


def _change(d: CaseDiff) -> str:
    return d.change if d.change != "regression" or d.regressions else "regression (not counted)"


def summary(diffs: list[CaseDiff]) -> dict[str, int]:
    return {
        "compared": sum(d.change not in ("missing", "new") for d in diffs),
        "regressions": sum(bool(d.regressions) for d in diffs),
        "improvements": sum(d.change == "improvement" for d in diffs),
        "status_changes": sum(d.status_a != d.status_b and d.change not in ("missing", "new") for d in diffs),
        "missing_in_b": sum(d.change == "missing" for d in diffs),
        "new_in_b": sum(d.change == "new" for d in diffs),
    }


def summary_line(diffs: list[CaseDiff]) -> str:
    s = summary(diffs)
    return (
        f"{s['compared']} cases compared: {s['regressions']} regressions, {s['improvements']} improvements, "
        f"{s['status_changes']} status changes, {s['missing_in_b']} missing in B, {s['new_in_b']} new in B"
    )


def to_json(
    run_a: RunInfo,
    run_b: RunInfo,
    fail_on: dict[str, float | None],
    diffs: list[CaseDiff],
    card: list[dict[str, str | None]] | None = None,
) -> dict[str, Any]:
    return {
        "a": run_a.to_json(),
        "b": run_b.to_json(),
        "fail_on": fail_on,
        "summary": summary(diffs),
        "scorecard": card or [],
        "cases": [asdict(d) for d in diffs],
    }


def junit_xml(run_a: RunInfo, run_b: RunInfo, diffs: list[CaseDiff]) -> str:
    """A testcase per compared case; a counted regression is a <failure>."""
    from bringup.report.ci import xml_text as _x  # lazy: torch-free --help

    root = ET.Element("testsuites", name=_x(f"bringup compare {run_a.run_id} {run_b.run_id}"))
    skipped = sum(d.change in ("missing", "new") and not d.regressions for d in diffs)
    ts = ET.SubElement(
        root,
        "testsuite",
        name="bringup.compare",
        tests=str(len(diffs)),
        failures=str(sum(bool(d.regressions) for d in diffs)),
        errors="0",
        skipped=str(skipped),
    )
    for d in diffs:
        tc = ET.SubElement(ts, "testcase", classname=_x(f"bringup.compare.{d.suite}"), name=_x(d.name))
        if d.regressions:
            ET.SubElement(tc, "failure", message=_x("; ".join(d.regressions)), type="regression")
        elif d.change in ("missing", "new"):
            ET.SubElement(tc, "skipped", message=d.change)
    for k in ("tests", "failures", "errors", "skipped"):
        root.set(k, ts.get(k, "0"))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ---- CLI ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompareOptions(CommandOptions):
    """`bringup compare`'s options (add_arguments' dests; --json / --junit are Options.common's)."""

    a: str = measured("")
    b: str = measured("")
    fail_on: str = measured(DEFAULT_FAIL_ON)
    all: bool = not_measured(False, "unchanged cases listed too")


OPTIONS = CompareOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="baseline: a run id in --db or a bundle file (bringup export)")
    p.add_argument("b", metavar="B", help="candidate: a run id in --db or a bundle file")
    p.add_argument(
        "--fail-on",
        default=DEFAULT_FAIL_ON,
        metavar="KINDS",
        help=f"which changes make the exit code 1 (default {DEFAULT_FAIL_ON}); kinds: "
        f"{', '.join(KINDS)}; 'none' = report only",
    )
    p.add_argument("--all", action="store_true", help="list unchanged cases too")
    p.add_argument("--json", metavar="FILE", default=argparse.SUPPRESS, help="write the comparison as JSON")
    p.add_argument(
        "--junit",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="write a JUnit XML: a testcase per case, a failure per counted regression",
    )


def main(sess: CommandSession) -> int:
    from bringup.files import atomic_write_text, check_output_path, dumps  # lazy: torch-free --help

    args = sess.options.of(CompareOptions)
    fail_on = parse_fail_on(args.fail_on)
    json_out, junit_out = sess.options.common.json, sess.options.common.junit
    check_output_path(json_out, "--json")
    check_output_path(junit_out, "--junit")
    run_a, res_a = load_side(args.a, sess.db)
    run_b, res_b = load_side(args.b, sess.db)
    diffs = compare(res_a, res_b, fail_on)
    card = scorecard(run_a, res_a, run_b, res_b)
    print_scorecard(sess.console, card)
    print_diffs(sess.console, run_a, run_b, diffs, args.all)
    if json_out:
        atomic_write_text(json_out, dumps(to_json(run_a, run_b, fail_on, diffs, card)))
    if junit_out:
        atomic_write_text(junit_out, junit_xml(run_a, run_b, diffs))
    return 1 if any(d.regressions for d in diffs) else 0
