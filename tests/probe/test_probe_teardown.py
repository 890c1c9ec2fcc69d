"""A distributed probe's rank that dies after its result is saved (gloo's teardown aborts the process now and then
on a loaded machine: `terminate called without an active exception`) keeps its result, and the teardown is said;
one that dies before it has a result is the case's error, as before."""

from __future__ import annotations

import pytest
import torch.multiprocessing as mp

from bringup.device import Device
from bringup.probe.runtime import _launch, first_failure

PLUGIN = ("tests.probe.teardown_kind",)


def test_a_rank_that_dies_after_its_result_keeps_it_and_says_so() -> None:
    ranks, teardown = _launch("abort_at_exit", Device("cpu"), PLUGIN)
    assert [float(r["x"]) for r in ranks] == [0.0, 1.0]
    assert "rank 1 died in the process group's teardown" in teardown
    assert "SIGABRT" in teardown


def test_a_rank_that_dies_before_its_result_is_an_error() -> None:
    with pytest.raises(mp.ProcessExitedException):
        _launch("abort_at_once", Device("cpu"), PLUGIN)


def test_a_rank_that_fails_alone_is_the_error_named_not_the_one_that_waited_for_it() -> None:
    """Rank 1 raises; rank 0 finished its part and meets the failure at the barrier (it does not hang there): the
    case names rank 1's own error."""
    ranks, teardown = _launch("fail_on_one", Device("cpu"), PLUGIN)
    assert teardown == ""
    assert "rank 1's own failure" in ranks[1]["error"] and not ranks[1]["at_barrier"]
    assert ranks[0]["at_barrier"] is True
    assert first_failure(ranks) == (1, ranks[1])
    assert first_failure([{"x": 1}, {"x": 2}]) is None
