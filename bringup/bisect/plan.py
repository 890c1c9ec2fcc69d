"""The search, pure: given what the candidates run so far said, which to run next, or the conclusion.

Candidates are in order, 0..k-1. Each finished candidate is a verdict (its status, the same on every
run), `skip` (it did not install or import, or the repro said it cannot test it: exit 125) or `flaky`
(its runs disagreed: the rule of `--expect --repeat`). Neither skip nor flaky is a verdict.

  1. the endpoints first (together when there are slots): each must be a verdict and they must differ;
  2. old = the verdict at 0; lo = the last candidate with it before hi = the first without it; the first
     change lies in (lo, hi]. Probe the untested candidate nearest the middle (with W slots: W points
     spread evenly), skipping skips and flakes as `git bisect skip` does.
  3. nothing untested is left between lo and hi: found (hi, when nothing lies between) or ambiguous (the
     change is one of the skipped / flaky candidates between, or hi).

With stable verdicts and one slot, k candidates take at most 2 + ceil(log2(k - 1)) <= ceil(log2 k) + 2 runs
of an environment: the endpoints, then halves of the k - 1 places the change can be.
`every`: run them all; the answer is every change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SKIP = "skip"
FLAKY = "flaky"

# conclusions
FOUND = "found"
NO_CHANGE = "no_change"
AMBIGUOUS = "ambiguous"
ENDPOINT = "endpoint_unusable"
BUDGET = "env_budget"
EVERY = "every"


@dataclass(frozen=True)
class Seen:
    """One candidate's outcome: `verdict` is a status name, or SKIP / FLAKY."""

    index: int
    verdict: str

    @property
    def stable(self) -> bool:
        return self.verdict not in (SKIP, FLAKY)


@dataclass(frozen=True)
class Conclusion:
    kind: str
    old: str | None = None  # the old endpoint's verdict
    new: str | None = None  # the new endpoint's verdict
    last_old: int | None = None
    first_new: int | None = None
    between: tuple[int, ...] = ()  # ambiguous: the change is at one of these (skipped / flaky ones, then first_new)
    changes: tuple[tuple[int, int], ...] = ()  # every: (previous stable, next stable with another verdict)
    note: str = ""
    skipped: tuple[int, ...] = ()
    flaky: tuple[int, ...] = ()
    nonmonotone: tuple[int, ...] = ()  # candidates after the change that show the old verdict again
    other: tuple[int, ...] = ()  # with a new verdict asked for: candidates with a third one (stepped over)
    newest: int | None = None  # every: the newest candidate with a verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "old": self.old,
            "new": self.new,
            "last_old": self.last_old,
            "first_new": self.first_new,
            "between": list(self.between),
            "changes": [list(c) for c in self.changes],
            "note": self.note,
            "skipped": list(self.skipped),
            "flaky": list(self.flaky),
            "nonmonotone": list(self.nonmonotone),
            "other": list(self.other),
            "newest": self.newest,
        }


@dataclass(frozen=True)
class Step:
    run: tuple[int, ...] = ()
    done: Conclusion | None = None


@dataclass
class _State:
    seen: Mapping[int, Seen]
    k: int
    new_verdict: str | None = None
    skipped: tuple[int, ...] = field(default=())
    flaky: tuple[int, ...] = field(default=())
    other: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        self.skipped = tuple(sorted(i for i, s in self.seen.items() if s.verdict == SKIP))
        self.flaky = tuple(sorted(i for i, s in self.seen.items() if s.verdict == FLAKY))
        old = self.seen[0].verdict if 0 in self.seen and self.seen[0].stable else None
        if self.new_verdict is not None and old is not None:
            keep = (old, self.new_verdict)
            self.other = tuple(sorted(i for i, s in self.seen.items() if i and s.stable and s.verdict not in keep))

    def verdict(self, i: int) -> str | None:
        """The candidate's verdict as the search counts it: None for a skip, a flake, or (with `new_verdict`)
        a third verdict, which says nothing about the one asked for."""
        s = self.seen.get(i)
        return s.verdict if s is not None and s.stable and i not in self.other else None


def max_envs_bound(k: int) -> int:
    """The promise: a bisection of k stable candidates with one slot runs at most ceil(log2 k) + 2
    environments (it needs 2 + ceil(log2(k - 1)), never more)."""
    return 2 + (k - 1).bit_length() if k > 1 else k


def step(
    k: int,
    seen: Mapping[int, Seen],
    width: int = 1,
    every: bool = False,
    max_envs: int | None = None,
    new_verdict: str | None = None,
) -> Step:
    """What to do next with k candidates (k >= 2) after `seen`. `new_verdict`: only that verdict is the change
    looked for; a candidate with a third one is stepped over like a skip (and named)."""
    st = _State(seen, k, None if every else new_verdict)
    budget = None if max_envs is None else max(0, max_envs - len(seen))
    if every:
        todo = tuple(i for i in range(k) if i not in seen)
        if todo and budget != 0:
            return Step(run=todo[: budget if budget is not None else len(todo)])
        return Step(done=_every(st, note="" if not todo else f"env budget spent: {len(todo)} candidate(s) not run"))
    ends = tuple(i for i in (0, k - 1) if i not in seen)
    if ends:
        if budget is not None and budget < len(ends):
            return Step(done=Conclusion(BUDGET, note=f"--max-envs {max_envs} cannot cover both endpoints"))
        return Step(run=ends)
    at_ends = _at_endpoints(st, k, new_verdict)
    if at_ends is not None:
        return Step(done=at_ends)
    chain = links(st)
    last = chain[-1]
    if not last.untested:
        return Step(done=_found(st, chain))
    w = max(1, min(width, len(last.untested)))
    if budget is not None:
        if budget == 0:
            return Step(done=_spent(st, chain, max_envs))
        w = affordable(w, last.hi - last.lo, budget)
    return Step(run=spread(last.untested, last.lo, last.hi, w))


