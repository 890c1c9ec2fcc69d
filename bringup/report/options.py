"""`bringup report`'s options: the run's scorecard and, with --history, the trend page's sources and filters.

Its own module so that the report's two faces (cli.py: the scorecard, history_cli.py: --history) read one
options class without importing each other; torch-free (`bringup report --help`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import CommandOptions, add_options, flag, measured, not_measured

HISTORY = "trend across stored runs (--history)"  # the --help group


@dataclass(frozen=True)
class ReportOptions(CommandOptions):
    """`bringup report`'s options: each field its flag (the parser is built from them; the global --db is
    Options.common.db)."""

    run: tuple[str, ...] = measured(
        (),
        flag=flag(
            "run",
            nargs="*",
            metavar="RUN",
            help="run id in --db (default: the latest run), or a bundle file from `bringup export`; with --history:"
            " stores (.db) and bundles to draw together (default: --db)",
        ),
    )
    out: str | None = not_measured(
        None,
        flag=flag(
            "--out",
            metavar="FILE",
            help="HTML path (default: <db dir>/<run id>/report.html; for a bundle: next to it, .html;"
            " --history: <db dir>/history.html, or ./history.html for several sources)",
        ),
    )
    stores: tuple[str, ...] = measured(
        (),
        flag=flag(
            "--db",
            action="append",
            metavar="FILE",
            help="the store to read (as the global --db); repeatable with --history",
        ),
    )
    history: bool = measured(
        False,
        flag=flag(
            "--history",
            group=HISTORY,
            action="store_true",
            help="pass rate per suite, tokens/s, MFU and first step across runs, with the moves beyond "
            "their noise (docs/report.md)",
        ),
    )
    filter_device: tuple[str, ...] = measured(
        (),
        flag=flag(
            "--device",
            group=HISTORY,
            action="append",
            metavar="DEV",
            help="only runs on DEV (cuda matches cuda:0 and cuda:1); repeatable",
        ),
    )
    filter_suite: str | None = measured(
        None, flag=flag("--suite", group=HISTORY, metavar="A,B", help="only these suites")
    )
    filter_torch: tuple[str, ...] = measured(
        (),
        flag=flag(
            "--torch",
            group=HISTORY,
            action="append",
            metavar="VERSION",
            help="only runs on this torch (2.13 matches 2.13.0+cpu); repeatable",
        ),
    )
    since: str | None = measured(
        None,
        flag=flag("--since", group=HISTORY, metavar="DATE", help="only runs started on or after DATE (YYYY-MM-DD)"),
    )
    until: str | None = measured(
        None,
        flag=flag("--until", group=HISTORY, metavar="DATE", help="only runs started on or before DATE (YYYY-MM-DD)"),
    )


OPTIONS = ReportOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, ReportOptions)
