"""`bringup report --history`: the stored runs of one or more stores and bundles as trend lines.

What is drawn (bringup/report/history_page.py renders it):
- pass rate per suite: passed / judged (`ref_fail` left out, as on the scorecard), one line per machine and ask;
- per case, from its passing runs: tokens/s, MFU, first step in the suite's worker, first step as a new
  job (train's arms; any suite recording these catalogued metrics), one line per case, machine and ask.

A run's ask is its command and every option that changes what it measures, with the value in effect: the
record the run stores (`info["measured"]`, built from the options' own marks: bringup/options.py), so runs
that differ in --inputs, --noise-seeds, --seed ... are separate lines and runs that differ in --workers or
--db are one. A run stored before runs kept the record is keyed as well as its stored options allow
(derive_records), else by the options of ASKED it was given, as before.

A machine is `device · host`: the NVIDIA baseline and the device under test, from two stores or bundles,
are two lines on one chart. Runs are numbered 1..N in start order across all sources (the x axis); only
finished runs count (an interrupted or still-running run's pass rate says nothing); a run found in two
sources (a store and a bundle exported from it) is drawn once. Each line's moves beyond its noise come
from bringup/report/trend.py, named with what changed since the line's run before: torch version and
commit, bringup version and commit, library versions (what the runs recorded: bringup/provenance.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.bundle import load_bundle
from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.metrics import metric_spec
from bringup.outcomes import outcome_line
from bringup.report.trend import PASS_RATE, TIMING, Move, Rule, find_moves
from bringup.store import RunInfo, Store

# (catalogued metric, what the page calls it): the case figures drawn across runs
METRICS: tuple[tuple[str, str], ...] = (
    ("tokens_per_s", "tokens/s"),
    ("mfu", "MFU"),
    ("ttfs_s", "first step in the suite's worker"),
    ("job_ttfs_s", "first step as a new job"),
)
MAX_LINES = 12  # per chart: more is unreadable; the rest are named under the chart
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Filters:
    devices: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()
    torch: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None

    def keeps(self, run: RunInfo) -> bool:
        if self.devices and not any(_device_match(run, d) for d in self.devices):
            return False
        if self.torch and not any(_version_match(run.torch_version, v) for v in self.torch):
            return False
        if self.since is not None and run.started_at < self.since:
            return False
        return self.until is None or run.started_at <= self.until

    def describe(self) -> str:
        parts = [
            f"device {', '.join(self.devices)}" if self.devices else "",
            f"suite {', '.join(self.suites)}" if self.suites else "",
            f"torch {', '.join(self.torch)}" if self.torch else "",
            f"since {_day(self.since)}" if self.since is not None else "",
            f"until {_day(self.until)}" if self.until is not None else "",
        ]
        return "; ".join(p for p in parts if p) or "none"


def _device_match(run: RunInfo, want: str) -> bool:
    """'cuda' matches cuda:0 and cuda:1; 'cuda:1' only itself."""
    return run.device == want or run.device.split(":")[0] == want


def _version_match(version: str, want: str) -> bool:
    """'2.13' matches 2.13.0 and 2.13.0+cpu, not 2.130."""
    return version == want or version.startswith((want + ".", want + "+"))


def _day(t: float | None) -> str:
    return dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M") if t is not None else "-"


def parse_date(text: str, flag: str, end_of_day: bool = False) -> float:
    """YYYY-MM-DD (local time; --until: the end of that day) or YYYY-MM-DDTHH:MM[:SS] -> epoch seconds."""
    try:
        d = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(f"{flag} {text}: not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)") from None
    if end_of_day and len(text.strip()) == 10:
        d += dt.timedelta(days=1, microseconds=-1)
    return d.timestamp() if d.tzinfo else d.astimezone().timestamp()


RECORD = "measured"  # the run's info key: its options that change what it measures, values in effect (flow.py)
# The ask of a run stored before runs kept that record, and that its stored options cannot complete
# (derive_records): the options known then to change a measurement, those given.
ASKED = (
    "dtype",
    "compile_backend",
    "backend",
    "mode",
    "modes",
    "model",
    "source",
    "filter",
    "limit",
    "size",
    "matrix",
    "mods",
    "dtypes",
    "quick",
    "full",
    "only",
    "skip",
    "cache",
    "nproc",
    "batch",
    "seq",
    "steps",
    "fallback",
)


@dataclass(frozen=True)
class StoredRun:
    n: int  # its number on the page: 1..N in start order
    source: str  # the store or bundle it came from (the file's name)
    run: RunInfo
    results: tuple[CaseResult, ...]
    report: Path | None = None  # its scorecard, where one was written next to the store or bundle
    derived: Mapping[str, Any] | None = None  # a run stored without a record: the one derive_records found

    @property
    def machine(self) -> str:
        return f"{self.run.device} · {self.run.host}" if self.run.host else self.run.device

    @property
    def measured(self) -> dict[str, Any]:
        """What the run measured by, as dashboards key their lines: its command, then its record of the options
        that change what is measured (info["measured"], or the one derived for an older run), values in effect;
        a run with neither: the options of ASKED it was given (dtype, compile backend, mode, model set, ...)."""
        out: dict[str, Any] = {"command": self.run.command}
        rec = self.run.info.get(RECORD)
        rec = rec if isinstance(rec, dict) else self.derived
        if rec is not None:
            out.update((k, v) for k, v in rec.items() if k != "command")
            return out
        opts = self.run.info.get("options")
        opts = opts if isinstance(opts, dict) else {}
        out.update((k, opts[k]) for k in ASKED if opts.get(k) not in (None, False, [], ""))
        return out

    @property
    def key(self) -> str:
        """The ask as one value: runs with the same key measured the same way."""
        return json.dumps(self.measured, sort_keys=True, default=str)

    @property
    def asked(self) -> tuple[tuple[str, str], ...]:
        """The ask as (option, value shown) pairs, the command first."""
        return tuple((k, shown(v)) for k, v in self.measured.items())

    @property
    def build(self) -> dict[str, Any]:
        b = self.run.info.get("build")
        return b if isinstance(b, dict) else {}

    @property
    def versions(self) -> dict[str, Any]:
        v = self.run.info.get("versions")
        return v if isinstance(v, dict) else {}


@dataclass
class Line:
    chart: str  # "pass_rate" or a metric name
    suite: str
    label: str
    rule: Rule
    higher_is_better: bool | None
    unit: str
    points: list[tuple[StoredRun, float, str]] = field(default_factory=list)  # (run, value, detail)
    moves: list[Move] = field(default_factory=list)


@dataclass
class History:
    runs: list[StoredRun]
    lines: list[Line]
    sources: list[str]
    filters: Filters
    seen: int  # runs in the sources before filtering
    skipped: dict[str, int]  # why runs were left out -> how many


def shown(v: Any) -> str:
    """An option's value as a label shows it: a list comma-joined, None (the command's default) as 'default'."""
    if v is None:
        return "default"
    return ",".join(map(str, v)) if isinstance(v, list) else str(v)


def derive_records(runs: Sequence[StoredRun]) -> list[StoredRun]:
    """`runs`, each run stored without a record (before runs kept one) given the record of the newest run of
    its command that has one and whose every field its own stored options hold, read from those options: so a
    store spanning the change draws one line where nothing measured changed. A run whose options lack a field
    (stored before that option existed: e.g. a zoo run before --inputs, which fed uniform rows) keeps ASKED."""
    shapes: dict[str, list[tuple[str, ...]]] = {}
    for sr in runs:
        rec = sr.run.info.get(RECORD)
        if isinstance(rec, dict):
            shapes.setdefault(sr.run.command, []).insert(0, tuple(rec))  # newest first
    out = []
    for sr in runs:
        opts = sr.run.info.get("options")
        if isinstance(sr.run.info.get(RECORD), dict) or not isinstance(opts, dict):
            out.append(sr)
            continue
        fit = next((s for s in shapes.get(sr.run.command, []) if all(k in opts for k in s)), None)
        out.append(sr if fit is None else dataclasses.replace(sr, derived={k: opts[k] for k in fit}))
    return out


def ask_labels(runs: Sequence[StoredRun]) -> list[str]:
    """Each run's ask named by its command and the options whose values differ among `runs` (those it has)."""
    asks = [sr.measured for sr in runs]
    absent = object()
    canon = lambda a, k: json.dumps(a[k], sort_keys=True, default=str) if k in a else absent
    names = dict.fromkeys(k for a in asks for k in a if k != "command")
    differ = [k for k in names if len({canon(a, k) for a in asks}) > 1]
    return [" ".join([str(a["command"]), *(f"{k}={shown(a[k])}" for k in differ if k in a)]) for a in asks]


