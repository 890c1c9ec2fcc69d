"""Benchmark of the history page's move rule (bringup/report/trend.py): how often it calls noise a move,
and how often it catches a real step at the run it happened.

    .venv/bin/python bench/history_rule.py [--trials 2000] [--runs 30] [--seed 0]

Synthetic lines of `--runs` nightly values around 100: normal noise (3%, 5%) and right-skewed lognormal
noise (timings on a shared machine), then the same lines with a step of -10% / -20% / -40% at run 20.
Prints, per noise model: false moves and one-run outliers per judged point (no step), and the share of
lines where the step was flagged `moved` at run 20 exactly. Pure arithmetic: the numbers do not depend on the machine.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bringup.report.trend import TIMING, find_moves  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    noises = {
        "normal 3%": lambda: 100 * (1 + 0.03 * rng.gauss(0, 1)),
        "normal 5%": lambda: 100 * (1 + 0.05 * rng.gauss(0, 1)),
        "lognormal 5%": lambda: 100 * rng.lognormvariate(0, 0.05),
    }
    at = 20
    print(f"rule: {TIMING.describe()}")
    print(f"{a.trials} lines of {a.runs} runs each; a step at run {at}")
    print(
        f"{'noise':<14} {'false moves/point':>18} {'outliers/point':>15} {'-10% caught':>12} {'-20% caught':>12}"
        f" {'-40% caught':>12}"
    )
    for name, draw in noises.items():
        false = outliers = judged = 0
        caught = {0.9: 0, 0.8: 0, 0.6: 0}
        for _ in range(a.trials):
            vals = [draw() for _ in range(a.runs)]
            moves = find_moves(vals)
            false += sum(m.kind == "moved" for m in moves)
            outliers += sum(m.kind == "outlier" for m in moves)
            judged += a.runs - TIMING.min_points
            for f in caught:
                stepped = vals[:at] + [v * f for v in vals[at:]]
                caught[f] += any(m.index == at and m.kind == "moved" for m in find_moves(stepped))
        print(
            f"{name:<14} {false / judged:>18.4f} {outliers / judged:>15.4f} "
            + " ".join(f"{caught[f] / a.trials:>12.2f}" for f in caught)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
