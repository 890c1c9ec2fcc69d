"""`bringup export RUN --out bundle.json`: a run as a portable bundle (the format: bringup/bundle.py)."""

from __future__ import annotations

import argparse
from typing import Any

from bringup.bundle import make_bundle
from bringup.store import Store


# ---- `bringup export` ----------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="?", default=None, help="run id (default: the latest run in --db)")
    p.add_argument("--out", required=True, metavar="FILE", help="bundle path (JSON)")


def main(sess: Any) -> int:
    from bringup.files import atomic_write_text, check_output_path, dumps

    args = sess.args
    check_output_path(args.out, "--out")
    with Store(sess.db, create=False) as st:
        run_id = args.run or st.latest_run_id()
        data = make_bundle(st, run_id)
    atomic_write_text(args.out, dumps(data))
    sess.console.print(f"exported run {run_id} ({len(data['cases'])} cases) to {args.out}", highlight=False)
    return 0
