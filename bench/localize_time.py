"""Benchmark: what localizing a model costs next to sweeping it, per model, on cpu.

    .venv/bin/python bench/localize_time.py [--models llama,gpt2,qwen3] [--backend perturb_act_aot_eager]

Per model, each in a fresh directory (its own result db and compile cache), the case's own wall
seconds (`wall_s` in the JSON contract, worker start-up excluded) of:
  sweep      `bringup --device cpu zoo --filter ^MODEL$` (reference, trusted run, eager, compiled, steps)
  eager      `bringup --device cpu localize MODEL` (every module vs float64; nothing diverges on cpu, so
             every module output is compared: the whole first stage)
  regional   `... localize MODEL --compile-backend BACKEND` with tests/zoo/perturb_backend.py's buggy
             compiler: eager stage + one compile per region tried until the deepest divergent module
Prints one row per model and the ratios localize / sweep. Figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wall(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as d:
        e = {**os.environ, **env, "TORCHINDUCTOR_CACHE_DIR": str(Path(d) / "ind"), "PYTHONWARNINGS": "ignore"}
        subprocess.run(
            [sys.executable, "-m", "bringup.cli", *args, "--json", "o.json"],
            cwd=d,
            env=e,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        data = json.loads((Path(d) / "o.json").read_text())
        c = data["cases"][0]
        return float(c["wall_s"]), c["status"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="llama,gpt2,qwen3")
    ap.add_argument("--backend", default="perturb_act_aot_eager")
    a = ap.parse_args()
    env = {"PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "zoo"), str(REPO)])}
    head = ("model", "sweep s", "eager loc s", "regional s", "eager/sweep", "regional/sweep")
    print(f"{head[0]:10} {head[1]:>8} {head[2]:>12} {head[3]:>11} {head[4]:>12} {head[5]:>15}")
    for m in a.models.split(","):
        s, ss = wall(["--device", "cpu", "zoo", "--filter", f"^{m}$"], env)
        e, es = wall(["--device", "cpu", "localize", m], env)
        r, rs = wall(
            ["--device", "cpu", "--import", "perturb_backend", "localize", m, "--compile-backend", a.backend], env
        )
        print(f"{m:10} {s:8.1f} {e:12.1f} {r:11.1f} {e / s:12.2f} {r / s:15.2f}   ({ss}, {es}, {rs})", flush=True)


if __name__ == "__main__":
    main()