def _ask_labels(first: Mapping[tuple[str, ...], StoredRun]) -> dict[tuple[str, ...], str]:
    """Line keys ending in an ask key -> the ask's label, where the rest of the key (suite, machine, case)
    has lines of several asks; lines alone in theirs get none."""
    groups: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for k in first:
        groups.setdefault(k[:-1], []).append(k)
    out: dict[tuple[str, ...], str] = {}
    for keys in groups.values():
        if len(keys) > 1:
            out.update(zip(keys, ask_labels([first[k] for k in keys]), strict=True))
    return out


# ---- reading the sources --------------------------------------------------------------------------
def is_store(path: Path) -> bool:
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        return True
    try:
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def read_sources(paths: Sequence[Path], filters: Filters) -> History:
    """Every finished run in `paths` (stores and bundles) that the filters keep, numbered in start order."""
    found: list[tuple[str, RunInfo, list[CaseResult], Path | None]] = []
    ids: set[str] = set()
    seen = 0
    skipped = {"unfinished": 0, "filtered out": 0, "already in another source": 0}

    def consider(run: RunInfo) -> bool:
        if run.run_id in ids:
            skipped["already in another source"] += 1
        elif run.status != "finished":
            skipped["unfinished"] += 1
        elif not filters.keeps(run):
            skipped["filtered out"] += 1
        else:
            return True
        return False

    for path in paths:
        if not path.exists():
            raise BadInput(f"{path}: no such store or bundle")
        if is_store(path):
            with Store(path, create=False) as st:
                for run in st.runs():
                    seen += 1
                    if consider(run):
                        ids.add(run.run_id)
                        report = path.parent / run.run_id / "report.html"
                        found.append((path.name, run, st.results(run.run_id), report if report.is_file() else None))
        else:
            run, results = load_bundle(path)
            seen += 1
            if consider(run):
                ids.add(run.run_id)
                report = path.with_suffix(".html")
                found.append((path.name, run, results, report if report.is_file() else None))
    found.sort(key=lambda f: (f[1].started_at, f[1].run_id))
    runs = []
    for i, (src, run, results, page) in enumerate(found, 1):
        kept = tuple(r for r in results if not filters.suites or r.suite in filters.suites)
        runs.append(StoredRun(i, src, run, kept, page))
    runs = derive_records([r for r in runs if r.results])
    return History(runs, build_lines(runs), [p.name for p in paths], filters, seen, skipped)


