"""A test plugin suite (`--import bringup_travel`): one case that records paths where real suites put them
(an artifact in its folder, a cache under the run's folder, a temp dir, a file in the working directory and
under home, a traceback line through site-packages), so a cheap real run shows what summary.json and an
exported bundle do with them."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bringup.api import Options, Suite, register_suite
from bringup.case import Case, CaseResult, Status
from bringup.device import Device


def build_cases(options: Options, device: Device) -> list[Case]:
    return [Case("travel", "paths", {"n": 1}, f"{__name__}:run_paths", 60)]


def run_paths(case: Case, ctx: Any) -> CaseResult:
    trace = ctx.artifact("trace.json.gz")
    trace.write_bytes(b"")
    cache = Path(ctx.run_dir) / "train-cache" / "compile-1"
    cache.mkdir(parents=True, exist_ok=True)
    r = CaseResult.for_case(case, Status.PASS)
    r.artifacts["trace"] = str(trace)
    r.fields |= {
        "trace": str(trace),
        "cache_dir": str(cache),
        "scratch": os.path.join(tempfile.gettempdir(), "bringup-travel-x"),
        "script": os.path.join(os.getcwd(), "train.py"),
        "home_file": str(Path.home() / ".cache" / "x"),
        "where": f'File "{sys.prefix}/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1',
    }
    return r


def summarize(results: list[CaseResult], console: Any) -> dict[str, Any]:
    return {"cache_root": str(Path(results[0].fields["cache_dir"]).parent)} if results else {}


register_suite(
    Suite(
        name="travel",
        help="paths where real suites record them (a test plugin)",
        build_cases=build_cases,
        summarize=summarize,
    )
)
