"""What a train arm waits for when `run --quick` runs cases side by side (bringup/train/suite.py `linked`):
a compiled arm its eager case (the loss reference), a warm arm its cold case (the cache), even when the arms
were planned in separate calls (xla's warm arm). Without the link, xla's warm arm ran beside its cold case:
it found no eager reference, ran an eager of its own and read a cache still being written."""

from __future__ import annotations

from bringup.train.spec import CACHE_COLD, CACHE_WARM, TrainSpec
from bringup.train.suite import linked, plan


def test_a_warm_arm_planned_apart_waits_for_its_cold_and_eager_cases() -> None:
    base = TrainSpec(steps=6, warmup=2, batch=2, seq=128, backend="openxla")
    cases = linked(
        plan(base, ("eager", "compile", "regional"), (CACHE_COLD,)) + plan(base, ("compile",), (CACHE_WARM,))
    )
    by = {c.name: c for c in cases}
    eager, cold, regional, warm = by["eager"], by["compile-cold"], by["regional-cold"], by["compile-warm"]
    assert eager.after == ()
    assert cold.after == (eager.case_id,) and regional.after == (eager.case_id,)
    assert set(warm.after) == {eager.case_id, cold.case_id}  # not regional-cold: another mode's graphs


def test_unlinked_planning_would_leave_the_warm_arm_free() -> None:
    base = TrainSpec(steps=6, warmup=2, batch=2, seq=128, backend="openxla")
    (warm,) = plan(base, ("compile",), (CACHE_WARM,))
    assert warm.after == ()  # alone in its call: what `linked` over the whole list repairs
