"""`bringup report`'s options: the run's scorecard and, with --history, the trend page's sources and filters.

Its own module so that the report's two faces (cli.py: the scorecard, history_cli.py: --history) read one
options class without importing each other; torch-free (`bringup report --help`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import CommandOptions, measured, not_measured


@dataclass(frozen=True)
class ReportOptions(CommandOptions):
    """`bringup report`'s options (add_arguments' dests; the global --db is Options.common.db)."""

    run: tuple[str, ...] = measured(())
    out: str | None = not_measured(None)
    stores: tuple[str, ...] = measured(())
    history: bool = measured(False)
    filter_device: tuple[str, ...] = measured(())
    filter_suite: str | None = measured(None)
    filter_torch: tuple[str, ...] = measured(())
    since: str | None = measured(None)
    until: str | None = measured(None)


OPTIONS = ReportOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run",
        nargs="*",
        default=[],
        metavar="RUN",
        help="run id in --db (default: the latest run), or a bundle file from `bringup export`; with --history:"
        " stores (.db) and bundles to draw together (default: --db)",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        default=None,
        help="HTML path (default: <db dir>/<run id>/report.html; for a bundle: next to it, .html;"
        " --history: <db dir>/history.html, or ./history.html for several sources)",
    )
    p.add_argument(
        "--db",
        dest="stores",
        action="append",
        default=[],
        metavar="FILE",
        help="the store to read (as the global --db); repeatable with --history",
    )
    h = p.add_argument_group("trend across stored runs (--history)")
    h.add_argument(
        "--history",
        action="store_true",
        help="pass rate per suite, tokens/s, MFU and first step across runs, with the moves beyond "
        "their noise (docs/report.md)",
    )
    h.add_argument(
        "--device",
        dest="filter_device",
        action="append",
        default=[],
        metavar="DEV",
        help="only runs on DEV (cuda matches cuda:0 and cuda:1); repeatable",
    )
    h.add_argument("--suite", dest="filter_suite", default=None, metavar="A,B", help="only these suites")
    h.add_argument(
        "--torch",
        dest="filter_torch",
        action="append",
        default=[],
        metavar="VERSION",
        help="only runs on this torch (2.13 matches 2.13.0+cpu); repeatable",
    )
    h.add_argument("--since", default=None, metavar="DATE", help="only runs started on or after DATE (YYYY-MM-DD)")
    h.add_argument("--until", default=None, metavar="DATE", help="only runs started on or before DATE (YYYY-MM-DD)")
