"""`bringup port PATH... [--fix] [--diff] [--select CODES] [--json FILE]`.

Prints `file:line:col CODE message [fixable|manual]` per finding, then a summary by rule. Exit 0 when
no finding remains, 1 when some do, 2 on bad input (missing path, unknown code, unwritable --json).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any

from bringup.errors import BadInput
from bringup.options import CommandOptions, measured, not_measured
from bringup.session import CommandSession


@dataclass(frozen=True)
class PortOptions(CommandOptions):
    """`bringup port`'s options (add_arguments' dests; --json is Options.common's)."""

    paths: tuple[str, ...] = measured(())
    fix: bool = not_measured(False, "the files rewritten: the findings are the same")
    diff: bool = not_measured(False, "the fixes printed")
    select: str | None = measured(None)


OPTIONS = PortOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="Python files or directories to scan")
    p.add_argument("--fix", action="store_true", help="rewrite what can be rewritten safely (atomic writes)")
    p.add_argument("--diff", action="store_true", help="print the unified diff of the fixes; write nothing")
    p.add_argument(
        "--select",
        metavar="CODES",
        default=None,
        help="only these rules: comma-separated codes or prefixes (BU101,BU11)",
    )
    p.add_argument(
        "--json", metavar="FILE", default=argparse.SUPPRESS, help='write {"findings": [...], "summary": {...}}'
    )


def main(sess: CommandSession) -> int:
    from bringup.files import check_output_path, write_json  # lazy: torch-free --help
    from bringup.port.rules import parse_select  # lazy: torch-free --help
    from bringup.port.scanner import port  # lazy: torch-free --help

    args = sess.options.of(PortOptions)
    json_path = sess.options.common.json
    try:
        select = parse_select(args.select)
    except ValueError as e:
        raise BadInput(f"--select: {e}") from None
    check_output_path(json_path, "--json")
    rep = port(list(args.paths), select, fix=bool(args.fix or args.diff), write=bool(args.fix and not args.diff))
    try:
        _print(rep, args)
    except BrokenPipeError:  # `bringup port ... | head`: the reader left; still write --json, keep the exit code
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if json_path:
        write_json(json_path, rep.to_json())
    return 1 if rep.findings else 0


def _print(rep: Any, args: PortOptions) -> None:
    out = sys.stdout
    if args.diff:
        for d in rep.diffs:
            out.write(d if d.endswith("\n") else d + "\n")
    for f in rep.findings:
        out.write(f.line_text() + "\n")
    for w in rep.not_written:
        print(f"bringup: warning: not fixed: {w}", file=sys.stderr)
    if rep.findings:
        out.write("summary by rule:\n")
    for line in rep.summary_lines():
        out.write(line + "\n")
    if args.fix and not args.diff:
        out.write(f"fixed {rep.fixed} construct(s) in {rep.files_changed} file(s)\n")
    elif args.diff:
        out.write(f"--diff: {rep.fixed} construct(s) in {len(rep.diffs)} file(s) would be fixed; nothing written\n")
    out.flush()
