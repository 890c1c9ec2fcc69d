"""The zoo's shape (issue 28): no import circle inside bringup/zoo or bringup/models, no module there over 600
lines, the worker entries stored runs name still load, and a case's params read back as the same ZooSpec."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("bringup.zoo", "bringup.models")


def circles(graph: object, package: str) -> list[tuple[str, str]]:
    """(a, b) for each module a of `package` that imports b of the package while b (through any chain) imports a."""
    out = []
    mods = sorted(m for m in graph.modules if m.startswith(package + "."))  # type: ignore[attr-defined]
    for a in mods:
        for b in graph.find_modules_directly_imported_by(a):  # type: ignore[attr-defined]
            if b.startswith(package + ".") and b != a and graph.find_shortest_chain(importer=b, imported=a):  # type: ignore[attr-defined]
                out.append((a, b))
    return out


def test_no_import_circle_in_zoo_or_models() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("bringup")
    for package in PACKAGES:
        assert circles(graph, package) == [], package


def test_the_circle_check_sees_a_circle() -> None:
    """The check above can fail: a two-module circle is reported."""

    class Graph:
        modules = {"p.a", "p.b", "p.c"}

        def find_modules_directly_imported_by(self, m: str) -> set[str]:
            return {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}[m]

        def find_shortest_chain(self, importer: str, imported: str) -> tuple[str, ...] | None:
            edges = {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}
            seen, todo = set(), [importer]
            while todo:
                m = todo.pop()
                if m == imported:
                    return (importer, imported)
                if m not in seen:
                    seen.add(m)
                    todo.extend(edges.get(m, ()))
            return None

    assert circles(Graph(), "p") == [("p.a", "p.b"), ("p.b", "p.a")]


@pytest.mark.parametrize("package", ["zoo", "models"])
def test_no_module_over_600_lines(package: str) -> None:
    long = {p.name: n for p in (REPO / "bringup" / package).glob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}  # fmt: skip
    assert long == {}


def test_stored_entries_still_load() -> None:
    from bringup.runner.worker import load_entry
    from bringup.zoo.cases import ENTRY, FULL_ENTRY
    from bringup.zoo.run import run_model

    assert load_entry(ENTRY) is run_model
    assert load_entry("bringup.zoo.suite:run_model") is run_model  # runs stored before the split
    assert load_entry(FULL_ENTRY).__name__ == "run_full"


def test_case_params_read_back_as_a_spec() -> None:
    from bringup.zoo.cases import Entry, make_case
    from bringup.zoo.spec import ZooSpec

    c = make_case(Entry("hf", "llama", "causal-lm"), "bf16", 4, "inductor", 60.0, seed=3, noise_seeds=2,
                  module_check=False)  # fmt: skip
    s = ZooSpec.from_params(c.params)
    assert (s.source, s.model, s.task, s.dtype, s.steps, s.backend, s.seed, s.noise_seeds, s.module_check) == (
        "hf", "llama", "causal-lm", "bf16", 4, "inductor", 3, 2, False)
    assert s.prec.name == "bf16" and s.size == "tiny" and s.baseline is None
    d = make_case(Entry("hf", "llama", "causal-lm"), "fp32", 4, "none", 60.0).params
    assert "noise_seeds" not in d and "module_check" not in d  # defaults stay out: case ids stay stable
    assert ZooSpec.from_params(d).module_check is None
