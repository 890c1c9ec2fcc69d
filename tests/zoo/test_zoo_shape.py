"""The zoo's shape (issue 28): the worker entries stored runs name still load, and a case's params read back as
the same ZooSpec. (No import circle, no module over 600 lines, in all of bringup: tests/spine/test_import_graph.py.)"""

from __future__ import annotations


def test_stored_entries_still_load() -> None:
    from bringup.runner.worker import load_entry
    from bringup.zoo.cases import ENTRY, FULL_ENTRY
    from bringup.zoo.run import run_model

    assert load_entry(ENTRY) is run_model
    assert load_entry("bringup.zoo.suite:run_model") is run_model  # runs stored before the split
    assert load_entry(FULL_ENTRY).__name__ == "run_full"


def test_case_params_read_back_as_a_spec() -> None:
    from bringup.zoo.cases import Entry, TinyRun, make_case
    from bringup.zoo.spec import ZooSpec

    c = make_case(
        Entry("hf", "llama", "causal-lm"),
        TinyRun("bf16", 4, "inductor", 60.0, seed=3, noise_seeds=2, module_check=False),
    )
    s = ZooSpec.from_params(c.params)
    assert (s.source, s.model, s.task, s.dtype, s.steps, s.backend, s.seed, s.noise_seeds, s.module_check) == (
        "hf",
        "llama",
        "causal-lm",
        "bf16",
        4,
        "inductor",
        3,
        2,
        False,
    )
    assert s.prec.name == "bf16" and s.size == "tiny" and s.baseline is None
    d = make_case(Entry("hf", "llama", "causal-lm"), TinyRun("fp32", 4, "none", 60.0)).params
    assert "noise_seeds" not in d and "module_check" not in d  # defaults stay out: case ids stay stable
    assert ZooSpec.from_params(d).module_check is None
