"""`make test` runs mypy with pyproject.toml's [tool.mypy]: this shows that step can fail. On a tiny tree of its
own (not bringup: a cold check of bringup takes a minute), with the project's configuration: a type error fails it,
an unannotated function fails it anywhere, a core-layer module (bringup.store here) is held to all of strict's flags
while a capability's module is not, and a `type: ignore` without its error code is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[2]


def _mypy(tree: Path) -> subprocess.CompletedProcess[str]:
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*.py"))
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental", *files]
    return subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=300)


def _write(tree: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)


def test_mypy_fails_on_type_errors_and_holds_the_core_to_strict(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "bringup/__init__.py": "",
            "bringup/zoo/__init__.py": "",
            # a capability: a bare generic is allowed, an unannotated function is not
            "bringup/zoo/loose.py": "def size(x: list) -> int:\n    return len(x)\n",
            "bringup/zoo/bare.py": "def helper(x):\n    return x\n",
            # a core layer: all of strict's flags
            "bringup/store.py": "def size(x: list) -> int:\n    return len(x)\n",
            "bringup/case.py": 'def count() -> int:\n    return "three"\n\n\nn = len(1)  # type: ignore\n',
        },
    )
    out = _mypy(tmp_path)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert 'bringup/case.py:2: error: Incompatible return value type (got "str", expected "int")' in text
    assert "bringup/zoo/bare.py:1: error: Function is missing a type annotation  [no-untyped-def]" in text
    assert 'bringup/store.py:1: error: Missing type arguments for generic type "list"  [type-arg]' in text
    assert 'bringup/case.py:5: error: "type: ignore" comment without error code' in text
    assert "bringup/zoo/loose.py" not in text


def test_mypy_passes_a_clean_tree(tmp_path: Path) -> None:
    _write(tmp_path, {"bringup/__init__.py": "", "bringup/store.py": "def helper(x: int) -> int:\n    return x\n"})
    out = _mypy(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
