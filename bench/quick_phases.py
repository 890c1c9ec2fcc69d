"""Where `bringup run --quick` spends its time, and what running its cases side by side saves (issue 52).

    .venv/bin/python bench/quick_phases.py --json bench/results/2026-12-06-quick/phases.json

Each arm is one `bringup run --quick` in a fresh process, with a cold compile cache of its own (a fresh
TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR) and a store of its own; the arms run one after another in this one
invocation, so their ratio compares like with like. Per arm: the run's wall time (this process's clock around
the command) and, per suite, the sum of its cases' own wall_s (summary.json: the phase's work, whichever worker
did it). Default arms: `--workers 1` (the quick path before it ran side by side) and the default (one worker per
core, at most 4). The statuses of both arms are printed too: running side by side must change no verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_arm(workers: str, bringup: str, tmp: Path) -> dict[str, Any]:
    """One cold `run --quick`: wall, per-suite work, statuses by case."""
    arm = tmp / f"workers-{workers}"
    arm.mkdir()
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(arm / "inductor"),
        "TRITON_CACHE_DIR": str(arm / "triton"),
    }
    argv = [bringup, "--db", str(arm / "b.db")]
    if workers != "default":
        argv += ["--workers", workers]
    argv += ["run", "--quick"]
    t0 = time.perf_counter()
    rc = subprocess.run(argv, cwd=arm, env=env, stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    (summary,) = arm.glob("*/summary.json")
    data = json.loads(summary.read_text())
    work: dict[str, float] = defaultdict(float)
    for c in data["cases"]:
        work[c["suite"]] += float(c.get("wall_s") or 0.0)
    return {
        "workers": workers,
        "rc": rc,
        "wall_s": round(wall, 1),
        "work_s": {k: round(v, 1) for k, v in sorted(work.items(), key=lambda kv: -kv[1])},
        "statuses": dict(Counter(c["status"] for c in data["cases"])),
        "by_case": {f"{c['suite']}/{c['name']}": c["status"] for c in data["cases"]},
        "left_out": data.get("quick_left_out"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", default="1,default", help="comma list of --workers values ('default': none given)")
    ap.add_argument("--bringup", default=str(REPO / ".venv" / "bin" / "bringup"))
    ap.add_argument("--json", type=Path, help="write the arms here")
    a = ap.parse_args(argv)
    load = os.getloadavg()[0]
    arms = []
    with tempfile.TemporaryDirectory(prefix="quick-phases-") as tmp:
        for w in a.arms.split(","):
            arms.append(run_arm(w.strip(), a.bringup, Path(tmp)))
            r = arms[-1]
            print(f"workers {r['workers']}: {r['wall_s']} s wall (exit {r['rc']}); {r['statuses']}", flush=True)
            print("  work per suite (s): " + ", ".join(f"{k} {v}" for k, v in r["work_s"].items()), flush=True)
    base = arms[0]
    for r in arms[1:]:
        same = r["by_case"] == base["by_case"]
        print(
            f"workers {r['workers']} vs {base['workers']}: {base['wall_s'] / r['wall_s']:.2f}x faster; "
            f"statuses {'identical' if same else 'DIFFER'}"
        )
    out = {"load_before": load, "cpus": os.cpu_count(), "command": " ".join(sys.argv), "arms": arms}
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
