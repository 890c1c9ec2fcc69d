"""Time a command and append its row to bench/results/figures/ (docs/figures.md), so `make docs` shows it.

    .venv/bin/python bench/time_command.py --id demo.fresh_clone --fresh-clone -- make demo
    .venv/bin/python bench/time_command.py --id test.fresh_clone --fresh-clone -- make test
    make docs            # every marker of that id, in README.md and docs/, shows the new row

The command runs once (`--fresh-clone`: in a `git clone` of this repository's HEAD in a temporary directory,
so a fresh clone's set-up is included and nothing uncommitted is; else here), and its wall time and its
children's CPU time become the row's values `wall` and `cpu` (seconds). The rest of the row: the id's last
`what` and `text` (a new id needs `--what` and `--text`), today's date (UTC), the machine (this project's
2-core cpu machine when the cpu count is 2, else the cpu model and count, labelled so), the conditions (quiet
when the 1-minute load average before the run was under `--quiet-load` per core, else the load, labelled so:
every doc that shows the figure then says it), the command as typed (after `git clone REPO` with
`--fresh-clone`), the commit it ran (the clone's HEAD), and the load before and after in `source`. A command
that exits with a code outside `--ok-codes` appends nothing (exit 1): a failed run is not a figure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO / "bench" / "results" / "figures"
REFERENCE_MACHINE = "this project's 2-core cpu machine"  # docs/figures/render.py's


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def last_row(rows_dir: Path, fid: str) -> tuple[Path | None, dict[str, Any] | None]:
    """The file holding `fid` and its last row there (None, None for a new id)."""
    found: tuple[Path | None, dict[str, Any] | None] = (None, None)
    for f in sorted(rows_dir.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip() and (d := json.loads(line))["id"] == fid:
                found = (f, d)
    return found


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def run_timed(argv: list[str], cwd: Path) -> tuple[int, float, float]:
    """(exit code, wall s, children's CPU s) of one run of argv in cwd."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(argv, cwd=cwd).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, wall, cpu


def make_row(
    a: argparse.Namespace, prev: dict[str, Any] | None, wall: float, cpu: float, commit: str
) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    load_before, load_after = a.load_before, os.getloadavg()[0]
    machine = REFERENCE_MACHINE if cores == 2 else f"{cpu_model()}, {cores} cores"
    quiet = load_before < a.quiet_load * cores
    label = None
    if machine != REFERENCE_MACHINE:
        label = f"on {machine}"
    if not quiet:
        label = (label + ", " if label else "") + f"at load {load_before:.1f}"
    cmd = ("git clone REPO && cd bringup && " if a.fresh_clone else "") + shlex.join(a.command)
    return {
        "id": a.id,
        "what": a.what or (prev or {}).get("what"),
        "values": {"wall": [round(wall), "s"], "cpu": [round(cpu), "s"]},
        "text": a.text or (prev or {}).get("text"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": machine,
        "conditions": "quiet" if quiet else f"load average {load_before:.1f} before the run",
        "label": label,
        "command": cmd,
        "commit": commit,
        "raw": None,
        "source": f"bench/time_command.py on {cpu_model()}, {cores} cores, {platform.system()} "
        f"{platform.release()}; load average {load_before:.2f} before, {load_after:.2f} after",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--id", required=True, help="the figure's id (its newest row is the one the docs show)")
    ap.add_argument("--what", help="what was measured (default: the id's last row's)")
    ap.add_argument("--text", help="the row's sentence, e.g. '{wall:dur} {where} ({date})' (default: the last row's)")
    ap.add_argument("--topic", help="rows file bench/results/figures/TOPIC.jsonl (default: the id's, else its prefix)")
    ap.add_argument("--fresh-clone", action="store_true", help="run in a fresh `git clone` of this repository's HEAD")
    ap.add_argument("--ok-codes", default="0", help="exit codes that count as a finished run (default 0)")
    ap.add_argument("--quiet-load", type=float, default=0.25, help="quiet below this 1-minute load per core (0.25)")
    ap.add_argument("--rows-dir", type=Path, default=ROWS, help=argparse.SUPPRESS)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    a = ap.parse_args(argv)
    a.command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not a.command:
        ap.error("no command to time (give it after --)")
    path, prev = last_row(a.rows_dir, a.id)
    if prev is None and not (a.what and a.text):
        ap.error(f"{a.id} has no row yet: give --what and --text")
    path = path or a.rows_dir / f"{a.topic or a.id.split('.')[0]}.jsonl"
    a.load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bringup-time-") as tmp:
        cwd = REPO
        if a.fresh_clone:
            cwd = Path(tmp) / "bringup"
            subprocess.run(["git", "clone", "--quiet", str(REPO), str(cwd)], check=True)
        commit = _git("rev-parse", "--short", "HEAD", cwd=cwd)
        rc, wall, cpu = run_timed(a.command, cwd)
    if str(rc) not in a.ok_codes.split(","):
        print(f"time_command: `{shlex.join(a.command)}` exited {rc}: no row written", file=sys.stderr)
        return 1
    row = make_row(a, prev, wall, cpu, commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{a.id}: {wall:.0f} s wall, {cpu:.0f} s CPU ({row['conditions']}); appended to {path}; run `make docs`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
