"""Benchmark: how fast the command line answers `--help` and an argument error, as ratios in one run.

    .venv/bin/python bench/cli_latency.py [--repeats 15] [--json FILE]

Runs, interleaved round by round so that a load change on the (shared) machine hits every command alike,
each as a fresh process:

    python -c pass                        the interpreter's floor
    python -c "import torch"              what every answer used to pay before a word was printed
    bringup --help
    bringup smoke --help
    bringup smoke --devcie cpu            a typo: one line, exit 2

and prints per command the median and min wall seconds, and the median's ratio to `python -c pass`.
`bringup` is the console script next to this interpreter (the one `pip install` writes). The machine's
load average is printed: numbers from a loaded machine are comparisons within the run, not figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _bringup() -> list[str]:
    script = Path(sys.executable).with_name("bringup")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bringup.cli"]


def commands() -> dict[str, tuple[list[str], int]]:
    """label -> (argv, expected exit code)."""
    b = _bringup()
    return {
        "python -c pass": ([sys.executable, "-c", "pass"], 0),
        "python -c 'import torch'": ([sys.executable, "-c", "import torch"], 0),
        "bringup --help": ([*b, "--help"], 0),
        "bringup smoke --help": ([*b, "smoke", "--help"], 0),
        "bringup smoke --devcie cpu": ([*b, "smoke", "--devcie", "cpu"], 2),
    }


# Bytecode caches are written and read as an installed package has them (pip compiles at install): a
# PYTHONDONTWRITEBYTECODE=1 in the caller's environment would compile every bringup module on every run.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(argv: list[str], rc: int) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    dt = time.perf_counter() - t0
    if p.returncode != rc:
        raise SystemExit(f"{' '.join(argv)}: exit {p.returncode}, expected {rc}: {p.stderr[-500:]}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15, help="rounds (default 15)")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the table as JSON")
    a = ap.parse_args()
    cmds = commands()
    for argv, rc in cmds.values():  # warm the file cache: the first run of each reads from disk
        once(argv, rc)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    load0 = os.getloadavg()[0]
    for _ in range(a.repeats):
        for label, (argv, rc) in cmds.items():
            times[label].append(once(argv, rc))
    load1 = os.getloadavg()[0]
    floor = statistics.median(times["python -c pass"])
    rows = []
    print(f"{'command':32} {'median s':>9} {'min s':>7} {'x python':>9}   ({a.repeats} rounds)")
    for label, ts in times.items():
        med = statistics.median(ts)
        rows.append(
            {
                "command": label,
                "median_s": round(med, 4),
                "min_s": round(min(ts), 4),
                "ratio_to_python": round(med / floor, 2),
            }
        )
        print(f"{label:32} {med:9.3f} {min(ts):7.3f} {med / floor:9.1f}")
    print(f"load average (1 min): {load0:.2f} before, {load1:.2f} after; cores: {os.cpu_count()}")
    if a.json:
        Path(a.json).write_text(json.dumps({"repeats": a.repeats, "load": [load0, load1], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
