"""`report --history` keys its lines by what a run asked for (issue 45, item 6): zoo runs with different
`--dtype` and `--compile-backend` are separate pass-rate lines, named by their options, and a move between runs
that asked for different things is explained by the options that changed, never as "nothing recorded changed"."""

from __future__ import annotations

from bringup.case import CaseResult, Status
from bringup.report.history import StoredRun, changes, pass_rate_lines
from tests.conftest import fake_run


def _run(n: int, opts: dict, passed: int, torch: str = "2.13.0") -> StoredRun:
    info = {"options": {"db": f"/x/{n}.db", "workers": 1, **opts}, "build": {"torch_git": "abc"}, "versions": {}}
    run = fake_run(
        run_id=f"R{n}",
        command="zoo",
        argv=["zoo"],
        torch_version=torch,
        device_name="cpu",
        started_at=float(n),
        ended_at=n + 1.0,
        info=info,
    )
    rs = tuple(
        CaseResult(
            case_id=f"c{i}", suite="zoo", name=f"m{i}", status=Status.PASS if i < passed else Status.FAIL_NUMERIC
        )
        for i in range(4)
    )
    return StoredRun(n, "a.db", run, rs)


def test_lines_are_keyed_by_what_the_run_asked_for() -> None:
    runs = [
        _run(1, {"dtype": "fp32"}, 4),
        _run(2, {"dtype": "fp32"}, 4),
        _run(3, {"dtype": "bf16"}, 2),
        _run(4, {"dtype": "bf16", "compile_backend": "eager"}, 3),
    ]
    lines = pass_rate_lines(runs)
    assert sorted(ln.label for ln in lines) == [
        "cpu · h · zoo dtype=bf16",
        "cpu · h · zoo dtype=bf16 compile_backend=eager",
        "cpu · h · zoo dtype=fp32",
    ]
    assert [len(ln.points) for ln in sorted(lines, key=lambda ln: ln.label)] == [1, 1, 2]
    said = changes(runs[1], runs[3])
    assert said[:2] == ["--dtype fp32 → bf16", "--compile-backend not given → eager"], said
    assert changes(runs[0], runs[1]) == []  # same ask, same versions: nothing changed (db and workers do not count)
    assert pass_rate_lines(runs[:2])[0].label == "cpu · h"  # one ask: the line is named by its machine, as before
