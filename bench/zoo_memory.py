"""Benchmark: the full-size memory preflight's prediction vs the measured peak, per model.

    .venv/bin/python bench/zoo_memory.py [--models ID,ID,...] [--batch 2] [--seq 64] [--dtype fp32]
                                         [--device cpu] [--keep DIR]

Runs `bringup zoo --source hub-top --size full --steps 1 --compile-backend aot_eager` on the chosen
catalogue entries (offline: HF_HUB_OFFLINE=1, seeded init) and prints, per model, the parameter count,
the preflight's predicted bytes (params + grads + AdamW + activations, models/memory.py), the measured
peak (cpu: peak RSS minus the RSS before building, so the runtime's own ~0.5 GB is not counted;
accelerators: max_memory_allocated) and measured / predicted. The measurement is of the eager run only
(the peak is read before the compiled run starts).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT = "google/bert_uncased_L-2_H-128_A-2,HuggingFaceTB/SmolLM2-135M,HuggingFaceTB/SmolLM2-360M"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--keep", default=None)
    a = ap.parse_args()
    root = Path(a.keep or tempfile.mkdtemp(prefix="zoo-memory-"))
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(root / "empty-cache"))
    print(f"{'model':42s} {'params':>9s} {'predicted':>10s} {'measured':>10s} {'meas/pred':>9s}")
    for mid in a.models.split(","):
        out = root / (mid.replace("/", "--") + ".json")
        cmd = [
            sys.executable,
            "-m",
            "bringup.cli",
            "--device",
            a.device,
            "zoo",
            "--source",
            "hub-top",
            "--filter",
            f"^{mid}$",
            "--size",
            "full",
            "--steps",
            "1",
            "--compile-backend",
            "aot_eager",
            "--batch",
            str(a.batch),
            "--seq",
            str(a.seq),
            "--dtype",
            a.dtype,
            "--json",
            str(out),
        ]
        subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        try:
            (c,) = json.loads(out.read_text())["cases"]
        except (OSError, ValueError):
            print(f"{mid:42s} (no result)")
            continue
        m = c.get("memory") or {}
        pred, meas = m.get("predicted_bytes"), m.get("measured_bytes")
        if not pred or not meas:
            print(f"{mid:42s} {c['status']}: {c['reason'][:80]}")
            continue
        print(f"{mid:42s} {c['params'] / 1e6:8.1f}M {pred / 2**20:9.0f}M {meas / 2**20:9.0f}M {meas / pred:9.2f}")


if __name__ == "__main__":
    main()
