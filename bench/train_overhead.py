"""Benchmark: the harness overhead of `bringup train` on the steady step.

    .venv/bin/python bench/train_overhead.py [--device cpu] [--model qwen3-tiny] [--mode eager]
                                             [--steps 20] [--batch 4] [--seq 256] [--rounds 3]

Same process, same model, same data: bringup's own loop (bringup.train.loop.train, which the train
suite's cases run: per-step device timer, loss kept on the device, compile-metric snapshots) against a
bare hand-written loop (forward, backward, AdamW step, zero_grad; one wall-clock span over the same
steady steps, one synchronize at the end). Both arms are compared by their MEAN steady step (bringup
reports a median, which is kinder to it; printed too). Rounds alternate (bringup, bare, bare, bringup, ...)
so load drifts hit both arms; the medians over rounds are compared. Ratio = bringup / bare, goal <= 1.02.
Numbers from a loaded machine are not figures: re-run on a quiet one.
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

from bringup.device import Device, parse_dtype, resolve_device  # noqa: E402
from bringup.models import lm  # noqa: E402
from bringup.train import loop  # noqa: E402
from bringup.train.spec import TrainSpec  # noqa: E402


def bare(spec: TrainSpec, device: Device) -> float:
    """A hand-written loop: the steady steps' wall time / their count."""
    model = lm.build_model(spec.model, list(spec.overrides), device.torch_device, parse_dtype(spec.dtype), spec.seed)
    model = lm.apply_mode(model, spec.mode, spec.backend)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    data = lm.synthetic_batches(lm.vocab_size(model), spec.batch, spec.seq, spec.steps, loop.DATA_SEED, True)
    batches = [b.to(device.torch_device) for b in data]
    for tokens in batches[: spec.warmup]:  # the same warm-up bringup leaves out of its median
        model(input_ids=tokens, labels=tokens).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    device.synchronize()
    t0 = time.perf_counter()
    for tokens in batches[spec.warmup :]:
        model(input_ids=tokens, labels=tokens).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    device.synchronize()
    return (time.perf_counter() - t0) / (spec.steps - spec.warmup)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--model", default="qwen3-tiny")
    ap.add_argument("--mode", default="eager", choices=lm.MODES)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    device = resolve_device(a.device)
    spec = TrainSpec(
        model=a.model,
        mode=a.mode,
        dtype=a.dtype,
        steps=a.steps,
        warmup=a.warmup,
        batch=a.batch,
        seq=a.seq,
        cache="cold" if a.mode != "eager" else "none",
    )
    ours: list[float] = []
    reported: list[float] = []
    theirs: list[float] = []
    for i in range(a.rounds):
        # the order inside a round flips every round, so neither arm always runs first (allocator and
        # cache state, clock ramps)
        if i % 2:
            theirs.append(bare(spec, device))
        out = loop.train(spec, device, check_fallbacks=False)
        ours.append(statistics.fmean(out.step_s[spec.warmup :]))
        reported.append(out.steady_s(spec.warmup))
        if not i % 2:
            theirs.append(bare(spec, device))
        print(
            f"round {i + 1}: bringup mean step {ours[-1] * 1e3:.2f} ms (reported median {reported[-1] * 1e3:.2f}),"
            f" bare loop mean step {theirs[-1] * 1e3:.2f} ms",
            flush=True,
        )
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(
        f"\n{device.name} {a.model} {a.mode} {a.dtype}, batch {a.batch} x seq {a.seq}, {a.steps} steps "
        f"({a.warmup} warm-up), {a.rounds} rounds; medians over rounds:"
    )
    print(f"  bringup mean steady step:     {statistics.median(ours) * 1e3:.2f} ms")
    print(f"  bringup reported (median):    {statistics.median(reported) * 1e3:.2f} ms")
    print(f"  bare loop mean steady step:   {statistics.median(theirs) * 1e3:.2f} ms")
    print(f"ratio bringup / bare: {ratio:.3f}  (goal <= 1.02){'' if ratio <= 1.02 else '  ABOVE GOAL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
