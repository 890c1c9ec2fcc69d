"""Output files: check an output path before any work, write atomically, strict JSON.

Below every command and suite (they all write files); imports nothing of bringup but errors.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.errors import BadInput

if TYPE_CHECKING:
    from bringup.options import GlobalOptions


def check_output_path(path: str | None, what: str) -> None:
    """Fail before any work when an output file can't be written (exit 2, nothing half-written)."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"{what} {path} is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise BadInput(f"{what} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise BadInput(f"{what} {path}: directory {parent} is not writable")
    try:  # the real test (root passes os.access everywhere; read-only mounts, /proc, quotas)
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise BadInput(f"{what} {path}: cannot write in {parent} ({e.strerror})") from None


def check_output_dir(path: str | None, what: str) -> str | None:
    """An output DIRECTORY: an existing writable one, or one that can be created under its nearest
    existing parent. Really tried (a probe directory made and removed: root passes os.access
    everywhere, and /proc or a read-only mount only fail on the write). Returns the absolute path;
    nothing is left behind."""
    if not path:
        return None
    p = Path(path).expanduser().absolute()
    if p.exists() and not p.is_dir():
        raise BadInput(f"{what} {path} exists and is not a directory")
    parent = p
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(f"{what} {path}: cannot create it ({parent} is not a directory)")
    try:
        os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".bringup-probe-"))
    except OSError as e:
        raise BadInput(f"{what} {path}: cannot write in {parent} ({e.strerror})") from None
    return str(p)


def check_outputs(opts: GlobalOptions) -> None:
    """The run's --json, --junit and --csv can be written (BadInput, exit 2, before any work)."""
    for opt, path in (("json", opts.json), ("junit", opts.junit), ("csv", opts.csv)):
        check_output_path(path, f"--{opt}")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write via a temp file in the same directory, fsync, rename: never a half-written file. The
    file keeps the mode it has (a new one gets what open() would give it)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _file_mode(p))  # mkstemp makes 0600; a report, summary or source file is not
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def _file_mode(p: Path) -> int:
    """The mode the file already has, else what open() would give a new file (0666 minus the umask)."""
    try:
        return stat.S_IMODE(p.stat().st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def json_safe(obj: Any) -> Any:
    """Strict JSON: NaN and +-inf (e.g. an error bound on a shape mismatch) become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def dumps(data: Any) -> str:
    return json.dumps(json_safe(data), indent=2, default=str, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    return atomic_write_text(path, dumps(data))
