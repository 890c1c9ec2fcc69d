"""`bringup report --history`: read the sources, apply the filters, write the page (bringup/report/history.py
reads, bringup/report/history_page.py renders). Bad input is one line and exit code 2."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from bringup.errors import BadInput
from bringup.files import atomic_write_text, check_output_path
from bringup.report.history import Filters, parse_date, read_sources
from bringup.report.options import ReportOptions

if TYPE_CHECKING:
    from rich.console import Console


def filters(args: ReportOptions) -> Filters:
    since = parse_date(args.since, "--since") if args.since else None
    until = parse_date(args.until, "--until", end_of_day=True) if args.until else None
    if since is not None and until is not None and until < since:
        raise BadInput(f"--until {args.until} is before --since {args.since}")
    suites = tuple(s.strip() for s in (args.filter_suite or "").split(",") if s.strip())
    torch = tuple(v.strip() for arg in args.filter_torch for v in arg.split(",") if v.strip())
    devices = tuple(v.strip() for arg in args.filter_device for v in arg.split(",") if v.strip())
    return Filters(devices, suites, torch, since, until)


def sources(args: ReportOptions, global_db: str | None, default_db: Path) -> list[Path]:
    """The positional SOURCEs, then each `report --db`, then the global --db when given (default: it)."""
    given = [Path(s) for s in [*args.run, *args.stores]]
    if global_db:
        given.append(Path(global_db))
    out: list[Path] = []
    for p in given or [default_db]:
        if p.resolve() not in {q.resolve() for q in out}:
            out.append(p)
    return out


def default_out(srcs: list[Path]) -> Path:
    return srcs[0].parent / "history.html" if len(srcs) == 1 and srcs[0].suffix != ".json" else Path("history.html")


def main(args: ReportOptions, global_db: str | None, default_db: Path, console: Console) -> int:
    from bringup.report import history_page  # lazy: fast --help

    check_output_path(args.out, "--out")
    f = filters(args)
    srcs = sources(args, global_db, default_db)
    try:
        h = read_sources(srcs, f)
    except sqlite3.DatabaseError as e:
        raise BadInput(f"{', '.join(map(str, srcs))}: not a usable bringup database ({e})") from e
    if not h.runs:
        why = f" (filters: {f.describe()})" if f != Filters() else ""
        raise BadInput(f"no finished run in {', '.join(map(str, srcs))} matches{why}: {h.seen} run(s) read")
    out = Path(args.out) if args.out else default_out(srcs)
    check_output_path(str(out), "--out")
    try:
        path = atomic_write_text(out, history_page.render(h, out.resolve().parent))
    except OSError as e:
        raise BadInput(f"cannot write the history page to {out}: {e.strerror or e}") from e
    from bringup.report.bug_history import summary, tracks  # lazy: fast --help

    moved = sum(m.kind == "moved" for ln in h.lines for m in ln.moves)
    console.print(
        f"history: {len(h.runs)} run(s), {len({r.machine for r in h.runs})} machine(s), "
        f"{moved} move(s) beyond the noise; {summary(tracks(h.runs))}: {path}",
        highlight=False,
    )
    return 0
