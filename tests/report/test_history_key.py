"""`report --history` keys a line by everything that changes a measurement (issue 50, item 5): the run's record of
its measured options, defaults in effect included (info["measured"], built from the options' own marks:
bringup/options.py), so zoo runs fed text and uniform rows, or judged with different --noise-seeds, are separate
pass-rate lines named by what differs, while runs that differ only in --workers (or --db, --json) share one.
Runs stored before the record: keyed from their stored options where those hold every field of a newer run's
record, else by ASKED, as before. tests/spine/test_measured_options.py holds every option to its mark."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bringup.case import CaseResult, Metric, Status
from bringup.cli import parse_options
from bringup.report.history import (
    Filters,
    StoredRun,
    changes,
    derive_records,
    metric_lines,
    pass_rate_lines,
    read_sources,
)
from tests.conftest import fake_run


def _flow_info(argv: list[str]) -> dict[str, Any]:
    """The info a run of `argv` stores about its options, as bringup/flow.py writes it."""
    from bringup.flow import _options, measured

    opts = parse_options(argv)
    return {"options": _options(opts), "measured": measured(opts)}


def _run(n: int, info: dict[str, Any], passed: int, command: str = "zoo", tok_s: float | None = None) -> StoredRun:
    run = fake_run(run_id=f"R{n}", command=command, started_at=float(n), ended_at=n + 1.0, info=info)
    rs = tuple(
        CaseResult(
            case_id=f"c{i}",
            suite="zoo",
            name=f"m{i}",
            status=Status.PASS if i < passed else Status.FAIL_NUMERIC,
            metrics={"tokens_per_s": Metric(tok_s, "tok/s")} if tok_s is not None else {},
        )
        for i in range(4)
    )
    return StoredRun(n, "a.db", run, rs)


def _labels(runs: list[StoredRun]) -> dict[str, int]:
    return {ln.label: len(ln.points) for ln in pass_rate_lines(runs)}


def test_text_and_uniform_runs_are_two_lines_and_workers_one() -> None:
    runs = [
        _run(1, _flow_info(["zoo"]), 4),
        _run(2, _flow_info(["--workers", "2", "--db", "/elsewhere/b.db", "zoo", "--json", "x.json"]), 4),
        _run(3, _flow_info(["zoo", "--inputs", "uniform"]), 2),
        _run(4, _flow_info(["zoo", "--inputs", "uniform", "--workers", "3"]), 2),
    ]
    # the default in effect ('text') is recorded: the plain runs are not merged with the uniform ones
    assert _labels(runs) == {"cpu · h · zoo inputs=text": 2, "cpu · h · zoo inputs=uniform": 2}
    assert changes(runs[0], runs[2])[:1] == ["--inputs text → uniform"]
    assert changes(runs[0], runs[1]) == []  # workers, db, json: nothing measured changed
    assert _labels(runs[:2]) == {"cpu · h": 2}  # one ask: named by its machine alone, as before


@pytest.mark.parametrize(
    "other",
    [
        ["--noise-seeds", "0"],
        ["--module-check", "off"],
        ["--reference", "cpu", "--size", "full"],  # --reference applies at --size full only (checked when built)
        ["--baseline", "base.json"],
        ["--seed", "3"],
        ["--compile-backend", "aot_eager"],
        ["--import", "my_backend"],
    ],
)
def test_each_measured_zoo_option_splits_the_line(other: list[str]) -> None:
    argv = ["zoo", *other] if other[0] != "--import" else [*other, "zoo"]
    runs = [_run(1, _flow_info(["zoo"]), 4), _run(2, _flow_info(argv), 3)]
    labels = _labels(runs)
    assert len(labels) == 2, labels
    flag = other[0].lstrip("-").replace("-", "_").replace("import", "imports")
    assert any(f" {flag}=" in label for label in labels), labels  # named by the option that differs


def test_other_commands_options_split_their_lines() -> None:
    """ops' samples, flex's backward, probe's compile backends, train's dynamic / seqs / override, run's --full."""
    for base, other in [
        (["ops"], ["ops", "--samples", "5"]),
        (["flex"], ["flex", "--backward", "off"]),
        (["probe"], ["probe", "--compile-backends", "inductor,aot_eager"]),
        (["train"], ["train", "--dynamic", "on"]),
        (["train"], ["train", "--seqs", "64,96"]),
        (["train"], ["train", "--override", "num_hidden_layers=2"]),
        (["run", "--quick"], ["run", "--full"]),
    ]:
        runs = [_run(1, _flow_info(base), 4, base[0]), _run(2, _flow_info(other), 4, base[0])]
        assert len(pass_rate_lines(runs)) == 2, other
        same = [_run(1, _flow_info(base), 4, base[0]), _run(2, _flow_info(["--workers", "2", *base]), 4, base[0])]
        assert len(pass_rate_lines(same)) == 1, base


