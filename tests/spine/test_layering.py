"""The one-way import rules: import-linter's contracts (.importlinter) and no private names across packages."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def _package(module: str) -> str:
    """bringup.report.html -> bringup.report; bringup.flow -> bringup.flow (a top-level module is its own)."""
    return ".".join(module.split(".")[:2])


def private_imports_across_packages(root: Path) -> list[str]:
    found = []
    for f in sorted((root / "bringup").rglob("*.py")):
        rel = f.relative_to(root).with_suffix("")
        mod = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bringup"):
                if _package(node.module) == _package(mod):
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{rel}.py: from {node.module} import {alias.name}")
    return found


def test_no_private_names_across_packages() -> None:
    assert private_imports_across_packages(REPO) == []


def test_the_checker_sees_a_private_import(tmp_path: Path) -> None:
    pkg = tmp_path / "bringup"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "m.py").write_text("from bringup.b.n import _helper\nfrom bringup.a.o import _ok\n")
    assert private_imports_across_packages(tmp_path) == ["bringup/a/m.py: from bringup.b.n import _helper"]


def test_import_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a test dependency (pyproject [test] extra)"
    p = subprocess.run(
        [exe, "--config", str(REPO / ".importlinter")], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a test dependency (pyproject [test] extra)"
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [exe, str(REPO / ".importlinter"), "--no-cache"]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300, env=env)


def test_the_one_contract_covers_every_capability(tmp_path: Path) -> None:
    """Shown failing on a copy of bringup: a capability importing the face, the report importing a capability,
    and a new capability in no layer (exhaustive) each break the contract, none of them named in a list."""
    shutil.copytree(REPO / "bringup", tmp_path / "bringup", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    assert _lint(tmp_path).returncode == 0
    for module, line in [("zoo/plan.py", "import bringup.cli"), ("report/html.py", "import bringup.ops")]:
        path = tmp_path / "bringup" / module
        kept = path.read_text()
        path.write_text(kept + f"\n{line}\n")
        p = _lint(tmp_path)
        assert p.returncode != 0 and "BROKEN" in p.stdout.upper(), (module, line, p.stdout[-2000:])
        path.write_text(kept)
    (tmp_path / "bringup" / "newcap").mkdir()
    (tmp_path / "bringup" / "newcap" / "__init__.py").write_text("")
    p = _lint(tmp_path)
    assert p.returncode != 0 and "bringup.newcap" in p.stdout, p.stdout[-2000:]
