"""The shape of the package, as tests: no import circle among bringup's modules, no module over 600 lines.

The import graph is grimp's (the library import-linter is built on): every `import` in bringup, function-level
ones and `if TYPE_CHECKING:` ones included (a circle through a lazy import or a type-level one is still a
circle: the two modules cannot be understood, tested, type-checked or moved apart). A circle is a strongly
connected set of modules; the failure message names one cycle through it, edge by edge with the line numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import grimp

from tests.conftest import REPO

MAX_LINES = 600

# Modules allowed over MAX_LINES because they are data (tables of rules, shapes, ...), not logic:
# module path -> the reason. Keep it short: a long module of logic is split instead.
DATA_TABLES: dict[str, str] = {}


def import_graph() -> grimp.ImportGraph:
    # cache_dir=None: grimp's on-disk cache (.grimp_cache) can outlive a checkout's edits (a merge kept its
    # mtimes) and report imports the code no longer has.
    return grimp.build_graph(
        "bringup", include_external_packages=False, exclude_type_checking_imports=False, cache_dir=None
    )


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan, iterative), each sorted."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def one_cycle(graph: grimp.ImportGraph, members: Iterable[str]) -> str:
    """A shortest cycle through the first module of a circle, as `a:LINE -> b:LINE -> ... -> a`."""
    inside = set(members)
    start = min(inside)
    prev: dict[str, str] = {}
    frontier = [start]
    seen = {start}
    end = None
    while frontier and end is None:
        nxt = []
        for v in frontier:
            for w in sorted(graph.find_modules_directly_imported_by(v) & inside):
                if w == start:
                    end = v
                    break
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
            if end is not None:
                break
        frontier = nxt
    path = [start] if end is None else [end]
    while path[-1] != start:
        path.append(prev[path[-1]])
    path.reverse()
    path.append(start)
    hops = []
    for a, b in zip(path, path[1:], strict=False):
        lines = sorted(d["line_number"] for d in graph.get_import_details(importer=a, imported=b))
        hops.append(f"{a}:{','.join(map(str, lines))}")
    return " -> ".join([*hops, start])


def test_no_import_circles() -> None:
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(f"  {one_cycle(graph, c)}" for c in found)


def test_the_circle_finder_finds_a_circle(tmp_path: Path) -> None:
    """Shown failing: two modules that import each other (one at function level, or one under TYPE_CHECKING)
    are a circle, named."""
    import sys

    pkg = tmp_path / "circ_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import circ_pkg.b\n")
    (pkg / "b.py").write_text("def f():\n    from circ_pkg import a\n    return a\n")
    (pkg / "c.py").write_text("import circ_pkg.a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import circ_pkg.e\n")
    (pkg / "e.py").write_text("import circ_pkg.d\n")
    sys.path.insert(0, str(tmp_path))
    try:
        g = grimp.build_graph("circ_pkg", include_external_packages=False, cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert circles(g) == [["circ_pkg.a", "circ_pkg.b"], ["circ_pkg.d", "circ_pkg.e"]]
    assert one_cycle(g, ["circ_pkg.a", "circ_pkg.b"]) == "circ_pkg.a:1 -> circ_pkg.b:2 -> circ_pkg.a"


def test_no_module_over_600_lines() -> None:
    allowed = DATA_TABLES
    long = {}
    for path in sorted((REPO / "bringup").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        n = len(path.read_text().splitlines())
        if n > MAX_LINES and rel not in allowed:
            long[rel] = n
    assert not long, f"modules over {MAX_LINES} lines (split them; data tables go in DATA_TABLES with a reason): {long}"
    for rel, why in allowed.items():
        assert why.strip(), rel
