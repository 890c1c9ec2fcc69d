"""`bringup run`: every suite that exists, on one device, in one run, then the scorecard."""

from __future__ import annotations

import argparse
from typing import Any

from bringup.case import Case, CaseResult
from bringup.errors import BadInput
from bringup.store import RunInfo, Store


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small cases for cpu / CI (~10 min on 2 cores; default)")
    g.add_argument("--full", action="store_true", help="the full matrices, for a real accelerator")
    p.add_argument("--skip", default="", help="comma list of suites to leave out (e.g. zoo,ops)")
    p.add_argument("--only", default="", help="comma list of suites to run (default: all)")
    p.add_argument("--port", metavar="PATH", action="append", default=[],
                   help="also scan PATH for CUDA-only code (bringup port) and put findings in the report")
    p.add_argument("--out", metavar="FILE", default=None, help="HTML report path (default: in the run dir)")


def plan(args: argparse.Namespace, device: Any) -> list[Case]:
    from bringup import suites

    names = list(suites.RUN_ORDER)
    avail = suites.available()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    for s in skip | only:
        if s not in names and s != "port":
            raise BadInput(f"unknown suite {s!r} in --skip/--only; suites: {', '.join(names)}")
    cases: list[Case] = []
    for name in names:
        if name in skip or (only and name not in only) or name not in avail:
            continue
        cases += suites.load(name).run_cases(device, quick=not args.full)
    if args.port and "port" not in skip:
        from bringup.port import suite as port_suite

        cases += port_suite.run_cases_for_paths(args.port)
    return cases


def finish(store: Store, run: RunInfo, results: list[CaseResult]) -> None:
    """After every run: the HTML scorecard (when the report module is present)."""
    import importlib.util

    if importlib.util.find_spec("bringup.report.html") is None:
        return
    from bringup.report import html

    out = html.write_report(store, run.run_id, None)
    print(f"report: {out}")


def main(sess: Any) -> int:
    from bringup.flow import check_output_path, execute_cases, summarize_by_suite

    check_output_path(sess.args.out, "--out")
    cases = plan(sess.args, sess.device)
    if not cases:
        raise BadInput("run: every suite was skipped; nothing to do")

    def after(store: Store, run: RunInfo, results: list[CaseResult]) -> None:
        if sess.args.out:
            from bringup.report import html

            print(f"report: {html.write_report(store, run.run_id, sess.args.out)}")
        else:
            finish(store, run, results)

    return execute_cases(sess, "run", cases, summarize_by_suite, after)
