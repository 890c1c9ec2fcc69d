"""selftest: deliberate faults that prove the harness itself keeps its promises on this machine.

`bringup selftest --plan ok*3,sleep:2,segv,exit:3,raise,hang,alloc:4,phase:10` runs each item as a
case. Used by the reliability tests; also a quick way to check a new machine's isolation.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.api import register_capability
from bringup.case import Case, CaseResult, Status
from bringup.console import case_table
from bringup.device import Device
from bringup.errors import BadInput
from bringup.options import Options
from bringup.selftest import args as face  # the torch-free face (cli)
from bringup.selftest.args import SelftestOptions
from bringup.selftest.kernels import build_item, inductor_item

if TYPE_CHECKING:
    from rich.console import Console

if TYPE_CHECKING:
    from rich.console import Console

_ITEM = re.compile(
    r"(ok|sleep|segv|exit|raise|hang|alloc|phase|unsupported|print|spin|loseonce|lose|flip|build|inductor)"
    r"(?::([0-9.]+))?(?:\*(\d+))?"
)


def parse_plan(plan: str) -> list[tuple[str, float | None]]:
    out: list[tuple[str, float | None]] = []
    for raw in plan.split(","):
        item = raw.strip()
        m = _ITEM.fullmatch(item)
        if not m:
            raise BadInput(f"bad selftest plan item {item!r}")
        arg = float(m.group(2)) if m.group(2) else None
        out += [(m.group(1), arg)] * int(m.group(3) or 1)
    return out


def build_cases(options: Options, device: Device) -> list[Case]:
    opts = options.of(SelftestOptions)
    cases = []
    for i, (op, arg) in enumerate(parse_plan(opts.plan)):
        name = f"{i:03d}-{op}" + (f"-{arg:g}" if arg is not None else "")
        params = {"i": i, "op": op, "arg": arg, "tag": opts.tag, "phase_budget": opts.phase_budget}
        cases.append(Case("selftest", name, params, "bringup.selftest.suite:run_item", opts.case_budget))
    return cases


def run_cases(device: Device, quick: bool) -> list[Case]:
    return []


def run_item(case: Case, ctx: Any) -> CaseResult:
    op, arg = case.params["op"], case.params["arg"]
    if op == "sleep":
        time.sleep(float(arg or 1))
    elif op == "segv":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    elif op == "exit":
        os._exit(int(arg if arg is not None else 3))
    elif op == "raise":
        raise RuntimeError("selftest: raised on purpose")
    elif op == "unsupported":
        raise NotImplementedError("selftest: not implemented on purpose")
    elif op == "hang":
        while True:
            pass
    elif op == "alloc":
        blocks = []
        for _ in range(int(float(arg or 4) * 16)):  # 64 MiB blocks, touched so they count as RSS
            blocks.append(bytearray(64 << 20))
            time.sleep(0.02)
    elif op == "phase":
        with ctx.phase("compile", budget_s=float(case.params["phase_budget"])):
            time.sleep(float(arg or 10))
    elif op == "spin":  # fixed CPU work (N million loop steps): what scaling benchmarks measure
        x = 0
        for i in range(int(float(arg or 1) * 1_000_000)):
            x = (x + i * i) % 1_000_003
        r = CaseResult.for_case(case, Status.PASS)
        r.metric("spin_result", x)
        return r
    elif op in ("lose", "loseonce"):
        # Kill the process that runs this worker: the Ray actor (a "lost worker" Ray must retry),
        # or with the local executor bringup itself (a driver crash). `loseonce` does it once per run
        # (a marker in the case's artifact dir), so the retry or the resumed run then passes.
        marker = ctx.artifact("lost-once")
        if op == "lose" or not marker.exists():
            marker.touch()
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(60)  # the parent-watch takes us down with it
    elif op == "flip":
        # A flaky case: pass, fail_numeric, pass, ... over the runs that share a result store (a counter
        # next to the store, one per case id): what `--repeat N --expect FILE` must call flaky.
        counter = Path(ctx.run_dir).parent / f".selftest-flip-{case.case_id}"
        n = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(n + 1))
        if n % 2:
            return CaseResult.for_case(case, Status.FAIL_NUMERIC, f"selftest: flip {n + 1} failed on purpose")
    elif op == "build":  # a kernel library built in place into the compile cache, then loaded (kernels.py)
        return build_item(case, float(arg if arg is not None else 1.0))
    elif op == "inductor":  # a real torch.compile through the compile cache
        return inductor_item(case, ctx)
    elif op == "print":
        print('selftest: noise on stdout {"type": "result"}', flush=True)
    r = CaseResult.for_case(case, Status.PASS)
    r.metric("pid", os.getpid())
    return r


def summarize(results: list[CaseResult], console: Console) -> dict[str, Any]:
    console.print(case_table("selftest", results, []))
    return {}


register_capability(face, build_cases, None, summarize, title="Harness self-test")
