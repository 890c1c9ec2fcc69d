"""No import circle in bringup/device/, counting every import: at module level, inside functions and under
`if TYPE_CHECKING:` (test_import_graph.py's grimp graph leaves the last out, and a circle of types still
ties the modules together). A Device and its adapter share one small interface (bringup/device/iface.py):
no adapter imports the Device's module, the Device finds its adapter through iface's registry (docs/devices.md).

The graph is read from the source with `ast`: every Import / ImportFrom node anywhere in a module.
`from pkg import name` is an edge to pkg.name when that is a module of the package, else to pkg.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO
from tests.spine.test_import_graph import circles, one_cycle


class SourceGraph:
    """The part of grimp's ImportGraph that `circles` and `one_cycle` read, built with ast."""

    def __init__(self, root: Path, package: str) -> None:
        self.files = {self._name(p, root, package): p for p in sorted(root.rglob("*.py"))}
        self.lines: dict[tuple[str, str], list[int]] = {}
        for mod, path in self.files.items():
            is_pkg = path.name == "__init__.py"
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                for target in self._targets(node, mod, is_pkg):
                    if target in self.files and target != mod:
                        self.lines.setdefault((mod, target), []).append(node.lineno)

    @staticmethod
    def _name(path: Path, root: Path, package: str) -> str:
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join([package, *parts])

    def _targets(self, node: ast.AST, mod: str, is_pkg: bool) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if not isinstance(node, ast.ImportFrom):
            return []
        base = node.module or ""
        if node.level:  # relative: from the importing module's package
            here = mod.split(".") if is_pkg else mod.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join([*here, *([base] if base else [])])
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in self.files else base for a in node.names]

    @property
    def modules(self) -> set[str]:
        return set(self.files)

    def find_modules_directly_imported_by(self, module: str) -> set[str]:
        return {b for (a, b) in self.lines if a == module}

    def get_import_details(self, importer: str, imported: str) -> list[dict[str, int]]:
        return [{"line_number": n} for n in self.lines.get((importer, imported), [])]


def test_no_import_circle_in_device_counting_every_import() -> None:
    graph = SourceGraph(REPO / "bringup" / "device", "bringup.device")
    assert "bringup.device.core" in graph.modules and graph.lines, "the device package was not read"
    found = circles(graph)  # type: ignore[arg-type]
    assert not found, "import circles in bringup/device (function-level and TYPE_CHECKING imports count):\n" + (
        "\n".join(f"  {one_cycle(graph, c)}" for c in found)  # type: ignore[arg-type]
    )


def test_device_and_adapter_share_one_interface_not_each_other() -> None:
    graph = SourceGraph(REPO / "bringup" / "device", "bringup.device")
    iface = "bringup.device.iface"
    assert graph.find_modules_directly_imported_by(iface) <= {"bringup.device.names"}, "iface.py is the bottom"
    for adapter in (
        "bringup.device.adapter",
        "bringup.device.eager",
        "bringup.device.timing",
        "bringup.device.peaks",
        "bringup.device.select",
    ):
        assert "bringup.device.core" not in graph.find_modules_directly_imported_by(adapter), adapter
    assert iface in graph.find_modules_directly_imported_by("bringup.device.core")
    assert iface in graph.find_modules_directly_imported_by("bringup.device.adapter")


def test_the_source_graph_finds_a_circle_through_function_and_type_imports(tmp_path: Path) -> None:
    """Shown failing: a circle closed only by a function-level import and a TYPE_CHECKING one is found."""
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from circ.b import g\n    return g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circ import c\n")
    (pkg / "c.py").write_text("from . import a\n")
    (pkg / "d.py").write_text("import circ.a\n")
    g = SourceGraph(pkg, "circ")
    assert circles(g) == [["circ.a", "circ.b", "circ.c"]]  # type: ignore[arg-type]
    assert one_cycle(g, ["circ.a", "circ.b", "circ.c"]) == "circ.a:2 -> circ.b:3 -> circ.c:1 -> circ.a"  # type: ignore[arg-type]
