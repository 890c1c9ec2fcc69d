"""How long `bringup triage` takes on a 30-model sweep, localize, PyTorch's minifier and the repro checks included.

The sweep: 30 transformers causal LMs (tiny configs) on the test device with two injected causes, a silu 1% off
(`BRINGUP_TESTDEV_FAULTS=scale:silu=1.01`: the silu models' numbers) and a compiler with no lowering for gelu
(tests/triage/lowering_gap.py, `TRIAGE_LOWERING_GAP=gelu`: the gelu models' compile); the other models fall back
to the CPU (testdev's fallback) and two hit a real gap of testdev's fallback (histc on int). Then the triage of
that run, timed (`--workers 2`: the two cores of this project's machines).

    python bench/triage_time.py [--keep DIR] [--workers 2] [--sweep-db DB]

`--sweep-db DB` triages the latest run of an existing store instead of sweeping first. Prints the sweep's and the
triage's wall time, the groups and their repros' verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = (
    "llama mistral qwen2 qwen3 gemma gemma2 phi phi3 gpt2 gpt_neox gptj falcon opt bloom mpt starcoder2 stablelm olmo "
    "olmo2 granite cohere codegen biogpt xglm persimmon mixtral qwen2_moe gpt_bigcode mamba smollm3"
).split()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sweep-db", default=None)
    a = ap.parse_args()
    work = Path(a.keep or tempfile.mkdtemp(prefix="triage-time-"))
    work.mkdir(parents=True, exist_ok=True)
    db = Path(a.sweep_db) if a.sweep_db else work / "b.db"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "tests" / "triage"),
        "BRINGUP_TESTDEV_FAULTS": "scale:silu=1.01",
        "TRIAGE_LOWERING_GAP": "gelu",
    }
    bringup = [sys.executable, "-m", "bringup.cli", "--db", str(db), "--import", "bringup.testdev"]
    bringup += ["--import", "lowering_gap", "--workers", str(a.workers)]
    sweep_s = None
    if not a.sweep_db:
        t0 = time.monotonic()
        regex = f"^({'|'.join(MODELS)})$"
        cmd = [*bringup, "--device", "testdev", "zoo", "--filter", regex, "--steps", "2", "--noise-seeds", "0"]
        subprocess.run([*cmd, "--compile-backend", "lowering_gap"], cwd=work, env=env, capture_output=True)
        sweep_s = time.monotonic() - t0
    t0 = time.monotonic()
    p = subprocess.run(
        [*bringup, "triage", "--out", str(work / "triage")], cwd=work, env=env, text=True, capture_output=True
    )
    triage_s = time.monotonic() - t0
    block = json.loads((work / "triage" / "triage.json").read_text())
    groups = block["groups"]
    print(f"sweep: {len(MODELS)} models, " + (f"{sweep_s:.0f} s" if sweep_s is not None else "(given)"))
    n = block["cases_signed"]
    print(f"triage: {triage_s:.0f} s wall (exit {p.returncode}), {len(groups)} groups behind {n} cases")
    for g in groups:
        rep = (g.get("repro") or {}).get("verdict", "-")
        print(f"  {g['reach']['models']:>3} models  {rep:<10} {g['title'][:100]}")
    print(f"results in {work}")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
