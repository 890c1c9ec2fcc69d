"""`bringup export [RUN] --out FILE [--format F]`: a run as a portable bundle (the format: bringup/bundle.py),
or as the files other tools read (bringup/report/exports/: PyTorch's benchmark records, a support table,
`set_test_configs` for PyTorch's device-generic tests; docs/ecosystem.md).

RUN is a run id in --db (default: the latest run) or a bundle file. Every file is rendered in memory first
and each is written atomically, after every output path was checked: bad input (no such run or store, a
bad bundle, a format with nothing to say about this run, an unwritable --out) is one line, exit code 2, and
nothing written.
"""

from __future__ import annotations

import argparse
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.bundle import FORMAT, VERSION, load_bundle, make_bundle
from bringup.errors import BadInput
from bringup.files import atomic_write_text, check_output_path, dumps
from bringup.options import CommandOptions, add_options, flag, measured, not_measured
from bringup.report.cli import looks_like_file
from bringup.report.exports.benchmark import records
from bringup.session import CommandSession
from bringup.store import Store

FORMATS = ("bundle", "benchmark-records", "support-table", "pytorch-tests")


# ---- `bringup export` ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ExportOptions(CommandOptions):
    """`bringup export`'s options: each field its flag (the parser is built from them)."""

    run: str | None = measured(
        None,
        flag=flag("run", nargs="?", help="run id (default: the latest run in --db), or a bundle file"),
    )
    out: str = not_measured(
        "",
        flag=flag(
            "--out",
            required=True,
            metavar="FILE",
            help="the file to write (support-table: FILE.md and FILE.csv; pytorch-tests: FILE.py and FILE.json)",
        ),
    )
    format: str = measured(
        "bundle",
        flag=flag(
            "--format",
            choices=FORMATS,
            help="bundle (default: the run, portable JSON), benchmark-records (PyTorch's benchmark "
            "database JSON), support-table (per op and dtype, Markdown + CSV), pytorch-tests "
            "(set_test_configs for PyTorch's device-generic tests)",
        ),
    )
    margin: float | None = measured(
        None,
        flag=flag(
            "--margin",
            type=float,
            metavar="X",
            help="pytorch-tests: tolerance = X times the largest error measured (default 2)",
        ),
    )


OPTIONS = ExportOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, ExportOptions)


def _load(sess: CommandSession, run_arg: str | None) -> tuple[Any, list[Any], dict[str, Any], Path | None]:
    """(run, results, the bundle's data, the run's folder or None for a bundle file)."""
    if run_arg and looks_like_file(run_arg):
        run, results = load_bundle(run_arg)
        data = {"format": FORMAT, "version": VERSION, "run": run.to_json(), "cases": [r.to_json() for r in results]}
        return run, results, data, None
    try:
        with Store(sess.db, create=False) as st:
            run_id = run_arg or st.latest_run_id()
            data = make_bundle(st, run_id)
            run, results = st.get_run(run_id), st.results(run_id)
            return run, results, data, (st.path.parent / run_id).absolute()
    except sqlite3.DatabaseError as e:
        raise BadInput(f"{sess.db} is not a usable bringup database ({e})") from e


def render(
    fmt: str, run: Any, results: list[Any], data: dict[str, Any], out: Path, margin: float | None = None
) -> dict[Path, str]:
    """{path: text} of every file the format writes (raises BadInput when the run has nothing for it)."""
    if fmt == "bundle":
        return {out: dumps(data)}
    if fmt == "benchmark-records":
        return {out: dumps(records(run, results))}
    if fmt == "support-table":
        from bringup.report.exports.support import support_table  # lazy: fast --help

        table = support_table(run, results)
        return {out.with_suffix(".md"): table.markdown(), out.with_suffix(".csv"): table.csv()}
    if fmt == "pytorch-tests":
        from bringup.report.exports.pytorch_tests import DEFAULT_MARGIN, pytorch_test_configs  # lazy: fast --help

        cfg = pytorch_test_configs(run, results, DEFAULT_MARGIN if margin is None else margin)
        return {out.with_suffix(".py"): cfg.python(), out.with_suffix(".json"): dumps(cfg.to_json())}
    raise BadInput(f"--format {fmt}: not one of {', '.join(FORMATS)}")  # argparse's choices catch it first


def main(sess: CommandSession) -> int:
    from bringup.report.portable import travelling  # lazy: fast --help

    args = sess.options.of(ExportOptions)
    fmt, margin = args.format, args.margin
    if margin is not None and (fmt != "pytorch-tests" or not 1.0 <= margin < float("inf")):
        raise BadInput("--margin: only with --format pytorch-tests, and at least 1")
    check_output_path(args.out, "--out")
    run, results, data, run_dir = _load(sess, args.run)
    if run_dir is not None:  # from the store: the bundle travels (paths relative to the run's folder)
        data = travelling(data, run.info, run_dir)
    files = render(fmt, run, results, data, Path(args.out), margin)
    for path in files:
        check_output_path(str(path), "--out")
    for path, text in files.items():
        atomic_write_text(path, text)
    where = ", ".join(str(p) for p in files)
    what = "" if fmt == "bundle" else f" as {fmt}"
    sess.console.print(f"exported run {run.run_id} ({len(results)} cases){what} to {where}", highlight=False)
    return 0
