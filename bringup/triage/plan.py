"""What `bringup triage` runs on the device, pure: which wrong-numbers cases to localize (into the run, as
`--localize` does), and which groups need PyTorch's minifier (compile failures) or a fullgraph repro (breaks).

Localize within a budget: the cases not localized yet, grouped by their module-level signature (the module check's
first module off: its kind, forward or backward, eager or compiled, dtype); per group, the first two cases of
distinct models by default (`--localize-all`: every case), the groups of largest reach first. Two localized cases
that name one op let the group's other cases join that op's group, marked inferred (bringup/triage/groups.py);
two that disagree leave them at module level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bringup.case import Case, CaseResult, Status
from bringup.localize.post_run import cases_for
from bringup.triage.groups import Group
from bringup.triage.signature import module_key
from bringup.triage.work import BREAK_ENTRY, MINIFY_ENTRY

PER_KIND = 2  # cases localized per module-level signature before the rest are inferred
WORK_SUITE = "triage"


def localize_plan(
    results: Sequence[CaseResult], joined: Mapping[str, Any], every: bool = False, per_kind: int = PER_KIND
) -> list[list[Case]]:
    """The localize cases to run, in rounds: round n holds the n-th case of each module-level signature (largest
    group first), so that a budget spent early has still localized one case of every group."""
    by_key: dict[str, list[CaseResult]] = {}
    done: dict[str, int] = {}
    for r in results:
        if r.suite != "zoo" or r.status is not Status.FAIL_NUMERIC:
            continue
        mk = module_key(r)
        key = mk[0] if mk else f"model:{r.reason.split(':', 1)[0]}:{r.params.get('dtype')}"
        if r.case_id in joined:
            done[key] = done.get(key, 0) + 1
        else:
            by_key.setdefault(key, []).append(r)
    rounds: list[list[Case]] = []
    for key, rs in sorted(by_key.items(), key=lambda kv: -len(kv[1])):
        room = len(rs) if every else max(0, per_kind - done.get(key, 0))
        picked = _distinct_models(rs, every)[:room]
        for n, r in enumerate(picked):
            cases, _ = cases_for([r])
            while len(rounds) <= n:
                rounds.append([])
            rounds[n].extend(cases)
    return rounds


def _distinct_models(rs: Sequence[CaseResult], every: bool) -> list[CaseResult]:
    """The cases in order, one per model first (two cases of one model say less than two models)."""
    seen: set[str] = set()
    first: list[CaseResult] = []
    rest: list[CaseResult] = []
    for r in rs:
        m = str(r.params.get("model"))
        (rest if m in seen else first).append(r)
        seen.add(m)
    return first + rest if every else first


def _zoo_case(g: Group, results: Mapping[str, CaseResult]) -> CaseResult | None:
    """The group's first zoo case (the one its repro is made from)."""
    return next((results[c.case_id] for c in g.cases if c.suite == "zoo" and c.case_id in results), None)


def work_cases(groups: Sequence[Group], results: Mapping[str, CaseResult], device: str, budget_s: float) -> list[Case]:
    """A minifier case per compile group and a fullgraph case per graph-break group (made from a zoo case)."""
    out = []
    for g in groups:
        kind = {"compile": MINIFY_ENTRY, "break": BREAK_ENTRY}.get(g.signature.kind)
        r = _zoo_case(g, results)
        if kind is None or r is None:
            continue
        params: dict[str, Any] = {
            "group": g.signature.id,
            "key": g.signature.key,
            "title": g.signature.title,
            "zoo": dict(r.params),
        }
        params["budget_s"] = budget_s
        name = f"{'minify' if kind == MINIFY_ENTRY else 'fullgraph'} {g.signature.id} ({r.name})"
        out.append(Case(WORK_SUITE, name, params, kind, budget_s=budget_s + 120.0, isolated=True))
    return out


def fail_status(kind: str) -> str:
    """The status a group's repro shows when it fails (what bisect records it as)."""
    return {
        "numeric": Status.FAIL_NUMERIC.value,
        "fallback": Status.FALLBACK.value,
        "compile": Status.FAIL_COMPILE.value,
        "break": Status.SILENT_EAGER.value,
        "unsupported": Status.UNSUPPORTED.value,
    }.get(kind, Status.FAIL_NUMERIC.value)
