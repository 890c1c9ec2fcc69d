"""Benchmark: what a Hub sweep costs per distinct signature, end to end through the real CLI.

    .venv/bin/python bench/hub_sweep.py [--bases 6] [--workers 1] [--executor local|ray] [--warm]
                                        [--zoo-args "--noise-seeds 2 --steps 4"] [--json FILE]

A local Hub stand-in (tests/hub/hub_standin.py) serves the synthetic repos of tests/hub/hub_synth.py; the ids of
the first `--bases` bases (each base with its fine-tune copies, resized variants and 2 near-duplicates: about 3
signatures per base) are listed in a file and swept with `bringup zoo --source hub-list:FILE` at the zoo's
defaults (inductor, 2 noise seeds, 4 steps, fp32) unless --zoo-args says otherwise. The inductor cache starts
empty (distinct signatures are distinct graphs: a cluster sweep compiles them cold) unless --warm.

Reported: ids, signatures, the CLI's wall time, the planning part (discovery + fetch + signatures, until the run
starts), the sum and the median of the cases' own wall times, seconds per signature (wall / signatures), and
what that rate makes of S signatures on W workers: S x (s per signature) / W, for the docs' estimate.

Numbers from a loaded machine are not figures: say so when you quote them.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hub import hub_synth as hs  # noqa: E402
from tests.hub.hub_standin import StandIn  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bases", type=int, default=6)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--executor", default="local", choices=("local", "ray"))
    ap.add_argument("--warm", action="store_true", help="keep the inductor cache of earlier runs")
    ap.add_argument("--zoo-args", default="", help="extra zoo options, e.g. '--noise-seeds 0 --steps 2'")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    synth = hs.generate(bases=hs.BASES[: a.bases], failures_each=0, flaky=0)
    with tempfile.TemporaryDirectory() as d, StandIn(synth.repos) as hub:
        tmp = Path(d)
        ids = tmp / "ids.txt"
        ids.write_text("".join(f"{r.id} downloads={r.downloads}\n" for r in synth.repos))
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp / "hf"), "PYTHONWARNINGS": "ignore"}
        env.pop("HF_HUB_OFFLINE", None)
        if not a.warm:
            env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp / "inductor")
        cmd = [
            sys.executable,
            "-m",
            "bringup.cli",
            "--device",
            "cpu",
            "--db",
            str(tmp / "b.db"),
            "--workers",
            str(a.workers),
            "--executor",
            a.executor,
            "zoo",
            "--source",
            f"hub-list:{ids}",
            "--hub-rate",
            "1000,100000",
            "--json",
            str(tmp / "out.json"),
            *shlex.split(a.zoo_args),
        ]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started = None
        lines = []
        assert p.stdout is not None
        for line in p.stdout:
            lines.append(line)
            if started is None and line.startswith("run ") and " case(s); results in " in line:
                started = time.monotonic() - t0
        rc = p.wait()
        wall = time.monotonic() - t0
        if rc not in (0, 1):
            print("".join(lines[-40:]))
            return rc
        out = json.loads((tmp / "out.json").read_text())
    walls = [c["wall_s"] for c in out["cases"]]
    sigs = out["hub"]["signatures"]
    per = wall / max(1, sigs)
    res = {
        "ids": out["hub"]["ids"],
        "signatures": sigs,
        "workers": a.workers,
        "executor": a.executor,
        "cold_inductor_cache": not a.warm,
        "zoo_args": a.zoo_args,
        "wall_s": round(wall, 1),
        "planning_s": round(started or 0.0, 1),
        "cases_wall_sum_s": round(sum(walls), 1),
        "case_wall_median_s": round(statistics.median(walls), 1),
        "s_per_signature": round(per, 1),
        "by_status": out.get("by_status"),
    }
    print(
        f"{res['ids']} ids -> {sigs} signatures on {a.workers} {a.executor} worker(s): {wall:.0f} s wall "
        f"(planning {res['planning_s']:.0f} s), cases {sum(walls):.0f} s in all, median "
        f"{res['case_wall_median_s']:.1f} s: {per:.1f} s per signature; by status {res['by_status']}"
    )
    for s, w in ((1_000, 64), (3_000, 64), (10_000, 64)):
        print(f"  at this rate: {s} signatures on {w} workers ~ {s * per / w / 3600:.2f} h")
    if a.json:
        Path(a.json).write_text(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
