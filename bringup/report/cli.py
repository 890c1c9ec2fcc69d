"""`bringup report [RUN] [--out report.html]`: the self-contained HTML scorecard of a run.

RUN is a run id in --db (default: the latest run) or an exported bundle file (`bringup export`). Reads
only the store or the bundle; never re-runs anything. Bad input (no such run, a corrupt database, a bad
bundle, an unwritable --out) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from typing import Any

from bringup.errors import BadInput


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run", nargs="?", default=None, metavar="RUN",
        help="run id in --db (default: the latest run), or a bundle file from `bringup export`",
    )  # fmt: skip
    p.add_argument(
        "--out", metavar="FILE", default=None,
        help="HTML path (default: <db dir>/<run id>/report.html; for a bundle: next to it, .html)",
    )  # fmt: skip


def looks_like_file(arg: str) -> bool:
    p = Path(arg)
    return p.is_file() or arg.endswith(".json") or "/" in arg


def main(sess: Any) -> int:
    from bringup.files import atomic_write_text, check_output_path
    from bringup.report import html
    from bringup.store import Store

    args = sess.args
    check_output_path(args.out, "--out")
    if args.run and looks_like_file(args.run):
        from bringup.bundle import load_bundle

        run, results = load_bundle(args.run)
        out = Path(args.out) if args.out else Path(args.run).with_suffix(".html")
        check_output_path(str(out), "report")
        path = atomic_write_text(out, html.render(run, results, {}, out.resolve().parent))
    else:
        try:
            with Store(sess.db, create=False) as st:
                run_id = args.run or st.latest_run_id()
                out = Path(args.out) if args.out else html.default_path(st, run_id)
                st.get_run(run_id)  # no such run -> BadInput before anything is written
                try:
                    path = html.write_report(st, run_id, out)
                except PermissionError as e:
                    raise BadInput(f"cannot write the report to {out}: {e.strerror}") from e
        except sqlite3.DatabaseError as e:
            raise BadInput(f"{sess.db} is not a usable bringup database ({e})") from e
        except OSError as e:
            raise BadInput(f"cannot write the report: {e}") from e
    sess.console.print(f"report: {path}", highlight=False)
    return 0
