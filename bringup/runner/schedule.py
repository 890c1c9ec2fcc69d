"""Which case a free worker takes next, when N workers share a run.

One worker runs the cases in plan order. N workers run what is independent side by side, and the order then
decides the wall time: a long case started last runs alone at the end while the other workers idle. So a free
worker takes, among the cases that are ready, the one of the highest rank: its expected work (`Case.cost`, a
suite's estimate) plus the longest chain of cases that wait on it; ties and unknown costs keep plan order.
That is Graham's longest-processing-time-first rule (with no case waiting on another, its finish is within
4/3 of the best possible, whatever the costs). A case is ready when every case it names in `Case.after` has
finished, with whatever status (a compiled train case reads its eager case's loss reference, a warm one its
cold case's cache; each still works without them, at a cost). A name that is not among the cases to run
(finished in a resumed run, or not planned) holds nothing back.

`Queue` is the state; the local executor's slots (threads) and the Ray loop each take from it. It changes
nothing a case computes: which worker runs a case, and when, never enter its result.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from bringup.case import Case


def ranks(cases: Sequence[Case]) -> dict[str, float]:
    """Per case_id: its cost plus the longest chain of cases that wait on it (what must still run, one after
    another, once it starts): a short case that a long one waits for ranks above both."""
    waiting: dict[str, list[Case]] = {}
    for c in cases:
        for a in c.after:
            waiting.setdefault(a, []).append(c)
    out: dict[str, float] = {}

    def rank(c: Case, seen: frozenset[str]) -> float:
        if c.case_id in out:
            return out[c.case_id]
        later = [rank(d, seen | {c.case_id}) for d in waiting.get(c.case_id, []) if d.case_id not in seen]
        out[c.case_id] = c.cost + max(later, default=0.0)
        return out[c.case_id]

    for c in cases:
        rank(c, frozenset())
    return out


def priority(cases: Sequence[Case]) -> list[Case]:
    """The cases in the order a free worker prefers them: higher rank first, plan order among equals."""
    r = ranks(cases)
    order = {id(c): i for i, c in enumerate(cases)}
    return sorted(cases, key=lambda c: (-r[c.case_id], order[id(c)]))


class Queue:
    """The cases of one executor run: take the next ready one, mark it finished. Thread-safe; `wait_take` blocks
    until a case is ready or none is left. `by_cost` False (one worker: the order cannot change the wall time):
    plan order, `after` still waited for."""

    def __init__(self, cases: Iterable[Case], by_cost: bool = True) -> None:
        todo = list(cases)
        self._ids = {c.case_id for c in todo}
        self._todo = priority(todo) if by_cost else todo
        self._done: set[str] = set()
        self._running: set[str] = set()
        self._cond = threading.Condition()

    def _ready(self, c: Case) -> bool:
        return all(a in self._done or a not in self._ids for a in c.after)

    def take(self) -> Case | None:
        """The next ready case (removed from the queue), or None when none is ready now."""
        with self._cond:
            for i, c in enumerate(self._todo):
                if self._ready(c):
                    del self._todo[i]
                    self._running.add(c.case_id)
                    return c
            return None

    def wait_take(self) -> Case | None:
        """The next ready case; waits while cases are left but none is ready (they wait on a running one).
        None: nothing is left to take (or what is left waits on nothing that runs: taken anyway, in order)."""
        with self._cond:
            while True:
                c = self.take()
                if c is not None or not self._todo:
                    return c
                if not self._running:  # a cycle, or a wait on a case that never runs: never stall a run
                    c = self._todo.pop(0)
                    self._running.add(c.case_id)
                    return c
                self._cond.wait()

    def finish(self, case_id: str) -> None:
        with self._cond:
            self._running.discard(case_id)
            self._done.add(case_id)
            self._cond.notify_all()

    def close(self) -> None:
        """Nothing more will be taken (the run stops): wake every waiter with nothing."""
        with self._cond:
            self._todo.clear()
            self._cond.notify_all()

    @property
    def left(self) -> int:
        with self._cond:
            return len(self._todo)