# ---- the lines ------------------------------------------------------------------------------------
def pass_rate_lines(runs: Iterable[StoredRun]) -> list[Line]:
    """One line per (suite, machine, ask); named by the machine, and by the ask where the suite has lines of
    several asks on that machine (only the options in which they differ: ask_labels)."""
    lines: dict[tuple[str, ...], Line] = {}  # (suite, machine, ask)
    first: dict[tuple[str, ...], StoredRun] = {}
    for sr in runs:
        by_suite: dict[str, list[CaseResult]] = {}
        for r in sr.results:
            by_suite.setdefault(r.suite, []).append(r)
        for suite, rs in by_suite.items():
            judged = [r for r in rs if r.status is not Status.REF_FAIL]
            if not judged:
                continue
            rate = 100.0 * sum(r.status is Status.PASS for r in judged) / len(judged)
            key = (suite, sr.machine, sr.key)
            line = lines.setdefault(key, Line("pass_rate", suite, sr.machine, PASS_RATE, True, "%"))
            line.points.append((sr, rate, outcome_line(rs)))
            first.setdefault(key, sr)
    for asked, label in _ask_labels(first).items():  # runs that asked for different things: one line each, named by it
        lines[asked].label = f"{asked[1]} · {label}"
    return list(lines.values())


def metric_lines(runs: Sequence[StoredRun]) -> list[Line]:
    """One line per (metric, suite, machine, case, ask) from passing cases: a failing case's speed is not one.
    Labelled by the case's name (+ its id where two cases of a suite share a name, + the machine where
    the page has more than one, + the ask where the case has lines of several)."""
    lines: dict[tuple[str, str, str, str, str], Line] = {}
    first: dict[tuple[str, ...], StoredRun] = {}
    for sr in runs:
        for r in sr.results:
            if r.status is not Status.PASS:
                continue
            for name, _ in METRICS:
                m = r.metrics.get(name)
                spec = metric_spec(name)
                if m is None or spec is None or m.value != m.value:
                    continue
                value = spec.display(m.value) if m.unit in (spec.unit, "") else m.value
                key = (name, r.suite, sr.machine, r.case_id, sr.key)
                line = lines.setdefault(
                    key, Line(name, r.suite, r.name, TIMING, spec.higher_is_better, spec.display_unit)
                )
                line.points.append((sr, value, ""))
                first.setdefault(key, sr)
    several = len({sr.machine for sr in runs}) > 1
    asks = _ask_labels(first)
    names = {key[:4]: ln.label for key, ln in lines.items()}  # a case's lines of several asks: one case
    same = Counter((n, s, m, label) for (n, s, m, _), label in names.items())
    for key, ln in lines.items():
        n, s, machine, case_id, _ = key
        dup = same[(n, s, machine, ln.label)] > 1
        ask = f" · {asks[key]}" if key in asks else ""
        ln.label += (f" [{case_id[:6]}]" if dup else "") + (f" · {machine}" if several else "") + ask
    return list(lines.values())


