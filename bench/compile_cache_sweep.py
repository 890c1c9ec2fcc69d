"""Benchmark: what checking a compile cache for a kill's damage costs a worker's start (runner/compile_cache.py).

    .venv/bin/python bench/compile_cache_sweep.py [--dirs 1296] [--per-dir 16] [--repeats 5]

Builds a synthetic inductor cache in a temporary directory: `--dirs` two-character directories (inductor's
layout; 36^2 = 1296 is the most it makes), each with `--per-dir` kernel libraries (hard links to one real
ELF library, so every header read is a real one) and as many `.cpp` sources, plus fxgraph-style nested
directories. Then times, as medians of `--repeats`:
  - a full sweep (every library's header read: the first sweep of a cache, or `everything=True`);
  - the sweep a worker start does when nothing changed since the last one (directories stat'ed, none read);
  - the same after one compile added a library (one directory read).
Figures depend on the machine and on the page cache (warm here: the same files were just written).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bringup.runner import compile_cache


def build(root: Path, dirs: int, per_dir: int) -> int:
    import _ctypes

    lib = Path(_ctypes.__file__)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    names = [a + b for a in alphabet for b in alphabet][:dirs]
    n = 0
    for d in names:
        sub = root / d
        sub.mkdir(parents=True)
        for i in range(per_dir):
            key = f"c{d}{i:04d}kernel"
            os.link(lib, sub / f"{key}.so")
            (sub / f"{key}.cpp").write_text("//\n")
            n += 1
        graph = root / "fxgraph" / d / f"f{d}graph"
        graph.mkdir(parents=True)
        (graph / "entry").write_bytes(b"\x80\x04N.")
    (root / "locks").mkdir()
    past = time.time() - 3600  # the cache as a later day finds it: nothing changed in the last hour
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        os.utime(d, (past, past))
    return n


def timed(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dirs", type=int, default=1296)
    ap.add_argument("--per-dir", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ind"
        n = build(root, args.dirs, args.per_dir)
        full = timed(lambda: compile_cache.sweep([root], everything=True), args.repeats)
        past = time.time() - 3600
        os.utime(root, (past, past))

        def unchanged() -> None:
            rep = compile_cache.sweep([root])  # the last one wrote the stamp: now
            assert rep.checked == 0, rep.checked
            os.utime(root, (past, past))  # the stamp file's own write changed the root

        quiet = timed(unchanged, args.repeats)
        one = root / "zz" / "czznew.so"

        def one_new() -> None:
            one.unlink(missing_ok=True)
            one.write_bytes(b"\x7fELF" + bytes(60))
            rep = compile_cache.sweep([root])
            assert rep.checked == args.per_dir + 1, rep.checked
            os.utime(root, (past, past))

        changed = timed(one_new, args.repeats)
    print(f"synthetic inductor cache: {args.dirs} dirs, {n} kernel libraries (+ as many sources, {args.dirs} graphs)")
    print(f"  full sweep (every library read)        {full * 1e3:8.1f} ms")
    print(f"  a worker start, nothing changed        {quiet * 1e3:8.1f} ms")
    print(f"  a worker start, one library added      {changed * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