def test_metric_lines_are_keyed_by_the_ask_too() -> None:
    runs = [
        _run(1, _flow_info(["zoo"]), 4, tok_s=100.0),
        _run(2, _flow_info(["zoo", "--workers", "2"]), 4, tok_s=101.0),
        _run(3, _flow_info(["zoo", "--inputs", "uniform"]), 4, tok_s=140.0),
    ]
    lines = [ln for ln in metric_lines(runs) if ln.label.startswith("m0")]
    assert sorted((ln.label, len(ln.points)) for ln in lines) == [
        ("m0 · zoo inputs=text", 2),
        ("m0 · zoo inputs=uniform", 1),
    ]
    assert all("[" not in ln.label for ln in lines)  # one case on two lines is not two cases sharing a name


def test_runs_stored_before_the_record() -> None:
    """Options that hold every field of a newer run's record: keyed by them, on the same line as that run where
    nothing measured differs. Options from before --inputs existed (a zoo run then fed uniform rows): kept apart,
    keyed as before (ASKED: the options given)."""
    new = _flow_info(["zoo"])
    old_complete = {"options": new["options"]}  # a run of last week: every option stored, no record
    old_inputs = {"options": {**new["options"], "inputs": "uniform"}}
    before_inputs = {"options": {k: v for k, v in new["options"].items() if k != "inputs"}}
    runs = derive_records(
        [_run(1, old_complete, 4), _run(2, old_inputs, 3), _run(3, before_inputs, 2), _run(4, new, 4)]
    )
    assert runs[0].key == runs[3].key and runs[1].key != runs[3].key
    asked = dict(runs[2].asked)
    assert runs[2].derived is None and asked == {"command": "zoo", "dtype": "fp32", "source": "hf-causal", **{
        "size": "tiny", "nproc": "1"}}  # fmt: skip
    assert sorted(_labels(runs).values()) == [1, 1, 2]
    # with no record anywhere, every run is keyed as before
    assert all(sr.derived is None for sr in derive_records([_run(1, old_complete, 4), _run(2, old_inputs, 4)]))


def test_real_runs_record_their_measured_options(bringup_inproc: Any, tmp_path: Path) -> None:
    """Through the real command line and store: two selftest runs that differ only in --workers are one line; a
    third with another --phase-budget (measured: the plan's 'phase' item is judged by it) is its own."""
    db = tmp_path / "h.db"
    for extra in ([], ["--workers", "2"], ["--phase-budget", "2"]):
        p = bringup_inproc("--db", str(db), "--device", "cpu", "selftest", "--plan", "ok", "--tag", "hist", *extra)
        assert p.returncode == 0, p.stderr[-2000:]
    with sqlite3.connect(db) as c:
        infos = [json.loads(i) for (i,) in c.execute("SELECT info FROM runs ORDER BY started_at")]
    assert infos[0]["measured"]["phase_budget"] == 1.0 and "workers" not in infos[0]["measured"]
    h = read_sources([db], Filters())
    pass_lines = sorted((ln.label, len(ln.points)) for ln in h.lines if ln.chart == "pass_rate")
    assert pass_lines == [("cpu · " + h.runs[0].run.host + " · selftest phase_budget=1.0", 2),
                          ("cpu · " + h.runs[0].run.host + " · selftest phase_budget=2.0", 1)]  # fmt: skip
