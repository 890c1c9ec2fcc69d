"""The Hub index: what discovery and the config-only fetch found, in one SQLite file.

It is what makes a fetch of 100k configs resumable (every id's outcome is committed when it arrives: stop the
fetch, run it again, it continues with what is missing) and what an offline cluster plans from (export it on a
machine that can reach the Hub, import it there: `bringup hub export` / `bringup hub import`).

Tables:
- `listings(query, complete, n, created)` + `listing_ids(query, pos, model_id)`: the ids a `hub-search` query
  returned, in the Hub's order; a listing is reused only when it completed (`complete = 1`).
- `models(model_id, revision, ...)`: one row per id and requested revision ('' = the default branch): the
  Hub's metadata (downloads, likes, gated, private, pipeline tag, library, the listed commit `sha`), the fetch
  outcome (`status`: ok | pending | fetch_error | a config-failure reason, see fetch.py) with its
  `reason`, the commit the config came from and the config.json itself (`config`, JSON) when ok.

The export is JSON lines, gzip-compressed: a header line {"format": "bringup-hub-index", "version": 1,
"listings": {...}}, then one line per model row. Import merges: a row that is `ok` is never replaced by one
that is not; otherwise the newer fetch wins.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from bringup.errors import BadInput
from bringup.files import atomic_write_bytes
from bringup.sqlite_util import SQLiteFile

FORMAT = "bringup-hub-index"
VERSION = 1
SCHEMA = """
CREATE TABLE listings (query TEXT PRIMARY KEY, complete INTEGER NOT NULL, n INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE listing_ids (query TEXT NOT NULL, pos INTEGER NOT NULL, model_id TEXT NOT NULL, PRIMARY KEY (query, pos));
CREATE TABLE models (
    model_id TEXT NOT NULL, revision TEXT NOT NULL, sha TEXT, status TEXT NOT NULL DEFAULT 'pending',
    reason TEXT NOT NULL DEFAULT '', downloads INTEGER, likes INTEGER, gated TEXT, private INTEGER,
    pipeline_tag TEXT, library TEXT, config TEXT, fetched_at REAL, tries INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (model_id, revision)
);
"""
OK = "ok"
PENDING = "pending"
META = ("sha", "downloads", "likes", "gated", "private", "pipeline_tag", "library")


@dataclass
class Entry:
    model_id: str
    revision: str = ""  # '' = the default branch
    sha: str | None = None
    status: str = PENDING
    reason: str = ""
    downloads: int | None = None
    likes: int | None = None
    gated: str | None = None  # None / "False" / "auto" / "manual"
    private: bool | None = None
    pipeline_tag: str | None = None
    library: str | None = None
    config: dict[str, Any] | None = field(default=None, repr=False)
    fetched_at: float | None = None
    tries: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_id, self.revision)

    @property
    def name(self) -> str:
        return self.model_id if not self.revision else f"{self.model_id}@{self.revision}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Entry:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


_COLS = [f.name for f in fields(Entry)]


def _row_to_entry(row: tuple[Any, ...]) -> Entry:
    d = dict(zip(_COLS, row, strict=True))
    d["config"] = json.loads(d["config"]) if d["config"] else None
    d["private"] = None if d["private"] is None else bool(d["private"])
    return Entry(**d)


def _entry_row(e: Entry) -> tuple[Any, ...]:
    d = asdict(e)
    d["config"] = None if e.config is None else json.dumps(e.config, sort_keys=True)
    d["private"] = None if e.private is None else int(e.private)
    d["gated"] = None if e.gated is None else str(e.gated)
    return tuple(d[c] for c in _COLS)


class HubIndex(SQLiteFile):
    """One connection, used from one thread (the fetch's commits happen in the thread that waits on it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            self.conn.execute("PRAGMA busy_timeout = 60000")
            v = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
            tables = int(self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
        except (OSError, sqlite3.Error) as e:
            raise BadInput(f"--hub-index {self.path}: cannot open: {e}") from e
        if v == 0 and tables:
            self.conn.close()
            raise BadInput(f"--hub-index {self.path}: an SQLite file but not a bringup Hub index")
        if v > VERSION:
            self.conn.close()
            raise BadInput(f"--hub-index {self.path}: format v{v}, newer than this bringup reads (v{VERSION})")
        if v == 0:
            with self.tx() as c:
                for stmt in SCHEMA.split(";"):
                    if stmt.strip():
                        c.execute(stmt)
                c.execute(f"PRAGMA user_version = {VERSION}")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")

    # ---- listings -------------------------------------------------------------------------------
    def save_listing(self, query: str, ids: list[str], complete: bool) -> None:
        with self.tx() as c:
            c.execute("DELETE FROM listing_ids WHERE query = ?", (query,))
            c.execute(
                "INSERT OR REPLACE INTO listings (query, complete, n, created) VALUES (?,?,?,?)",
                (query, int(complete), len(ids), time.time()),
            )
            c.executemany(
                "INSERT INTO listing_ids (query, pos, model_id) VALUES (?,?,?)",
                [(query, i, m) for i, m in enumerate(ids)],
            )

    def listing(self, query: str) -> list[str] | None:
        row = self.conn.execute("SELECT complete FROM listings WHERE query = ?", (query,)).fetchone()
        if row is None or not row[0]:
            return None
        rows = self.conn.execute("SELECT model_id FROM listing_ids WHERE query = ? ORDER BY pos", (query,))
        return [r[0] for r in rows]

    def listings(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for (q,) in self.conn.execute("SELECT query FROM listings WHERE complete = 1"):
            out[q] = self.listing(q) or []
        return out

    # ---- models ---------------------------------------------------------------------------------
    def merge_meta(self, entries: Iterable[Entry]) -> None:
        """The Hub's metadata of listed ids; their fetch outcome (status, config) stays as it is."""
        sets = ", ".join(f"{k} = coalesce(excluded.{k}, models.{k})" for k in META)
        with self.tx() as c:
            c.executemany(
                f"INSERT INTO models ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))}) "
                f"ON CONFLICT (model_id, revision) DO UPDATE SET {sets}",
                [_entry_row(e) for e in entries],
            )

    def record(self, entries: Iterable[Entry]) -> None:
        """Fetch outcomes: the whole row (metadata given as None keeps what was there)."""
        keep = ", ".join(f"{k} = coalesce(excluded.{k}, models.{k})" for k in META if k != "sha")
        sets = ", ".join(f"{k} = excluded.{k}" for k in ("sha", "status", "reason", "config", "fetched_at", "tries"))
        with self.tx() as c:
            c.executemany(
                f"INSERT INTO models ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))}) "
                f"ON CONFLICT (model_id, revision) DO UPDATE SET {sets}, {keep}",
                [_entry_row(e) for e in entries],
            )

    def get(self, model_id: str, revision: str = "") -> Entry | None:
        row = self.conn.execute(
            f"SELECT {', '.join(_COLS)} FROM models WHERE model_id = ? AND revision = ?", (model_id, revision)
        ).fetchone()
        return None if row is None else _row_to_entry(row)

    def all(self) -> dict[tuple[str, str], Entry]:
        rows = self.conn.execute(f"SELECT {', '.join(_COLS)} FROM models")
        return {(r[0], r[1]): _row_to_entry(r) for r in rows}

    def counts(self) -> dict[str, int]:
        return {s: n for s, n in self.conn.execute("SELECT status, count(*) FROM models GROUP BY status")}

    # ---- export / import ------------------------------------------------------------------------
    def export(self, path: str | Path, keys: Iterable[tuple[str, str]] | None = None) -> int:
        """Write the index (or the rows of `keys`) as one JSON-lines.gz file; returns the rows written."""
        rows = self.all()
        want = list(rows) if keys is None else [k for k in keys if k in rows]
        head = {"format": FORMAT, "version": VERSION, "exported_at": time.time(), "listings": self.listings()}
        lines = [json.dumps(head)] + [json.dumps(rows[k].to_json(), sort_keys=True) for k in want]
        atomic_write_bytes(Path(path), gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=6))
        return len(want)

    def import_(self, path: str | Path) -> int:
        """Merge an exported file; returns the rows taken. A bad file is BadInput (nothing written)."""
        p = Path(path)
        try:
            text = gzip.decompress(p.read_bytes()).decode()
            lines = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        except (OSError, EOFError, ValueError, UnicodeDecodeError) as e:
            raise BadInput(f"hub import {path}: not a readable export ({type(e).__name__}: {e})") from e
        if not lines or not isinstance(lines[0], dict) or lines[0].get("format") != FORMAT:
            raise BadInput(f"hub import {path}: not a bringup Hub index export")
        if int(lines[0].get("version", 0)) > VERSION:
            raise BadInput(f"hub import {path}: format v{lines[0].get('version')}, newer than this bringup reads")
        try:
            incoming = [Entry.from_json(d) for d in lines[1:]]
        except TypeError as e:
            raise BadInput(f"hub import {path}: a malformed row ({e})") from e
        have = self.all()
        take = []
        for row in incoming:
            old = have.get(row.key)
            if old is not None and old.status == OK and row.status != OK:
                continue
            if old is not None and old.status == row.status == OK and (old.fetched_at or 0) >= (row.fetched_at or 0):
                continue
            take.append(row)
        self.record(take)
        for q, ids in (lines[0].get("listings") or {}).items():
            if isinstance(ids, list):
                self.save_listing(q, [str(i) for i in ids], complete=True)
        return len(take)
