"""What a run records about where it ran and with what, for the history page and for pages that travel.

`run_info()` goes into the store's `runs.info` (free-form JSON, no schema change) when a run starts:

    build     {"torch_git": torch.version.git_version (the commit torch was built from),
               "bringup_git": the commit of the bringup checkout it ran from ("+dirty" when tracked
               files differ from it), None for an installed wheel, "python": "3.11.9"}
    versions  {distribution: version} of the libraries the suites use (transformers, timm, torchao,
               triton, torch_xla, ...), those installed; shown in the report's header
    paths     {"cwd", "home", "tmp", "python", "bringup"}: this machine's roots, so a page can show paths under
               them relative or named (bringup/report/portable.py) while the store keeps them absolute

Runs recorded before this have none of it; the history page then names torch and bringup versions only.
Imports nothing of bringup; torch only inside `build()`.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

# Libraries whose version changes what a run measures (models, kernels, quantization, the XLA bridge).
LIBRARIES = ("transformers", "timm", "huggingface_hub", "torchao", "triton", "torch_xla", "numpy")
GIT_TIMEOUT_S = 5.0  # a git that hangs (a network filesystem) must not hold up a run


def run_paths() -> dict[str, Any]:
    """This machine's roots: the working directory, home, temp directory, the Python environment (a venv;
    None for a system Python, whose prefix is /usr) and the bringup checkout (an editable install; None
    when bringup is installed into site-packages)."""
    venv = sys.prefix != sys.base_prefix
    return {
        "cwd": os.getcwd(),
        "home": str(Path.home()),
        "tmp": tempfile.gettempdir(),
        "python": sys.prefix if venv else None,
        "bringup": source_checkout(),
    }


def source_checkout() -> str | None:
    root = Path(__file__).resolve().parent.parent
    return str(root) if (root / "pyproject.toml").is_file() else None


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_commit(path: Path) -> str | None:
    """The commit the git work tree holding `path` is at ("+dirty" when tracked files changed), or None
    (not a git checkout, no git, git failed)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = head.stdout.strip()
    return sha + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "") if sha else None


def bringup_commit() -> str | None:
    """The commit of the bringup source this process runs, when it runs from a git checkout (an editable
    install); None for an installed wheel (site-packages is not the checkout's work tree)."""
    root = source_checkout()
    return git_commit(Path(root)) if root is not None and (Path(root) / ".git").exists() else None


def build() -> dict[str, Any]:
    import torch

    return {
        "torch_git": getattr(torch.version, "git_version", None),
        "bringup_git": bringup_commit(),
        "python": platform.python_version(),
    }


def run_info() -> dict[str, Any]:
    return {"build": build(), "versions": library_versions(), "paths": run_paths()}
