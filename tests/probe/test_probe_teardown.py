"""A distributed probe's rank that dies after its result is saved (gloo's teardown aborts the process now and then
on a loaded machine: `terminate called without an active exception`) keeps its result, and the teardown is said;
one that dies before it has a result is the case's error, as before."""

from __future__ import annotations

import pytest
import torch.multiprocessing as mp

from bringup.device import Device
from bringup.probe.runtime import _launch

PLUGIN = ("tests.probe.teardown_kind",)


def test_a_rank_that_dies_after_its_result_keeps_it_and_says_so() -> None:
    ranks = _launch("abort_at_exit", Device("cpu"), PLUGIN)
    assert [float(r["x"]) for r in ranks] == [0.0, 1.0]
    assert "rank 1 died in the process group's teardown" in ranks[0]["teardown"]
    assert "SIGABRT" in ranks[0]["teardown"]


def test_a_rank_that_dies_before_its_result_is_an_error() -> None:
    with pytest.raises(mp.ProcessExitedException):
        _launch("abort_at_once", Device("cpu"), PLUGIN)
