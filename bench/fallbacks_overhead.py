"""Benchmark: what the fallback detector costs, and what the testdev CPU fallback costs.

    .venv/bin/python bench/fallbacks_overhead.py [--device testdev|cpu] [--steps 10] [--rounds 5]

One SGD step of a small MLP (+ softmax cross-entropy), timed (a) bare, (b) under
FallbackDetector (dispatch mode + profiler on non-cpu devices), alternating rounds so load drifts hit
both; prints the medians and the ratio detector / bare. With --device testdev it also prints the
ratio testdev / cpu for the bare step (the price of the CPU fallback's copies). These are ratios
from whatever machine runs this: re-run on a quiet one before quoting them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402


def make_step(dev: torch.device):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256).to(dev), torch.randint(0, 10, (64,)).to(dev)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def timed(fn, steps: int, sync) -> float:  # type: ignore[no-untyped-def]
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    sync()
    return (time.perf_counter() - t0) / steps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="testdev")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.device.startswith("testdev"):
        import bringup.testdev  # noqa: F401
    from bringup.checks.fallbacks import FallbackDetector
    from bringup.device import resolve_device

    dev = resolve_device(args.device)
    step = make_step(dev.torch_device)
    step()  # warm up

    def detected() -> None:
        with FallbackDetector(dev):
            step()

    bare, det = [], []
    for _ in range(args.rounds):
        bare.append(timed(step, args.steps, dev.synchronize))
        det.append(timed(detected, args.steps, dev.synchronize))
    b, d = statistics.median(bare), statistics.median(det)
    print(f"{dev.name}: bare step {b * 1e3:.2f} ms, under FallbackDetector {d * 1e3:.2f} ms, ratio {d / b:.2f}")
    if not dev.is_cpu:
        cpu_step = make_step(torch.device("cpu"))
        cpu_step()
        c = statistics.median(timed(cpu_step, args.steps, lambda: None) for _ in range(args.rounds))
        print(f"bare step: cpu {c * 1e3:.2f} ms, {dev.name} {b * 1e3:.2f} ms, ratio {dev.name}/cpu {b / c:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
