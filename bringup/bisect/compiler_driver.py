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
    runs: list[dict[str, Any]] = []
    current: list[subprocess.Popen[bytes]] = []
    parent = os.getppid()

    def watch() -> None:  # die with the bringup worker that started us, and take the running test along
        while os.getppid() == parent:
            time.sleep(0.5)
        for p in current:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(70)

    threading.Thread(target=watch, daemon=True).start()
    log = open(os.environ.get("BRINGUP_BISECT_LOG", os.devnull), "a")

    def test() -> bool:
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
            state = bis.get_run_state(backend, subsystem) if hasattr(bis, "get_run_state") else None  # type: ignore[arg-type]  # set with any subsystem
            if state == "test_disable":
                env["TORCH_BISECT_MAX"] = "-1"
        left = budget - (time.monotonic() - t0)
        if left <= 0:
            raise TimeoutError(f"compiler bisector over its budget ({budget:g} s) after {len(runs)} runs")
        r0 = time.monotonic()
        log.write(f"$ [{backend} {subsystem or ''}] {' '.join(cmd)}\n")
        log.flush()
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        current[:] = [p]
        try:
            ok = p.wait(timeout=min(run_budget, left)) == 0
            late = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            ok, late = False, True
        runs.append(
            {
                "backend": backend,
                "subsystem": subsystem,
                "ok": ok,
                "timed_out": late,
                "wall_s": round(time.monotonic() - r0, 2),
            }
        )
        return ok

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
    return emit({"result": found, "runs": runs, "torch": torch.__version__, "wall_s": round(time.monotonic() - t0, 1)})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
