"""Shared fixtures for the testdev tests. Importing bringup.testdev registers PrivateUse1 in that
process (and makes it the accelerator), so in-process checks run in a subprocess; the build happens
once (cached under ~/.cache/bringup/testdev) before any test needs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.conftest import REPO


def run_py(code: str, env: dict[str, str] | None = None, timeout: float = 900) -> Any:
    """Run `code` in a fresh interpreter; it must print one JSON line last. Returns that value."""
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=full_env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )
    assert p.returncode == 0, f"rc {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(("{", "["))]
    assert lines, p.stdout[-3000:]
    return json.loads(lines[-1])


@pytest.fixture(scope="session")
def testdev_built() -> None:
    """Build (or load from the cache) the C++ extension once per session; a compile takes 1-3 min."""
    out = run_py("""
        import json, torch, bringup.testdev
        print(json.dumps({"name": torch._C._get_privateuse1_backend_name()}))
    """)
    assert out["name"] == "testdev"
