"""Benchmark: what the zoo's module check (bringup/checks/module_check.py) adds to a model's case, per
compile backend, on cpu.

    .venv/bin/python bench/module_check_cost.py [--models llama,gpt2,qwen3,test_resnet]
        [--backends eager,aot_eager,inductor] [--dtype bf16] [--device cpu|testdev] [--json FILE]

Per model and backend, in a fresh directory each (its own result db and a cold inductor cache), the
case's own seconds (`wall_s` of the JSON contract, worker start-up excluded) of
`bringup --device cpu zoo --filter ^MODEL$ --dtype DTYPE --compile-backend BACKEND` with
`--module-check on` and `off`, alternating arms, and the seconds the case itself accounts to the check
(`module_check_s`: the references, the judging and, for the compiled run, compiling each module alone).
On cpu the eager run is the trusted run and is not replayed against itself: what `eager` adds there is
the recording and the references the compiled check uses (with backend `eager` the "compiled" run is
dynamo with no compiler). Off cpu the eager replay and its judging come on top (`module_check_s` of a
testdev run shows them: `--device testdev`, the C++ test device, whose every non-native op runs through
the CPU fallback; inductor has no code generator for it, so use eager / aot_eager there). Figures depend
on the machine's load: ratios within one run.
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


DEVICES = {"cpu": ["--device", "cpu"], "testdev": ["--import", "bringup.testdev", "--device", "testdev"]}


def case(model: str, backend: str, dtype: str, check: str, device: str = "cpu") -> dict[str, object]:
    src = ["--source", "timm"] if model.startswith("test_") else []
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(d) / "ind"), "PYTHONWARNINGS": "ignore"}
        args = [
            *DEVICES[device],
            "zoo",
            *src,
            "--filter",
            f"^{model}$",
            "--dtype",
            dtype,
            "--compile-backend",
            backend,
            "--module-check",
            check,
            "--json",
            "o.json",
        ]
        subprocess.run(
            [sys.executable, "-m", "bringup.cli", *args], cwd=d, env=env, capture_output=True, text=True, timeout=3600
        )
        c = json.loads((Path(d) / "o.json").read_text())["cases"][0]
        return {
            "wall_s": float(c["wall_s"]),
            "status": c["status"],
            "module_check_s": c.get("module_check_s"),
            "modules_judged": c.get("modules_judged"),
            "reason": c.get("reason", "")[:160],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="llama,gpt2,qwen3,test_resnet")
    ap.add_argument("--backends", default="eager,aot_eager,inductor")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--device", choices=sorted(DEVICES), default="cpu")
    ap.add_argument("--json", default="module_check_cost.jsonl")
    a = ap.parse_args()
    out = Path(a.json)
    rows = []
    print("| model | backend | case s, check off | case s, check on | added s | check's own s | modules | status |")
    print("|---|---|---|---|---|---|---|---|")
    for m in a.models.split(","):
        for b in a.backends.split(","):
            off = case(m, b, a.dtype, "off", a.device)
            on = case(m, b, a.dtype, "on", a.device)
            row = {"model": m, "backend": b, "dtype": a.dtype, "device": a.device, "off": off, "on": on}
            rows.append(row)
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(
                f"| {m} | {b} | {off['wall_s']:.1f} | {on['wall_s']:.1f} | {on['wall_s'] - off['wall_s']:+.1f} | "
                f"{on['module_check_s']} | {on['modules_judged']} | {off['status']} / {on['status']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
