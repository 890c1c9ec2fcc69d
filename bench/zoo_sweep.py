"""Benchmark: seconds per model of the hf-causal zoo sweep, with 1 and 2 workers.

    .venv/bin/python bench/zoo_sweep.py [--limit N] [--filter REGEX] [--steps 4] [--workers 1,2]
                                        [--compile-backend inductor] [--warm-cache] [--keep DIR]

Runs `bringup --device cpu zoo --source hf-causal ...` once per worker count, each in a fresh
directory (its own result db) and, unless --warm-cache, with its own empty TORCHINDUCTOR_CACHE_DIR
(every run compiles cold, so the order of the runs doesn't favour the later one). Prints per run:
models, wall seconds, seconds per model, the status totals; then the ratio of seconds per model
(workers=1 / workers=N). The full 196-type sweep is also how "how many causal types build and pass"
is measured (the totals line). Figures are from whatever machine runs this: on a shared or busy
machine they say little; re-run on a quiet one before quoting them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_sweep(workers: int, args: argparse.Namespace, root: Path) -> dict:
    d = root / f"w{workers}"
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    if not args.warm_cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(d / "inductor-cache")
    cmd = [
        sys.executable,
        "-m",
        "bringup.cli",
        "--device",
        "cpu",
        "--workers",
        str(workers),
        "zoo",
        "--source",
        "hf-causal",
        "--steps",
        str(args.steps),
        "--compile-backend",
        args.compile_backend,
        "--case-budget",
        str(args.timeout),
        "--json",
        str(d / "zoo.json"),
    ]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if args.filter:
        cmd += ["--filter", args.filter]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=d, env={**env, "PYTHONPATH": str(REPO)}, text=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # cpu seconds of the whole tree (the CLI, its workers, their inductor compile workers: all reaped)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode not in (0, 1):
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"workers={workers}: bringup exited {p.returncode}")
    data = json.loads((d / "zoo.json").read_text())
    n = len(data["cases"])
    return {
        "workers": workers,
        "models": n,
        "wall_s": wall,
        "s_per_model": wall / max(n, 1),
        "cpu_s": cpu_s,
        "totals": data.get("totals", {}),
        "by_status": data.get("by_status", {}),
        "by_reason": data.get("by_reason", {}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="first N causal types (default: all 196)")
    ap.add_argument("--filter", default=None)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--workers", default="1,2", help="comma list of worker counts (default 1,2)")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--warm-cache", action="store_true", help="share the inductor cache (default: cold per run)")
    ap.add_argument("--keep", default=None, help="keep the run directories here")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="zoo-sweep-"))
    rows = [run_sweep(w, args, root) for w in counts]
    # "cores busy" = cpu seconds / wall seconds: how much of the machine an arm already used. When one
    # worker already keeps every core busy (torch's threads, inductor's parallel compile), a second
    # worker can't make the sweep much faster, whatever the executor does.
    print(f"{'workers':>7} {'models':>6} {'wall s':>8} {'s/model':>8} {'cpu s':>8} {'cores busy':>10}  totals")
    for r in rows:
        t = r["totals"]
        print(
            f"{r['workers']:>7} {r['models']:>6} {r['wall_s']:>8.1f} {r['s_per_model']:>8.2f} "
            f"{r['cpu_s']:>8.1f} {r['cpu_s'] / max(r['wall_s'], 1e-9):>10.2f}  "
            f"built {t.get('built')}, config failures {t.get('config_fail')}, pass {t.get('pass')}/"
            f"{t.get('judged')}; {r['by_status']}; reasons {r['by_reason']}"
        )
    base = rows[0]
    for r in rows[1:]:
        print(
            f"ratio s/model workers={base['workers']} / workers={r['workers']}: "
            f"{base['s_per_model'] / max(r['s_per_model'], 1e-9):.2f}"
        )
    print(f"runs in {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
