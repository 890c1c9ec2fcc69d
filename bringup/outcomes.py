"""What a status means to a reader: pass, gap, failure, harness error, not judged. One vocabulary for the
HTML scorecard, the terminal totals line and the docs (docs/verdicts.md quotes `OUTCOMES`).

Statuses (bringup.case, design.md) are what a case recorded; outcomes group them by whose problem it is:

    pass        the device did it and was judged right
    gap         the backend does not do it, and said so: `unsupported` (NotImplementedError or
                equivalent) or `fallback` (ran only through the backend's CPU fallback). A named,
                expected kind of missing support, not a wrong answer and not a crash.
    failure     the device tried and did not deliver: a wrong answer (`fail_numeric`), a compile that
                raised (`fail_compile`), past its budget (`budget`), a dead worker (`crash`), out of
                memory (`oom`), a compiled path that silently ran eager (`silent_eager`)
    error       bringup's own bug (`error`): a harness error, traceback kept; says nothing about the device
    not judged  the cpu reference itself failed (`ref_fail`): the case says nothing about the device and
                is left out of pass rates

`budget` is a failure, not a gap: the backend did not say "not here", it took too long for the case's
budget (FlexAttention's 7/96 in the seed article). The exit code is a separate, stricter question
(bringup.case.is_failure): every gap, failure and error makes it 1, except `unsupported` under
--allow-unsupported; `not judged` never does (a suite with nothing but `ref_fail` does: nothing judged).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from bringup.case import CaseResult, Status

# What the backend's counter may count that is no missing op: reading a value to the host, copies.
NOT_FALLBACKS = (
    "aten::_local_scalar_dense",
    "aten::_to_copy",
    "aten::copy_",
    "aten::_copy_from",
    "aten::_copy_from_and_resize",
    "aten::to",
    "aten::_to_cpu",
)


@dataclass(frozen=True)
class Outcome:
    key: str  # pass | gap | failure | error | not_judged
    one: str  # the word for one case
    many: str  # the word for several
    statuses: tuple[Status, ...]
    meaning: str


OUTCOMES: tuple[Outcome, ...] = (
    Outcome("pass", "pass", "pass", (Status.PASS,), "the device did it and was judged right"),
    Outcome(
        "gap",
        "gap",
        "gaps",
        (Status.UNSUPPORTED, Status.FALLBACK),
        "the backend does not do it and said so (not implemented, or only through its CPU fallback)",
    ),
    Outcome(
        "failure",
        "failure",
        "failures",
        (Status.FAIL_NUMERIC, Status.FAIL_COMPILE, Status.BUDGET, Status.CRASH, Status.OOM, Status.SILENT_EAGER),
        "the device tried and did not deliver: wrong numbers, a compile error, over budget, a crash, "
        "out of memory, or compiled code that silently ran eager",
    ),
    Outcome(
        "error",
        "harness error",
        "harness errors",
        (Status.ERROR,),
        "bringup's own bug (traceback kept); says nothing about the device",
    ),
    Outcome(
        "not_judged",
        "not judged",
        "not judged",
        (Status.REF_FAIL,),
        "the cpu reference failed, so the device was not checked; left out of pass rates",
    ),
)
BY_STATUS: dict[Status, Outcome] = {s: o for o in OUTCOMES for s in o.statuses}
BY_KEY: dict[str, Outcome] = {o.key: o for o in OUTCOMES}


def outcome(status: Status | str) -> Outcome:
    return BY_STATUS[Status(status)]


def tally(results: Iterable[CaseResult]) -> Counter[str]:
    """{outcome key: count} (every key present, zeros included)."""
    c = Counter({o.key: 0 for o in OUTCOMES})
    c.update(outcome(r.status).key for r in results)
    return c


def words(n: int, key: str) -> str:
    o = BY_KEY[key]
    return f"{n} {o.one if n == 1 else o.many}"


def outcome_line(results: Iterable[CaseResult]) -> str:
    """'48/53 pass; 5 gaps, 0 failures' (+ harness errors and not judged when there are any): the same
    words on the page's headline and in the terminal's totals line."""
    c = tally(results)
    judged = sum(c.values()) - c["not_judged"]
    parts = [words(c["gap"], "gap"), words(c["failure"], "failure")]
    parts += [words(c[k], k) for k in ("error", "not_judged") if c[k]]
    return f"{c['pass']}/{judged} pass; " + ", ".join(parts)


def same_cause(key: str, coarse: str, other_key: str, other_coarse: str) -> bool:
    """Two root-cause signatures (bringup/triage/signature.py: a key, and for a numeric failure localized to an op
    the module-level key it refines) name one bug: the same key, or the same module-level key where one side was
    localized and the other was not. What `report --history` and the triage's first/last-seen both match by."""
    if key == other_key:
        return True
    refined_once = bool(coarse) != bool(other_coarse)
    return refined_once and (coarse or key) == (other_coarse or other_key)
