"""Classify every case of a run against its expectations: expected, new failure, new pass, flaky.

Rules (one case; `seen` = its statuses over the `--repeat` runs, first run first; `allowed` = the
expected status plus the entry's `flaky` list; a case not listed is expected to pass):
- `seen` holds more than one status: **expected** when all of them are `allowed` (a known flake),
  else **flaky**.
- the status is `allowed`: **expected**, unless the entry pins `graph_breaks` and the run has more
  (**new failure**) or fewer (**new pass**: the file is stale).
- a failing status (as the exit code counts it: `unsupported` not under `--allow-unsupported`) that
  is not allowed: **new failure** (a regression, or a failure that changed its kind).
- a non-failing status the file did not expect: **new pass** when a failure was expected (the file is
  stale). `ref_fail` (the cpu reference failed: nothing judged) where `pass` was expected stays
  **expected**; the run's "nothing judged in a suite" rule still applies to it.

Exit code with expectations: 1 on any new failure (and, with `--strict`, on any new pass or flaky
case), or when a suite judged nothing and that was not expected; else 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bringup.case import CaseResult, Status, is_failure
from bringup.expect.file import PASS, Expectation


class Klass(str, Enum):
    EXPECTED = "expected"
    NEW_FAILURE = "new_failure"
    NEW_PASS = "new_pass"
    FLAKY = "flaky"

    def __str__(self) -> str:
        return self.value


def case_key(r: CaseResult) -> str:
    return f"{r.suite}/{r.name}"


def graph_breaks(r: CaseResult) -> int | None:
    v = r.metrics["graph_breaks"].value if "graph_breaks" in r.metrics else r.fields.get("graph_breaks")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return int(v)
    return None


@dataclass
class Outcome:
    key: str
    case_id: str
    klass: Klass
    seen: list[Status]
    expected: Expectation
    detail: str
    graph_breaks: int | None = None
    listed: bool = False

    @property
    def status(self) -> Status:
        return self.seen[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.key,
            "case_id": self.case_id,
            "class": self.klass.value,
            "status": self.status.value,
            "seen": [s.value for s in self.seen],
            "expected": self.expected.status.value,
            "expected_reason": self.expected.reason,
            "link": self.expected.link,
            "detail": self.detail,
            "graph_breaks": self.graph_breaks,
            "expected_graph_breaks": self.expected.graph_breaks,
        }


@dataclass
class Judgement:
    outcomes: list[Outcome]
    section: tuple[str, str] | None
    path: str
    strict: bool
    repeat: int
    unjudged: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    upstream: list[dict[str, Any]] = field(default_factory=list)  # imported upstream rows vs this run (upstream.py)

    def by_class(self, k: Klass) -> list[Outcome]:
        return [o for o in self.outcomes if o.klass is k]

    def counts(self) -> dict[str, int]:
        c = Counter(o.klass.value for o in self.outcomes)
        return {k.value: c[k.value] for k in Klass}

    def of(self, case_id: str) -> Outcome | None:
        return next((o for o in self.outcomes if o.case_id == case_id), None)

    # bringup.api.CaseMarks: what --junit / --csv read (the report never imports this package)
    def label(self, case_id: str) -> str:
        o = self.of(case_id)
        return o.klass.value if o is not None else ""

    def junit(self, case_id: str, kind: str) -> tuple[str, str | None]:
        return junit(self.of(case_id), kind, self.strict)

    def exit_code(self) -> int:
        if self.by_class(Klass.NEW_FAILURE) or self.unjudged:
            return 1
        if self.strict and (self.by_class(Klass.NEW_PASS) or self.by_class(Klass.FLAKY)):
            return 1
        return 0

    def block(self) -> dict[str, Any]:
        """The `expectations` block of the JSON contract."""
        return {
            "file": self.path,
            "section": {"device": self.section[0], "torch": self.section[1]} if self.section else None,
            "strict": self.strict,
            "repeat": self.repeat,
            "counts": self.counts(),
            "exit_code": self.exit_code(),
            "unjudged_suites": self.unjudged,
            "not_run": self.not_run,
            "cases": [o.to_json() for o in self.outcomes],
            "upstream": self.upstream,
        }


def classify_one(
    key: str, case_id: str, seen: list[Status], exp: Expectation | None, gb: int | None, allow_unsupported: bool
) -> Outcome:
    e = exp or PASS
    out = Outcome(key, case_id, Klass.EXPECTED, seen, e, "", gb, exp is not None)
    distinct = list(dict.fromkeys(seen))
    if len(distinct) > 1:
        names = ", ".join(f"{s.value} x{seen.count(s)}" for s in distinct)
        if set(distinct) <= e.allowed:
            out.detail = f"known flaky: {names}"
        else:
            out.klass, out.detail = Klass.FLAKY, f"differs across {len(seen)} runs: {names}"
        return out
    s = seen[0]
    if s in e.allowed:
        if e.graph_breaks is not None and gb is not None and gb != e.graph_breaks:
            more = gb > e.graph_breaks
            out.klass = Klass.NEW_FAILURE if more else Klass.NEW_PASS
            out.detail = f"graph breaks {gb} {'>' if more else '<'} expected {e.graph_breaks}"
        return out
    if is_failure(s, allow_unsupported):
        out.klass, out.detail = Klass.NEW_FAILURE, f"expected {e.status.value}, got {s.value}"
    elif is_failure(e.status, allow_unsupported) or e.status is Status.REF_FAIL:
        out.klass, out.detail = Klass.NEW_PASS, f"expected {e.status.value}, got {s.value}"
    else:
        out.detail = f"got {s.value} (expected {e.status.value})"
    return out


def classify(
    results: Sequence[CaseResult],
    repeats: Sequence[Sequence[CaseResult]],
    expectations: dict[str, Expectation],
    *,
    section: tuple[str, str] | None,
    path: str,
    strict: bool = False,
    allow_unsupported: bool = False,
) -> Judgement:
    """`results`: the run's results; `repeats`: the same cases' results in each extra `--repeat` run."""
    extra: dict[str, list[Status]] = {}
    for rs in repeats:
        for r in rs:
            extra.setdefault(r.case_id, []).append(r.status)
    outcomes = [
        classify_one(
            case_key(r),
            r.case_id,
            [r.status, *extra.get(r.case_id, [])],
            expectations.get(case_key(r)),
            graph_breaks(r),
            allow_unsupported,
        )
        for r in results
    ]
    from bringup.console import unjudged_suites  # lazy: torch-free --help

    unjudged = [
        s
        for s in unjudged_suites(results)
        if not all(o.expected.status is Status.REF_FAIL for o in outcomes if o.key.startswith(f"{s}/"))
    ]
    run_keys = {o.key for o in outcomes}
    not_run = sorted(k for k in expectations if k not in run_keys)
    from bringup.expect.upstream import rows  # lazy: torch-free --help

    upstream = rows(results, outcomes, expectations, not_run)
    return Judgement(outcomes, section, path, strict, 1 + len(repeats), unjudged, not_run, upstream)


def junit(o: Any, default_kind: str, strict: bool) -> tuple[str, str | None]:
    """JUnit kind and message of one case under expectations: expected failures are skipped."""
    if o is None:
        return default_kind, None
    if o.klass is Klass.EXPECTED:
        if o.status.value == "pass" or default_kind == "":
            return "", None
        why = f"{o.expected.reason}" + (f", {o.expected.link}" if o.expected.link else "")
        return "skipped", f"expected failure ({why}): {o.status.value}"
    if o.klass is Klass.NEW_FAILURE:
        return ("error" if o.status.value == "error" else "failure"), f"new failure: {o.detail}"
    label = "new pass" if o.klass is Klass.NEW_PASS else "flaky"
    if strict:
        return "failure", f"{label} (--strict): {o.detail}"
    return ("" if o.klass is Klass.NEW_PASS else "skipped"), f"{label}: {o.detail}"
