"""The scheduler of side-by-side workers (bringup/runner/schedule.py): longest ready case first, `after` waited
for, plan order kept for one worker, and a run never stalls on a wait that cannot end."""

from __future__ import annotations

import threading

from bringup.case import Case
from bringup.runner.schedule import Queue, priority, ranks


def case(name: str, cost: float = 0.0, after: tuple[str, ...] = ()) -> Case:
    return Case("s", name, {"name": name}, "m:f", cost=cost, after=tuple(ID[a] for a in after))


def cid(name: str) -> str:
    return Case("s", name, {"name": name}, "m:f").case_id


class _Ids(dict):
    def __missing__(self, key: str) -> str:  # "s/x" -> the case id of x
        return cid(key.split("/", 1)[1])


ID = _Ids()


def test_longest_first_and_plan_order_among_equals() -> None:
    cs = [case("a", 1), case("b", 5), case("c", 1), case("d", 5)]
    assert [c.name for c in priority(cs)] == ["b", "d", "a", "c"]


def test_a_short_case_a_long_one_waits_for_ranks_above_both() -> None:
    cs = [case("long", 50), case("eager", 10), case("compiled", 45, after=("s/eager",))]
    r = ranks(cs)
    assert r[cid("eager")] == 55 and r[cid("compiled")] == 45
    assert [c.name for c in priority(cs)][0] == "eager"


def test_a_waiting_case_is_not_taken_until_its_dependency_finishes() -> None:
    q = Queue([case("cold", 50), case("warm", 60, after=("s/cold",))])
    first = q.take()
    assert first is not None and first.name == "cold"  # warm ranks higher but is not ready
    assert q.take() is None  # warm waits on a running case
    q.finish(cid("cold"))
    nxt = q.take()
    assert nxt is not None and nxt.name == "warm"
    assert q.wait_take() is None and q.left == 0


def test_one_worker_keeps_plan_order() -> None:
    q = Queue([case("a", 1), case("b", 9)], by_cost=False)
    got = [q.wait_take(), q.wait_take()]
    assert [c.name for c in got if c is not None] == ["a", "b"]


def test_a_wait_on_a_case_not_in_the_run_holds_nothing_back() -> None:
    q = Queue([case("warm", after=("s/cold-finished-last-run",))])
    c = q.take()
    assert c is not None and c.name == "warm"


def test_a_cycle_never_stalls_the_run() -> None:
    q = Queue([case("a", after=("s/b",)), case("b", after=("s/a",))])
    got = q.wait_take()
    assert got is not None  # nothing runs, so one is taken anyway
    q.finish(got.case_id)
    other = q.wait_take()
    assert other is not None and other.name != got.name


def test_wait_take_wakes_when_a_dependency_finishes_and_on_close() -> None:
    q = Queue([case("cold"), case("warm", after=("s/cold",))])
    cold = q.take()
    assert cold is not None
    got: list[Case | None] = []
    t = threading.Thread(target=lambda: got.append(q.wait_take()))
    t.start()
    q.finish(cold.case_id)
    t.join(timeout=10)
    assert got and got[0] is not None and got[0].name == "warm"
    q2 = Queue([case("x"), case("y", after=("s/x",))])
    assert q2.take() is not None
    waiter = threading.Thread(target=lambda: got.append(q2.wait_take()))
    waiter.start()
    q2.close()
    waiter.join(timeout=10)
    assert got[-1] is None and not waiter.is_alive()


def test_cost_and_after_survive_the_worker_json() -> None:
    c = case("w", 12.5, after=("s/c",))
    back = Case.from_json(c.to_json())
    assert back.cost == 12.5 and back.after == (cid("c"),) and back.case_id == c.case_id
