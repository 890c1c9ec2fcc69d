"""A run's interruption: SIGTERM raised as `Terminated` in the main thread (Ctrl-C already raises
KeyboardInterrupt there), and the one line that says how to go on. Finished results are in the store by then
(each case is committed as it finishes)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Terminated(Exception):
    """SIGTERM, raised in the run's main thread."""


INTERRUPTS = (KeyboardInterrupt, Terminated)


def _raise(signum: int, frame: Any) -> None:
    raise Terminated()


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside: SIGTERM raises Terminated (in the main thread only: signals are delivered there)."""
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _raise) if main else None
    try:
        yield
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def interrupted(db: Any, run_id: str, what: str) -> int:
    """Print how to go on with the run and give its exit code (130, as a shell gives for Ctrl-C)."""
    print(
        f"bringup: interrupted; finished {what} are saved. Continue with: bringup --db {db} --resume {run_id}",
        file=sys.stderr,
    )
    return 130
