"""Benchmark: `bringup port` scan speed, with the byte-level pre-filter vs parsing every file.

    .venv/bin/python bench/port_scan.py [PATH] [--limit 80] [--repeats 3]

PATH defaults to the installed timm package (a real, mostly device-agnostic codebase: most files
mention no CUDA construct). "filtered" is what `bringup port` does: files without a CUDA hint are not
parsed. "full" runs the libcst pass (parse + name resolution) on every file. Both arms scan the same
first --limit files and must report the same findings (checked). Arms alternate so machine load
drifts hit both; medians are printed with the ratio full/filtered and files/s of each arm.
Numbers from a loaded machine are not figures: re-run quietly.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bringup.port.codemod import may_have_findings, run_module  # noqa: E402


def one_pass(files: list[tuple[Path, str, bytes]], prefilter: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    hits = 0
    for _path, text, data in files:
        if prefilter and not may_have_findings(data):
            continue
        try:
            hits += len(run_module(text, None, fix=False).hits)
        except Exception:  # unparsable: same in both arms
            pass
    return time.perf_counter() - t0, hits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=None)
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if a.path is None:
        import importlib.util

        spec = importlib.util.find_spec("timm")  # located, not imported
        assert spec is not None and spec.submodule_search_locations, "timm is not installed: give a PATH"
        root = Path(next(iter(spec.submodule_search_locations)))
    else:
        root = Path(a.path)
    files = []
    for p in sorted(root.rglob("*.py"))[: a.limit]:
        data = p.read_bytes()
        try:
            files.append((p, data.decode(), data))
        except UnicodeDecodeError:
            continue
    hinted = sum(may_have_findings(d) for _, _, d in files)
    print(f"{len(files)} files under {root}, {hinted} with a CUDA hint")
    times: dict[str, list[float]] = {"filtered": [], "full": []}
    found: dict[str, set[int]] = {"filtered": set(), "full": set()}
    for _ in range(a.repeats):
        for arm in ("filtered", "full"):
            dt, hits = one_pass(files, prefilter=arm == "filtered")
            times[arm].append(dt)
            found[arm].add(hits)
    if found["filtered"] != found["full"]:
        print(f"MISMATCH: the pre-filter lost findings: {found}")
        return 1
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in ("filtered", "full"):
        print(f"{k:>9}: median {med[k]:.2f} s  ({len(files) / med[k]:.1f} files/s)  runs {times[k]}")
    print(f"ratio full/filtered: {med['full'] / med['filtered']:.2f}x  (findings: {found['full'].pop()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
