"""What the two SQLite files (the result store, bringup/store.py, and the Hub index, bringup/hub/index.py)
share: one connection, closed by `close()` or a `with` block, and IMMEDIATE transactions. The ground
floor: it imports no other module of bringup."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

_T = TypeVar("_T", bound="SQLiteFile")


class SQLiteFile:
    """A subclass opens `self.conn` (autocommit: isolation_level=None) in its __init__."""

    conn: sqlite3.Connection

    def close(self) -> None:
        self.conn.close()

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: takes the write lock up front, so concurrent writers queue."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
