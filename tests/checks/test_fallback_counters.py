"""The fallback detector against a backend's own counter (PyTorch/XLA's torch_xla.debug.metrics, the
test device's C++ counter): host reads come out of both, an op only the backend counted is a fallback.

The counter is a stand-in here (the real ones: tests/testdev, and the xla CI job, `make test-xla`)."""

from __future__ import annotations

import torch

from bringup.checks import fallbacks as fb
from bringup.device import Device


def _window(monkeypatch, before: dict[str, int], after: dict[str, int]) -> fb.FallbackReport:
    counts = iter([before, after])
    monkeypatch.setattr(fb, "_backend_counts", lambda device: next(counts))
    with fb.FallbackDetector(Device("cpu")) as det:
        (torch.ones(3) * 2).sum()
    return det.report()


def test_an_op_only_the_backend_counted_is_a_fallback(monkeypatch) -> None:
    rep = _window(monkeypatch, {"aten::pow": 4}, {"aten::pow": 4, "aten::nonzero": 2})
    assert rep.backend_fallbacks == {"aten::nonzero": 2}  # the window's own count: 4 were from before
    assert rep.backend_only == ["aten::nonzero"] and rep.fallback_ops == {"aten::nonzero": 2}
    assert rep.source.endswith("+backend")


def test_host_reads_come_out_of_the_backend_count(monkeypatch) -> None:
    counts = iter([{}, {"aten::_local_scalar_dense": 3}])
    monkeypatch.setattr(fb, "_backend_counts", lambda device: next(counts))
    det = fb.FallbackDetector(Device("cpu"))
    det.__enter__()
    det.__exit__(None, None, None)
    rep = det.report()
    rep.host_reads = {"aten::_local_scalar_dense": 3}  # what the dispatch mode saw off cpu (xla: 3 .item())
    rep.backend_fallbacks, rep.backend_only, rep.fallback_ops = None, [], {}
    det._backend0 = {}
    det._cross_check(rep, {"aten::_local_scalar_dense": 3})
    assert rep.backend_fallbacks == {} and rep.fallback_ops == {} and not rep.backend_only


def test_a_backend_without_a_counter_leaves_the_detector_alone(monkeypatch) -> None:
    rep = _window(monkeypatch, None, None)  # type: ignore[arg-type]
    assert rep.backend_fallbacks is None and rep.fallback_ops == {} and "+backend" not in rep.source
