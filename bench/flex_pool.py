"""Benchmark: the flex quick matrix on warm pooled workers vs one fresh process per case.

    .venv/bin/python bench/flex_pool.py [--repeats 3] [--cases N] [--workers 1] [--cold]

Both arms run the same cases through the real runner (bringup.runner.execute, the local executor):
"pooled" reuses one worker process across cases (imports, dynamo/inductor state and in-memory caches
stay warm; dynamo is still reset per case), "fresh" marks every case `isolated` (a new process per
case, as a per-case subprocess harness would). A warm-up pass first fills the on-disk compile cache so
both arms read the same cache; with --cold each measured pass gets its own empty
TORCHINDUCTOR_CACHE_DIR instead (then cold C++ compiles dominate both arms).
Arms alternate (pooled, fresh, pooled, ...) so machine load drifts hit both; medians are printed with
the ratio fresh/pooled (goal: >= 2x). Numbers from a loaded machine are not figures: re-run quietly.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402

from bringup.case import Case, Status  # noqa: E402
from bringup.device import Device  # noqa: E402
from bringup.flex import suite as flex  # noqa: E402
from bringup.runner import execute  # noqa: E402
from bringup.runner.local import LocalExecutor  # noqa: E402
from bringup.runner.process import WorkerSpec  # noqa: E402
from bringup.store import Store  # noqa: E402


def one_pass(cases: list[Case], workers: int, root: Path, tag: str, cache_dir: str | None) -> tuple[float, int]:
    """Run the cases once in a new store; (wall seconds, passed cases)."""
    run_dir = root / tag
    run_dir.mkdir(parents=True)
    env = {"TORCHINDUCTOR_CACHE_DIR": cache_dir} if cache_dir else {}
    spec = WorkerSpec(device="cpu", log_dir=str(run_dir / "logs"), env=env)
    quiet = Console(file=open(run_dir / "progress.txt", "w"), stderr=False)
    with Store(run_dir / "bench.db") as store:
        run_id = store.new_run("flex", ["bench"], "cpu", "cpu", {"bench": tag})
        t0 = time.perf_counter()
        results = execute(store, run_id, cases, LocalExecutor(spec, workers), run_dir, quiet)
        wall = time.perf_counter() - t0
    quiet.file.close()
    return wall, sum(r.status is Status.PASS for r in results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="measured passes per arm (default 3; median)")
    ap.add_argument("--cases", type=int, default=0, help="only the first N quick cases (0 = all)")
    ap.add_argument("--workers", type=int, default=1, help="worker processes per arm (default 1)")
    ap.add_argument("--cold", action="store_true", help="each measured pass gets an empty compile cache")
    args = ap.parse_args()
    cases = flex.run_cases(Device("cpu"), quick=True)
    if args.cases:
        cases = cases[: args.cases]
    fresh_cases = [dataclasses.replace(c, isolated=True) for c in cases]
    print(
        f"flex quick matrix: {len(cases)} cases, {args.workers} worker(s), {args.repeats} repeat(s), "
        f"{'cold' if args.cold else 'warm'} on-disk compile cache"
    )
    times: dict[str, list[float]] = {"pooled": [], "fresh": []}
    passed: dict[str, list[int]] = {"pooled": [], "fresh": []}
    with tempfile.TemporaryDirectory(prefix="bringup-bench-flex-") as tmp:
        root = Path(tmp)
        shared_cache = str(root / "inductor-cache")
        if not args.cold:
            wall, _ = one_pass(cases, args.workers, root, "warmup", shared_cache)
            print(f"warm-up (pooled, fills the compile cache): {wall:.1f} s")
        for i in range(args.repeats):
            for arm, cs in (("pooled", cases), ("fresh", fresh_cases)):
                cache = str(root / f"cold-{arm}-{i}") if args.cold else shared_cache
                wall, ok = one_pass(cs, args.workers, root, f"{arm}-{i}", cache)
                times[arm].append(wall)
                passed[arm].append(ok)
                print(f"  {arm:6s} pass {i + 1}: {wall:7.1f} s  ({ok}/{len(cs)} passed)")
    print()
    print(f"{'arm':8s} {'median s':>9s} {'per case s':>11s}   runs")
    med = {arm: statistics.median(ts) for arm, ts in times.items()}
    for arm, ts in times.items():
        print(f"{arm:8s} {med[arm]:9.1f} {med[arm] / len(cases):11.2f}   {', '.join(f'{t:.1f}' for t in ts)}")
    ratio = med["fresh"] / med["pooled"] if med["pooled"] > 0 else float("inf")
    print(f"\nfresh / pooled = {ratio:.2f}x  (goal >= 2x)")
    if set(passed["pooled"]) != set(passed["fresh"]):
        print(f"warning: the arms passed different numbers of cases: {passed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
