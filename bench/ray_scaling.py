"""Benchmark: a sweep on the Ray executor with 2 workers vs 1 (goal: >= 1.7x on 2 cores).

    .venv/bin/python bench/ray_scaling.py [--sweep zoo|spin] [--repeats 3] [--cases N] [--spin M] [--local] [--cold]

The sweep is `bringup zoo`'s quick list (`run_cases(device, quick=True)`, the same cases `bringup run
--quick` runs) when the zoo suite is in the tree, else N CPU-bound `selftest spin:M` cases (fixed work:
M million interpreter steps each). Both arms run the same cases through the real runner
(`bringup.runner.execute`: planning, the store, one transaction per case) on ONE local Ray instance
started up front, so Ray's start-up (seconds, a constant) is outside the timed part; each arm starts
its own actors and warm worker processes inside it. On a local instance each slot gets cores/workers
CPUs (Ray sets OMP_NUM_THREADS to that), so both arms use the whole machine. Arms alternate (1, 2, 1,
2, ...) so load drift hits both; medians are printed with the ratio. With --local the local executor
is measured the same way, for reference.

Numbers from a loaded machine are not figures: re-run on a quiet one.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402

from bringup.case import Case  # noqa: E402
from bringup.device import resolve_device  # noqa: E402
from bringup.runner import execute, make_executor  # noqa: E402
from bringup.runner.process import WorkerSpec  # noqa: E402
from bringup.store import Store  # noqa: E402


def sweep_cases(kind: str, n: int, spin: float) -> tuple[str, list[Case]]:
    from bringup import suites

    if kind in ("zoo", "auto") and "zoo" in suites.available():
        cases = suites.load("zoo").run_cases(resolve_device("cpu"), quick=True)
        return "zoo quick", cases[:n] if n else cases
    if kind == "zoo":
        raise SystemExit("bench: the zoo suite is not in this checkout; use --sweep spin")
    params = lambda i: {"i": i, "op": "spin", "arg": spin, "tag": "bench", "phase_budget": 1.0}
    cases = [
        Case("selftest", f"{i:03d}-spin", params(i), "bringup.selftest.suite:run_item", 600.0) for i in range(n or 12)
    ]
    return f"selftest spin:{spin:g} x{len(cases)}", cases


def one_pass(
    executor_name: str, cases: list[Case], workers: int, root: Path, tag: str, cold: bool = False
) -> tuple[float, str]:
    run_dir = root / tag
    run_dir.mkdir(parents=True)
    # --cold: this pass's workers compile into their own empty inductor cache (a first sweep)
    env = {"TORCHINDUCTOR_CACHE_DIR": str(run_dir / "inductor-cache")} if cold else {}
    spec = WorkerSpec(device="cpu", log_dir=str(run_dir / "logs"), env=env)
    quiet = Console(file=open(run_dir / "progress.txt", "w"), stderr=False)
    with Store(run_dir / "bench.db") as store:
        run_id = store.new_run("bench", ["bench"], "cpu", "cpu", {"bench": tag})
        executor = make_executor(executor_name, spec, workers)
        t0 = time.perf_counter()
        results = execute(store, run_id, cases, executor, run_dir, quiet)
        wall = time.perf_counter() - t0
    counts = Counter(r.status.value for r in results)
    return wall, ", ".join(f"{n} {s}" for s, n in counts.most_common())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", choices=["auto", "zoo", "spin"], default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", type=int, default=0, help="first N cases of the sweep (0: all; spin: 12)")
    ap.add_argument("--spin", type=float, default=20.0, help="million steps per spin case")
    ap.add_argument("--local", action="store_true", help="also time the local executor, for reference")
    ap.add_argument("--cold", action="store_true", help="each pass compiles into its own empty inductor cache")
    args = ap.parse_args()

    import ray

    what, cases = sweep_cases(args.sweep, args.cases, args.spin)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cache = "cold inductor cache per pass" if args.cold else "shared (warm) inductor cache"
    print(f"sweep: {what} ({len(cases)} cases); {cpus} cores; {args.repeats} repeats; {cache}; arms alternate")
    t0 = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=cpus,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        object_store_memory=256 << 20,
    )
    print(f"ray start-up: {time.perf_counter() - t0:.1f} s (not in the figures below)")
    arms = [("ray", 1), ("ray", 2)] + ([("local", 1), ("local", 2)] if args.local else [])
    times: dict[tuple[str, int], list[float]] = {a: [] for a in arms}
    try:
        with tempfile.TemporaryDirectory(prefix="bringup-bench-ray-") as tmp:
            for rep in range(args.repeats):
                for ex, w in arms:
                    wall, statuses = one_pass(ex, cases, w, Path(tmp), f"{ex}{w}-{rep}", args.cold)
                    times[(ex, w)].append(wall)
                    print(f"  rep {rep}: {ex:5s} x{w}: {wall:7.1f} s  ({statuses})", flush=True)
    finally:
        ray.shutdown()
    med = {a: statistics.median(v) for a, v in times.items()}
    print()
    print(f"{'executor':10s} {'workers':>7s} {'median s':>9s} {'speed-up':>9s}")
    for ex, w in arms:
        print(f"{ex:10s} {w:7d} {med[(ex, w)]:9.1f} {med[(ex, 1)] / med[(ex, w)]:8.2f}x")
    ratio = med[("ray", 1)] / med[("ray", 2)]
    print(f"\nray 2 workers vs 1: {ratio:.2f}x (goal >= 1.7x on 2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
