"""What a command reads from its session: the typed seam between the face and the capabilities.

The session itself (bringup.flow.Session, a dataclass built once by the face) lives in a layer no capability may
import; a command's `main(sess)` (api.Tool) and the helpers it passes the session to take a `CommandSession`,
which that dataclass satisfies (mypy checks it where the face passes one in). Read-only: a command reads its
options, device and where results go; it never sets them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: importing this module costs nothing (the torch-free face imports it)
    from rich.console import Console

    from bringup.device import Device
    from bringup.options import Options
    from bringup.store import RunInfo, Store


class CommandSession(Protocol):
    """A command's session (bringup.flow.Session satisfies it)."""

    @property
    def options(self) -> Options:
        """The command's options, typed and frozen (`options.of(MyOptions)`, `options.common`)."""
        ...

    @property
    def device(self) -> Device: ...

    @property
    def imports(self) -> Sequence[str]:
        """The plugin modules imported with --import (a worker imports them too)."""
        ...

    @property
    def db(self) -> Path:
        """The SQLite store's file."""
        ...

    @property
    def argv(self) -> Sequence[str]: ...

    @property
    def console(self) -> Console: ...

    @property
    def resume_run(self) -> RunInfo | None:
        """The run being resumed (--resume), None for a new run."""
        ...

    @property
    def store(self) -> Store | None:
        """The open store, once the run's row exists (set by the face while it runs cases)."""
        ...

    @property
    def run_id(self) -> str | None: ...

    def open_store(self) -> Store: ...
