"""Run by a candidate env's own Python (not imported by bringup): PyTorch's compiler bisector over a command.

    python compiler_driver.py BUDGET_S RUN_BUDGET_S CMD...

What `python -m torch._inductor.compiler_bisector run CMD` does in the releases that have it, driven here
so that every torch whose `CompilerBisector.do_bisect` exists can answer, each test run with a time limit
and the whole with a budget: the bisector tries the backends in order (eager, aot_eager,
aot_eager_decomp_partition, inductor), then, in the first that fails, disables its subsystems one by one
and bisects the count of applications of the one that flips the result. Each test run is CMD with
TORCH_BISECT_BACKEND / TORCH_BISECT_SUBSYSTEM / TORCH_BISECT_MAX (and TORCH_COMPILE_BACKEND) set; CMD exits 0
when the result is right. The state lives under TORCHINDUCTOR_CACHE_DIR (which the bisector deletes when it
starts: give it a private one). Prints one line: BRINGUP_COMPILER_BISECT {json}.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

TAG = "BRINGUP_COMPILER_BISECT"


def emit(data: dict[str, Any]) -> int:
    print(f"{TAG} {json.dumps(data, default=str)}", flush=True)
    return 0


class Tester:
    """The bisector's test: CMD run once under the bisector's current backend / subsystem settings, with a time
    limit (the run budget, and what is left of the whole budget); each run recorded in `runs`."""

    def __init__(self, bis: Any, budget: float, run_budget: float, cmd: list[str], log: Any, t0: float) -> None:
        self.bis, self.budget, self.run_budget, self.cmd, self.log = bis, budget, run_budget, cmd, log
        self.t0 = t0  # when the driver started: the budget is the whole's
        self.runs: list[dict[str, Any]] = []
        self.current: list[subprocess.Popen[bytes]] = []

    def watch(self, parent: int) -> None:
        """Die with the bringup worker that started us, and take the running test along."""
        while os.getppid() == parent:
            time.sleep(0.5)
        for p in self.current:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(70)

    def env(self) -> tuple[dict[str, str], str, str]:
        """The test run's environment under the bisector's settings, its backend and its subsystem."""
        bis = self.bis
        env = os.environ.copy()
        # The bisector's state files: torch <= 2.12's do_bisect moves them to a temp dir of its own, which the
        # test run reads only as its cache dir (torch 2.13's `run` keeps them in the cache dir itself)
        env["TORCHINDUCTOR_CACHE_DIR"] = bis.in_process_cache or env.get("TORCHINDUCTOR_CACHE_DIR", "")
        backend, subsystem = bis.get_backend(), bis.get_subsystem()
        if backend:
            env["TORCH_COMPILE_BACKEND"] = backend
            env["TORCH_BISECT_BACKEND"] = backend
        if subsystem:
            env["TORCH_BISECT_SUBSYSTEM"] = subsystem
            state = bis.get_run_state(backend, subsystem) if hasattr(bis, "get_run_state") else None
            if state == "test_disable":
                env["TORCH_BISECT_MAX"] = "-1"
        return env, backend, subsystem

    def __call__(self) -> bool:
        env, backend, subsystem = self.env()
        left = self.budget - (time.monotonic() - self.t0)
        if left <= 0:
            raise TimeoutError(f"compiler bisector over its budget ({self.budget:g} s) after {len(self.runs)} runs")
        r0 = time.monotonic()
        self.log.write(f"$ [{backend} {subsystem or ''}] {' '.join(self.cmd)}\n")
        self.log.flush()
        p = subprocess.Popen(self.cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.current[:] = [p]
        try:
            ok = p.wait(timeout=min(self.run_budget, left)) == 0
            late = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            ok, late = False, True
        wall = round(time.monotonic() - r0, 2)
        self.runs.append({"backend": backend, "subsystem": subsystem, "ok": ok, "timed_out": late, "wall_s": wall})
        return ok


def main(argv: list[str]) -> int:
    budget, run_budget, cmd = float(argv[0]), float(argv[1]), argv[2:]
    t0 = time.monotonic()
    try:
        import torch
        from torch._inductor import compiler_bisector as cbm
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except Exception as e:  # an older torch: no compiler bisector
        return emit({"error": f"no compiler bisector in this torch ({type(e).__name__}: {e})"})
    bis = cbm.CompilerBisector
    log = open(os.environ.get("BRINGUP_BISECT_LOG", os.devnull), "a")
    test = Tester(bis, budget, run_budget, cmd, log, t0)
    threading.Thread(target=test.watch, args=(os.getppid(),), daemon=True).start()
    runs = test.runs
    try:
        bis.delete_bisect_status()
        bis.bisection_enabled = True
        bis.in_process_cache = cache_dir()
        result = bis.do_bisect(test, cli_interface=False)
    except TimeoutError as e:
        return emit({"error": str(e), "runs": runs, "torch": torch.__version__})
    except Exception as e:  # the bisector of this release does not work this way
        return emit(
            {"error": f"the compiler bisector raised {type(e).__name__}: {e}", "runs": runs, "torch": torch.__version__}
        )
    found = None
    if result is not None:
        found = {k: getattr(result, k, None) for k in ("backend", "subsystem", "bisect_number", "debug_info")}
    wall = round(time.monotonic() - t0, 1)
    return emit({"result": found, "runs": runs, "torch": torch.__version__, "wall_s": wall})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
