"""`bringup report [RUN] [--out report.html]`: the self-contained HTML scorecard of a run.
`bringup report --history [SOURCE ...] [--db FILE ...] [filters]`: the trend page across stored runs.

RUN is a run id in --db (default: the latest run) or an exported bundle file (`bringup export`). With
--history, the SOURCEs are stores and bundles (several machines on one page; default: --db). Reads only
the stores and bundles; never re-runs anything. Bad input (no such run or store, a corrupt database, a
bad bundle, a bad date, no run matching the filters, an unwritable --out) is one line on stderr and
exit code 2.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bringup.bundle import load_bundle
from bringup.errors import BadInput
from bringup.files import atomic_write_text, check_output_path
from bringup.report.history_cli import main as history_main
from bringup.report.options import ReportOptions, add_arguments
from bringup.session import CommandSession
from bringup.store import Store

__all__ = ["HISTORY_ONLY", "OPTIONS", "add_arguments", "looks_like_file", "main", "scorecard"]
OPTIONS = ReportOptions
HISTORY_ONLY = ("filter_device", "filter_suite", "filter_torch", "since", "until")


def looks_like_file(arg: str) -> bool:
    p = Path(arg)
    return p.is_file() or arg.endswith(".json") or "/" in arg


def main(sess: CommandSession) -> int:
    args = sess.options.of(ReportOptions)
    if args.history:
        return history_main(args, sess.options.common.db, sess.db, sess.console)
    given = [f"--{k.removeprefix('filter_')}" for k in HISTORY_ONLY if getattr(args, k)]
    if given:
        raise BadInput(f"{', '.join(given)}: only with --history")
    if len(args.run) > 1:
        raise BadInput(f"one RUN at a time ({len(args.run)} given); several stores or bundles: --history")
    if len(args.stores) > 1:
        raise BadInput("one --db for a run's report; several: --history")
    return scorecard(sess, args.run[0] if args.run else None, Path(args.stores[0]) if args.stores else sess.db)


def scorecard(sess: CommandSession, run_arg: str | None, db: Path) -> int:
    from bringup.report import html  # lazy: fast --help

    args = sess.options.of(ReportOptions)
    check_output_path(args.out, "--out")
    if run_arg and looks_like_file(run_arg):
        run, results = load_bundle(run_arg)
        out = Path(args.out) if args.out else Path(run_arg).with_suffix(".html")
        check_output_path(str(out), "report")
        path = atomic_write_text(out, html.render(run, results, {}, out.resolve().parent))
    else:
        try:
            with Store(db, create=False) as st:
                run_id = run_arg or st.latest_run_id()
                out = Path(args.out) if args.out else html.default_path(st, run_id)
                st.get_run(run_id)  # no such run -> BadInput before anything is written
                try:
                    path = html.write_report(st, run_id, out)
                except PermissionError as e:
                    raise BadInput(f"cannot write the report to {out}: {e.strerror}") from e
        except sqlite3.DatabaseError as e:
            raise BadInput(f"{db} is not a usable bringup database ({e})") from e
        except OSError as e:
            raise BadInput(f"cannot write the report: {e}") from e
    sess.console.print(f"report: {path}", highlight=False)
    return 0
