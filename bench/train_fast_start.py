"""Benchmark: how much faster the first training step comes with a warm compile cache.

    .venv/bin/python bench/train_fast_start.py [--device cpu] [--model qwen3-tiny] [--batch 4] [--seq 256]
                                               [--repeats 1]

Runs the real command, `bringup train --modes compile,regional --cache both` (each case a fresh worker:
compile cold on an empty cache dir, then regional cold, then both warm on the dirs their cold cases
left), and prints time to first step (step 1 wall incl. compile) per mode and cache state, and the
ratio full-compile cold / best warm (goal >= 5x on qwen3-tiny). With --repeats N the command runs N
times (a new run, new empty caches each time) and medians are taken. Numbers from a loaded machine
are not figures: re-run on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one_run(a: argparse.Namespace, work: Path) -> dict[str, float]:
    cmd = [
        sys.executable,
        "-m",
        "bringup.cli",
        "--device",
        a.device,
        "train",
        "--model",
        a.model,
        "--modes",
        "compile,regional",
        "--cache",
        "both",
        "--steps",
        str(a.steps),
        "--batch",
        str(a.batch),
        "--seq",
        str(a.seq),
        "--json",
        "out.json",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run(cmd, cwd=work, env=env, text=True, capture_output=True)
    if p.returncode not in (0, 1) or not (work / "out.json").exists():
        sys.exit(f"bringup train failed (rc {p.returncode}):\n{p.stderr[-3000:]}")
    data = json.loads((work / "out.json").read_text())
    out: dict[str, float] = {}
    for c in data["cases"]:
        if c["status"] == "pass":
            out[c["name"]] = c["ttfs_s"]
            out[c["name"] + ":step"] = c["step_s"]
        else:
            print(f"  {c['name']}: {c['status']} {c['reason']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--model", default="qwen3-tiny")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    runs = []
    for i in range(a.repeats):
        with tempfile.TemporaryDirectory(prefix="bringup-fast-start-") as d:
            runs.append(one_run(a, Path(d)))
        print(f"run {i + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in runs[-1].items() if ":" not in k), flush=True)
    names = ["compile-cold", "regional-cold", "compile-warm", "regional-warm"]
    med = {n: statistics.median(r[n] for r in runs) for n in names if all(n in r for r in runs)}
    step = {n: statistics.median(r[n + ":step"] for r in runs) for n in med}
    print(f"\n{a.device} {a.model}, batch {a.batch} x seq {a.seq}; time to first step (median of {a.repeats}):")
    for n in names:
        if n in med:
            print(f"  {n:14s} {med[n]:8.2f} s   steady step {step[n] * 1e3:8.2f} ms")
    warm = [n for n in ("compile-warm", "regional-warm") if n in med]
    if "compile-cold" not in med or not warm:
        print("ratio: not available (a case did not pass)")
        return 1
    best = min(warm, key=lambda n: med[n])
    ratio = med["compile-cold"] / med[best]
    print(f"ratio compile-cold / best warm ({best}): {ratio:.1f}x  (goal >= 5x){'' if ratio >= 5 else '  BELOW GOAL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