def _at_endpoints(st: _State, k: int, new_verdict: str | None) -> Conclusion | None:
    """What the two endpoints alone conclude: one that says nothing (a skip, a flake, a third verdict, or an old
    one already `new_verdict`), or no change between them; None: a change to search for."""
    old, new = st.verdict(0), st.verdict(k - 1)
    if old is None or new is None or (new_verdict is not None and old == new_verdict):
        which = ", ".join(
            f"{'old' if i == 0 else 'new'} endpoint {st.seen[i].verdict}"
            + (f", not {new_verdict}" if i in st.other else "")
            for i in (0, k - 1)
            if st.seen[i].verdict in (SKIP, FLAKY) or i in st.other
        )
        if new_verdict is not None and old == new_verdict:
            which = f"the old endpoint is already {new_verdict}"
        return Conclusion(ENDPOINT, old, new, note=which, skipped=st.skipped, flaky=st.flaky, other=st.other)
    if old == new:
        return Conclusion(NO_CHANGE, old, new, note=f"both endpoints are {old}", skipped=st.skipped, flaky=st.flaky)
    return None


def _spent(st: _State, chain: Sequence[Link], max_envs: int | None) -> Conclusion:
    """--max-envs spent before the last change was pinned: the first change's ends and what is left untested."""
    first, last = chain[0], chain[-1]
    return Conclusion(
        BUDGET,
        st.verdict(0),
        st.verdict(first.hi),
        first.lo,
        first.hi,
        tuple(range(last.lo + 1, last.hi + 1)),
        changes=tuple((c.lo, c.hi) for c in chain),
        note=f"--max-envs {max_envs} spent",
        skipped=st.skipped,
        flaky=st.flaky,
        other=st.other,
    )


@dataclass(frozen=True)
class Link:
    """One change of verdict: `lo` the last candidate with the verdict before it, `hi` the first with the next one;
    `untested` the candidates between them the search has not run yet."""

    lo: int
    hi: int
    untested: tuple[int, ...] = ()


def links(st: _State) -> list[Link]:
    """The changes from the old endpoint's verdict to the new endpoint's, in order, as far as the candidates seen
    show them (the last one still open while candidates between its ends are untested). Two verdicts: one change;
    more (pass, then a compile error, then wrong numbers): each change, so that every verdict the range holds is
    named. With a new verdict asked for, a third one counts as unknown (`_State.verdict`): one change."""
    out: list[Link] = []
    pos, v, end = 0, st.verdict(0), st.verdict(st.k - 1)
    while v != end:
        hi = next(i for i in range(pos + 1, st.k) if st.verdict(i) not in (None, v))
        lo = max(i for i in range(pos, hi) if st.verdict(i) == v)
        untested = tuple(i for i in range(lo + 1, hi) if i not in st.seen)
        out.append(Link(lo, hi, untested))
        if untested:
            break
        pos, v = hi, st.verdict(hi)
    return out


def _found(st: _State, chain: list[Link]) -> Conclusion:
    """Every change pinned: found when each lies between neighbours (nothing skipped or flaky between its ends),
    else ambiguous (`between`: where the first unclear change may be). Candidates after the last change that show
    an earlier verdict again are named (`nonmonotone`)."""
    first = chain[0]
    unclear = next((c for c in chain if c.hi - c.lo > 1), None)
    earlier = {st.verdict(c.lo) for c in chain}
    back = tuple(i for i in range(chain[-1].hi + 1, st.k) if st.verdict(i) in earlier)
    return Conclusion(
        FOUND if unclear is None else AMBIGUOUS,
        st.verdict(first.lo),
        st.verdict(first.hi),
        first.lo,
        first.hi,
        () if unclear is None else tuple(range(unclear.lo + 1, unclear.hi + 1)),
        changes=tuple((c.lo, c.hi) for c in chain),
        skipped=st.skipped,
        flaky=st.flaky,
        nonmonotone=back,
        other=st.other,
    )


def halves(places: int) -> int:
    """Probes a bisection by halves needs to pin the change among `places` places: ceil(log2 places)."""
    return (places - 1).bit_length() if places > 1 else 0


def affordable(width: int, places: int, budget: int) -> int:
    """The most probes this round (<= width) that still leave the budget to finish by halves in the worst
    case; 1 (halves) when no parallel round fits."""
    for w in range(min(width, budget), 1, -1):
        if w + halves(-(-places // (w + 1))) <= budget:
            return w
    return 1


def spread(untested: Sequence[int], lo: int, hi: int, w: int) -> tuple[int, ...]:
    """w distinct untested candidates nearest the points that cut (lo, hi] into w + 1 equal parts."""
    picks: list[int] = []
    for j in range(1, w + 1):
        ideal = lo + (hi - lo) * j / (w + 1)
        free = [i for i in untested if i not in picks]
        picks.append(min(free, key=lambda i: (abs(i - ideal), i)))
    return tuple(sorted(picks))


def _every(st: _State, note: str = "") -> Conclusion:
    stable = [i for i in range(st.k) if st.verdict(i) is not None]
    changes = tuple((a, b) for a, b in zip(stable, stable[1:], strict=False) if st.verdict(a) != st.verdict(b))
    old = st.verdict(stable[0]) if stable else None
    new = st.verdict(stable[-1]) if stable else None
    first = changes[0] if changes else None
    return Conclusion(
        EVERY,
        old,
        new,
        first[0] if first else None,
        first[1] if first else None,
        newest=stable[-1] if stable else None,
        changes=changes,
        note=note,
        skipped=st.skipped,
        flaky=st.flaky,
    )
