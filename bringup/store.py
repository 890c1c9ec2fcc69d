"""SQLite result store: WAL, busy timeout, a versioned schema with migrations, one transaction per case.

The store is the single source of truth: reports, exports and comparisons read only from it.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup import __version__
from bringup.case import Case, CaseResult, Metric, Status
from bringup.errors import BadInput
from bringup.metrics import stored_name
from bringup.sqlite_util import SQLiteFile

DEFAULT_DB = "bringup-results/bringup.db"

# Each entry migrates the schema from version i to i+1 (PRAGMA user_version). Never edit a shipped
# entry: append a new one. A fresh database runs them all in order.
MIGRATIONS: tuple[str, ...] = (
    # v1: runs, cases, metrics, series
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, command TEXT NOT NULL, argv TEXT NOT NULL,
        bringup_version TEXT, torch_version TEXT, device TEXT, device_name TEXT, host TEXT,
        started_at REAL NOT NULL, ended_at REAL, status TEXT NOT NULL DEFAULT 'running'
    );
    CREATE TABLE cases (
        run_id TEXT NOT NULL REFERENCES runs(run_id), case_id TEXT NOT NULL, suite TEXT NOT NULL,
        name TEXT NOT NULL, params TEXT NOT NULL, status TEXT NOT NULL, reason TEXT, error TEXT,
        wall_s REAL, finished_at REAL NOT NULL, PRIMARY KEY (run_id, case_id)
    );
    CREATE TABLE metrics (
        run_id TEXT NOT NULL, case_id TEXT NOT NULL, name TEXT NOT NULL, value REAL, unit TEXT,
        PRIMARY KEY (run_id, case_id, name)
    );
    CREATE TABLE series (
        run_id TEXT NOT NULL, case_id TEXT NOT NULL, name TEXT NOT NULL, step INTEGER NOT NULL,
        value REAL, PRIMARY KEY (run_id, case_id, name, step)
    );
    """,
    # v2: suite-specific fields per case, artifacts, the planned case list (resume without argv),
    # and free-form run info (imports, options, library versions).
    """
    ALTER TABLE cases ADD COLUMN fields TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN info TEXT NOT NULL DEFAULT '{}';
    CREATE TABLE artifacts (
        run_id TEXT NOT NULL, case_id TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL,
        PRIMARY KEY (run_id, case_id, name)
    );
    CREATE TABLE planned (
        run_id TEXT NOT NULL, case_id TEXT NOT NULL, seq INTEGER NOT NULL, spec TEXT NOT NULL,
        PRIMARY KEY (run_id, case_id)
    );
    CREATE INDEX cases_by_suite ON cases(run_id, suite);
    """,
    # v3: Hub sweeps (zoo --source hub-search / hub-list): every id of the run, the signature of what it
    # computes and the case that runs that signature (NULL when the id's config failed: config_status says
    # why), so a case's verdict fans out to its ids by a join; full_case_id: its --full-top case, if any.
    """
    CREATE TABLE hub_ids (
        run_id TEXT NOT NULL REFERENCES runs(run_id), model_id TEXT NOT NULL, revision TEXT NOT NULL DEFAULT '',
        sha TEXT, signature TEXT, case_id TEXT, full_case_id TEXT, architecture TEXT, model_type TEXT, task TEXT,
        downloads INTEGER, likes INTEGER, config_status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (run_id, model_id, revision)
    );
    CREATE INDEX hub_ids_by_case ON hub_ids(run_id, case_id);
    """,
)
HUB_ID_COLUMNS = (
    "model_id",
    "revision",
    "sha",
    "signature",
    "case_id",
    "full_case_id",
    "architecture",
    "model_type",
    "task",
    "downloads",
    "likes",
    "config_status",
    "reason",
)
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass
class RunInfo:
    run_id: str
    command: str
    argv: list[str]
    bringup_version: str
    torch_version: str
    device: str
    device_name: str
    host: str
    started_at: float
    ended_at: float | None
    status: str
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class Store(SQLiteFile):
    """One connection, used from one thread (the driver's). Safe with other processes on the same file."""

    def __init__(self, path: str | os.PathLike[str], create: bool = True) -> None:
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise BadInput(f"no result database at {self.path}")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise BadInput(f"cannot create database directory {self.path.parent}: {e.strerror}") from e
        elif not self.path.is_file():
            raise BadInput(f"database path {self.path} is not a file")
        try:
            self.conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except sqlite3.Error as e:
            raise BadInput(f"cannot open database {self.path}: {e}") from e
        try:
            self.conn.execute("PRAGMA busy_timeout = 60000")
            self._check_ours()  # before WAL: never touch a file that isn't ours (WAL is persistent)
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as e:
            self.conn.close()
            raise BadInput(f"{self.path} is not a usable bringup database ({e})") from e
        except BaseException:
            self.conn.close()
            raise

    # ---- schema --------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def _check_ours(self) -> int:
        """Read-only: the schema version, or BadInput for a foreign or too-new database."""
        # one statement, one snapshot: read apart, another process's migration could commit in between (version
        # 0 read, then its tables), and a fresh database being created by two processes looked foreign
        v, tables = self.conn.execute(
            "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)"
        ).fetchone()
        v = int(v)
        if v > SCHEMA_VERSION:
            raise BadInput(
                f"{self.path} has schema v{v}, newer than this bringup understands (v{SCHEMA_VERSION});"
                " upgrade bringup or use another --db"
            )
        if v == 0 and tables:
            raise BadInput(f"{self.path} is an SQLite file but not a bringup database")
        return v

    def _migrate(self) -> None:
        with self.tx():
            v = self._check_ours()  # again, under the write lock: another process may have migrated
            for i in range(v, SCHEMA_VERSION):
                for stmt in MIGRATIONS[i].split(";"):
                    if stmt.strip():
                        self.conn.execute(stmt)
                self.conn.execute(f"PRAGMA user_version = {i + 1}")

    # ---- runs ----------------------------------------------------------------------------------
    def new_run(
        self,
        command: str,
        argv: Sequence[str],
        device: str,
        device_name: str,
        info: dict[str, Any],
        run_id: str | None = None,
    ) -> str:
        import torch  # lazy: torch-free --help

        run_id = run_id or new_run_id()
        with self.tx() as c:
            c.execute(
                "INSERT INTO runs (run_id, command, argv, bringup_version, torch_version, device,"
                " device_name, host, started_at, status, info) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    command,
                    json.dumps(argv),
                    __version__,
                    torch.__version__,
                    device,
                    device_name,
                    socket.gethostname(),
                    time.time(),
                    "running",
                    json.dumps(info, default=str),
                ),
            )
        return run_id

    def end_run(self, run_id: str, status: str) -> None:
        with self.tx() as c:
            c.execute("UPDATE runs SET ended_at = ?, status = ? WHERE run_id = ?", (time.time(), status, run_id))

    def reopen_run(self, run_id: str) -> None:
        with self.tx() as c:
            c.execute("UPDATE runs SET status = 'running', ended_at = NULL WHERE run_id = ?", (run_id,))

    def update_run_info(self, run_id: str, **extra: Any) -> None:
        run = self.get_run(run_id)
        info = {**run.info, **extra}
        with self.tx() as c:
            c.execute("UPDATE runs SET info = ? WHERE run_id = ?", (json.dumps(info, default=str), run_id))

    def get_run(self, run_id: str) -> RunInfo:
        row = self.conn.execute(
            "SELECT run_id, command, argv, bringup_version, torch_version, device, device_name, host,"
            " started_at, ended_at, status, info FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise BadInput(f"no run {run_id!r} in {self.path}")
        rid, command, argv, version, torch_version, device, device_name, host, started, ended, status, info = row
        return RunInfo(
            rid,
            command,
            json.loads(argv),
            version,
            torch_version,
            device,
            device_name,
            host,
            started,
            ended,
            status,
            json.loads(info or "{}"),
        )

    def runs(self) -> list[RunInfo]:
        ids = [r[0] for r in self.conn.execute("SELECT run_id FROM runs ORDER BY started_at")]
        return [self.get_run(i) for i in ids]

    def latest_run_id(self) -> str:
        row = self.conn.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        if row is None:
            raise BadInput(f"no runs in {self.path}")
        return str(row[0])

    # ---- cases ---------------------------------------------------------------------------------
    def plan(self, run_id: str, cases: Iterable[Case]) -> None:
        with self.tx() as c:
            base = c.execute("SELECT coalesce(max(seq), -1) + 1 FROM planned WHERE run_id = ?", (run_id,))
            start = int(base.fetchone()[0])
            c.executemany(
                "INSERT OR IGNORE INTO planned (run_id, case_id, seq, spec) VALUES (?,?,?,?)",
                [(run_id, k.case_id, start + i, json.dumps(k.to_json())) for i, k in enumerate(cases)],
            )

    def planned(self, run_id: str) -> list[Case]:
        rows = self.conn.execute("SELECT spec FROM planned WHERE run_id = ? ORDER BY seq", (run_id,))
        return [Case.from_json(json.loads(r[0])) for r in rows]

    def finished_ids(self, run_id: str) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT case_id FROM cases WHERE run_id = ?", (run_id,))}

    def pending(self, run_id: str) -> list[Case]:
        done = self.finished_ids(run_id)
        return [k for k in self.planned(run_id) if k.case_id not in done]

    def record(self, run_id: str, r: CaseResult) -> None:
        """Commit one finished case with its metrics, series and artifacts in ONE transaction."""
        with self.tx() as c:
            for table in ("metrics", "series", "artifacts"):
                c.execute(f"DELETE FROM {table} WHERE run_id = ? AND case_id = ?", (run_id, r.case_id))
            c.execute(
                "INSERT OR REPLACE INTO cases (run_id, case_id, suite, name, params, status, reason,"
                " error, wall_s, finished_at, fields) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    r.case_id,
                    r.suite,
                    r.name,
                    json.dumps(r.params, default=str),
                    r.status.value,
                    r.reason,
                    r.error,
                    r.wall_s,
                    time.time(),
                    json.dumps(r.fields, default=str),
                ),
            )
            c.executemany(
                "INSERT INTO metrics (run_id, case_id, name, value, unit) VALUES (?,?,?,?,?)",
                [(run_id, r.case_id, k, m.value, m.unit) for k, m in r.metrics.items()],
            )
            c.executemany(
                "INSERT OR REPLACE INTO series (run_id, case_id, name, step, value) VALUES (?,?,?,?,?)",
                [(run_id, r.case_id, k, s, v) for k, pts in r.series.items() for s, v in pts],
            )
            c.executemany(
                "INSERT INTO artifacts (run_id, case_id, name, path) VALUES (?,?,?,?)",
                [(run_id, r.case_id, k, p) for k, p in r.artifacts.items()],
            )

    # ---- Hub sweeps: ids -> signature -> case ---------------------------------------------------
    def record_hub_ids(self, run_id: str, rows: Iterable[dict[str, Any]]) -> None:
        """The ids of a Hub sweep (`HUB_ID_COLUMNS`), in one transaction; a re-planned run replaces its rows."""
        cols = ", ".join(HUB_ID_COLUMNS)
        with self.tx() as c:
            c.execute("DELETE FROM hub_ids WHERE run_id = ?", (run_id,))
            c.executemany(
                f"INSERT INTO hub_ids (run_id, {cols}) VALUES (?, {', '.join('?' * len(HUB_ID_COLUMNS))})",
                [(run_id, *(r.get(k) for k in HUB_ID_COLUMNS)) for r in rows],
            )

    def hub_ids(self, run_id: str) -> list[dict[str, Any]]:
        """The run's Hub ids with their case's status and reason (NULL while the case has not finished)."""
        q = (
            f"SELECT {', '.join('h.' + k for k in HUB_ID_COLUMNS)}, c.status, c.reason FROM hub_ids h"
            " LEFT JOIN cases c ON c.run_id = h.run_id AND c.case_id = h.case_id WHERE h.run_id = ?"
            " ORDER BY coalesce(h.downloads, -1) DESC, h.model_id"
        )
        return [
            dict(zip((*HUB_ID_COLUMNS, "case_status", "case_reason"), row, strict=True))
            for row in self.conn.execute(q, (run_id,))
        ]

    def results(self, run_id: str, suite: str | None = None) -> list[CaseResult]:
        """Finished cases of a run, in plan order (then finish order for unplanned ones)."""
        q = (
            "SELECT c.case_id, c.suite, c.name, c.params, c.status, c.reason, c.error, c.wall_s, c.fields"
            " FROM cases c LEFT JOIN planned p ON p.run_id = c.run_id AND p.case_id = c.case_id"
            " WHERE c.run_id = ?"
            + (" AND c.suite = ?" if suite else "")
            + " ORDER BY coalesce(p.seq, 1e18), c.finished_at"
        )
        args: tuple[Any, ...] = (run_id, suite) if suite else (run_id,)
        out: dict[str, CaseResult] = {}
        for cid, su, name, params, status, reason, error, wall, fields in self.conn.execute(q, args):
            out[cid] = CaseResult(
                case_id=cid,
                suite=su,
                name=name,
                status=Status(status),
                reason=reason or "",
                error=error or "",
                wall_s=float(wall or 0.0),
                params=json.loads(params),
                fields=json.loads(fields or "{}"),
            )
        if not out:
            return []
        for cid, name, value, unit in self.conn.execute(
            "SELECT case_id, name, value, unit FROM metrics WHERE run_id = ?", (run_id,)
        ):
            if cid in out:
                out[cid].metrics[stored_name(out[cid].suite, name)] = Metric(float(value), unit or "")
        for cid, name, step, value in self.conn.execute(
            "SELECT case_id, name, step, value FROM series WHERE run_id = ? ORDER BY step", (run_id,)
        ):
            if cid in out:
                out[cid].series.setdefault(name, []).append((int(step), float(value)))
        for cid, name, path in self.conn.execute(
            "SELECT case_id, name, path FROM artifacts WHERE run_id = ?", (run_id,)
        ):
            if cid in out:
                out[cid].artifacts[name] = path
        return list(out.values())
