"""The search alone (bringup/bisect/plan.py, pure): the env bound, skips, flakes, endpoints, --all, --max-envs."""

from __future__ import annotations

import math

import pytest

from bringup.bisect import plan
from bringup.bisect.plan import FLAKY, SKIP, Seen


def drive(k: int, verdict_of, width: int = 1, every: bool = False, max_envs: int | None = None):
    """Run the search to its end; verdict_of(i) answers for candidate i. Returns (conclusion, order run)."""
    seen: dict[int, Seen] = {}
    order: list[int] = []
    for _ in range(10 * k):
        st = plan.step(k, seen, width, every, max_envs)
        if st.done is not None:
            return st.done, order
        assert st.run and not set(st.run) & set(seen), (st.run, seen)
        for i in st.run:
            seen[i] = Seen(i, verdict_of(i))
            order.append(i)
    raise AssertionError("the search did not end")


@pytest.mark.parametrize("k", range(2, 41))
def test_stable_verdicts_take_at_most_ceil_log2_k_plus_2_envs(k: int) -> None:
    bound = math.ceil(math.log2(k)) + 2
    assert plan.max_envs_bound(k) == bound
    for change in range(1, k):
        con, order = drive(k, lambda i, c=change: "pass" if i < c else "fail_numeric")
        assert con.kind == plan.FOUND and con.first_new == change and con.last_old == change - 1
        assert len(order) <= bound, (k, change, order)
        assert order[:2] == [0, k - 1]  # the endpoints first


def test_a_skipped_candidate_is_stepped_over() -> None:
    # 8 candidates, the change at 3, candidate 1 does not install: still found, 1 named as skipped
    con, order = drive(8, lambda i: SKIP if i == 1 else ("pass" if i < 3 else "fail_numeric"))
    assert (con.kind, con.first_new, con.last_old, con.skipped) == (plan.FOUND, 3, 2, (1,))
    assert 1 in order


def test_skips_next_to_the_change_leave_it_ambiguous() -> None:
    con, _ = drive(6, lambda i: SKIP if i == 2 else ("pass" if i < 3 else "fail_numeric"))
    assert con.kind == plan.AMBIGUOUS and con.between == (2, 3) and con.first_new == 3


def test_a_flaky_candidate_is_never_picked() -> None:
    con, _ = drive(6, lambda i: FLAKY if i == 2 else ("pass" if i < 3 else "fail_numeric"))
    assert con.kind == plan.AMBIGUOUS and con.flaky == (2,) and con.between == (2, 3)


def test_endpoints_must_be_verdicts_that_differ() -> None:
    assert drive(5, lambda i: "fail_compile")[0].kind == plan.NO_CHANGE
    con, order = drive(5, lambda i: SKIP if i == 4 else "pass")
    assert con.kind == plan.ENDPOINT and "new endpoint skip" in con.note and order == [0, 4]
    assert drive(5, lambda i: FLAKY if i == 0 else "pass")[0].kind == plan.ENDPOINT


def test_a_third_verdict_counts_as_a_change() -> None:
    con, _ = drive(7, lambda i: "pass" if i < 2 else ("crash" if i < 4 else "fail_numeric"))
    assert (con.kind, con.first_new, con.new) == (plan.FOUND, 2, "crash")


def test_every_names_each_change() -> None:
    con, order = drive(6, lambda i: "fail_compile" if i < 4 else "pass", every=True)
    assert con.kind == plan.EVERY and con.changes == ((3, 4),) and sorted(order) == list(range(6))
    con, _ = drive(5, lambda i: "pass" if i in (0, 4) else "fail_numeric", every=True)
    assert con.changes == ((0, 1), (3, 4))


def test_slots_run_points_in_parallel_and_the_env_budget_falls_back_to_halves() -> None:
    con, order = drive(17, lambda i: "pass" if i < 11 else "fail_numeric", width=3)
    assert con.first_new == 11
    assert plan.step(17, {0: Seen(0, "pass"), 16: Seen(16, "fail_numeric")}, width=3).run == (4, 8, 12)
    # 4 environments left for 16 places: 3 (or 2) at once would not leave enough to finish: halves
    seen = {0: Seen(0, "pass"), 16: Seen(16, "fail_numeric")}
    assert len(plan.step(17, seen, width=3, max_envs=6).run) == 1
    assert plan.affordable(3, 16, 4) == 1 and plan.affordable(3, 16, 5) == 3
    con, order = drive(17, lambda i: "pass" if i < 5 else "fail_numeric", width=4, max_envs=7)
    assert con.kind == plan.FOUND and len(order) <= 7


def test_max_envs_spent_says_where_the_change_lies() -> None:
    con, order = drive(20, lambda i: "pass" if i < 13 else "fail_numeric", max_envs=3)
    assert con.kind == plan.BUDGET and len(order) == 3 and 13 in con.between


def test_a_new_verdict_asked_for_steps_over_a_third_one() -> None:
    # pass, pass, error (does not compile), fail_numeric...: the first change is the error; asked for
    # fail_numeric, the error is stepped over and named, and the answer is where fail_numeric starts
    verdicts = ["pass", "pass", "error", "error", "fail_numeric", "fail_numeric", "fail_numeric"]
    assert drive(7, verdicts.__getitem__)[0].first_new == 2
    step = lambda k, seen, w, e, m: plan.step(k, seen, w, e, m, new_verdict="fail_numeric")
    seen: dict[int, Seen] = {}
    while (st := step(7, seen, 1, False, None)).done is None:
        seen.update({i: Seen(i, verdicts[i]) for i in st.run})
    con = st.done
    assert (con.kind, con.first_new, con.last_old, con.new) == (plan.AMBIGUOUS, 4, 1, "fail_numeric")
    assert con.between == (2, 3, 4) and set(con.other) <= {2, 3} and con.other
    verdicts[2] = verdicts[3] = "pass"
    seen = {}
    while (st := step(7, seen, 1, False, None)).done is None:
        seen.update({i: Seen(i, verdicts[i]) for i in st.run})
    assert (st.done.kind, st.done.first_new) == (plan.FOUND, 4)
    # the new endpoint has a third verdict: not the change asked for
    con, _ = drive(3, ["pass", "pass", "crash"].__getitem__, max_envs=None)
    assert con.kind == plan.FOUND
    assert (
        plan.step(3, {0: Seen(0, "pass"), 2: Seen(2, "crash")}, new_verdict="fail_numeric").done.kind == plan.ENDPOINT
    )