def build_lines(runs: Sequence[StoredRun]) -> list[Line]:
    lines = pass_rate_lines(runs) + metric_lines(runs)
    for ln in lines:
        ln.moves = find_moves([v for _, v, _ in ln.points], ln.rule)
    return lines


# ---- naming a move --------------------------------------------------------------------------------
def changes(before: StoredRun, at: StoredRun) -> list[str]:
    """What the runs recorded differently: what they asked for (command, options: StoredRun.measured), torch
    (version, commit), bringup (version, checkout commit), library versions, the device's name. [] when
    nothing recorded changed."""
    out = []
    a, b = before.run, at.run
    oa, ob = dict(before.asked), dict(at.asked)
    for k in [k for k in dict.fromkeys([*oa, *ob]) if oa.get(k) != ob.get(k)]:
        flag = k if k == "command" else "--" + k.replace("_", "-")
        out.append(f"{flag} {oa.get(k, 'not given')} → {ob.get(k, 'not given')}")
    if a.torch_version != b.torch_version:
        out.append(f"torch {a.torch_version} → {b.torch_version}")
    ga, gb = before.build.get("torch_git"), at.build.get("torch_git")
    if ga and gb and ga != gb:
        out.append(f"torch commit {str(ga)[:10]} → {str(gb)[:10]}")
    if a.bringup_version != b.bringup_version:
        out.append(f"bringup {a.bringup_version} → {b.bringup_version}")
    ba, bb = before.build.get("bringup_git"), at.build.get("bringup_git")
    if ba and bb and ba != bb:
        out.append(f"bringup commit {str(ba)[:10]} → {str(bb)[:10]}")
    for lib in sorted(set(before.versions) | set(at.versions)):
        va, vb = before.versions.get(lib), at.versions.get(lib)
        if va != vb and before.versions and at.versions:
            out.append(f"{lib} {va or 'absent'} → {vb or 'absent'}")
    if a.device_name != b.device_name:
        out.append(f"device {a.device_name} → {b.device_name}")
    return out


def direction(line: Line, move: Move) -> str:
    if line.higher_is_better is None or move.change == 0:
        return ""
    return "better" if (move.change > 0) == line.higher_is_better else "worse"


@dataclass(frozen=True)
class NamedMove:
    line: Line
    move: Move
    at: StoredRun
    before: StoredRun
    changed: tuple[str, ...]

    @property
    def direction(self) -> str:
        return direction(self.line, self.move)

    @property
    def recorded(self) -> bool:
        """Both runs recorded their build (commits): runs from before bringup/provenance.py did not."""
        return bool(self.at.build and self.before.build)


def named_moves(lines: Iterable[Line]) -> list[NamedMove]:
    """Every move and outlier, newest run first, with the changes since the line's run before it."""
    out = []
    for ln in lines:
        for mv in ln.moves:
            at, before = ln.points[mv.index][0], ln.points[mv.index - 1][0]
            out.append(NamedMove(ln, mv, at, before, tuple(changes(before, at))))
    return sorted(out, key=lambda m: (-m.at.n, m.move.kind != "moved", m.line.chart, m.line.label))
