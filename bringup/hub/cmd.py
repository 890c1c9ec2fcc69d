"""`bringup hub`: the Hub sweep's steps that need no device.

    bringup hub fetch  --source hub-search:... | hub-list:FILE [--limit N] [--filter RE]   list + fetch configs
    bringup hub plan   --source ... [--json FILE]        ids -> signatures, without running anything
    bringup hub export --out FILE [--source ...]          the index (or a source's ids) as one .jsonl.gz file
    bringup hub import FILE                               merge an export into this machine's index
    bringup hub fields MODEL_TYPE                         where a type's signature fields come from
    bringup hub csv RUN --out FILE                        every id of a stored sweep with its outcome

Every step takes --hub-index (default hub-index.db beside --db); fetch and plan also --hub-workers,
--hub-rate and --hub-refresh (plan.py). On a cluster without the Hub: `hub export` where the Hub is
reachable, copy the file, `hub import` there, then `zoo --source ...` with HF_HUB_OFFLINE=1 plans from it.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.errors import BadInput, user_regex
from bringup.hub.flags import DEFAULT_WORKERS, HubFetch
from bringup.options import CommandOptions, add_filter, add_limit, measured, not_measured, positive_int
from bringup.store import Store

ACTIONS = ("fetch", "plan", "export", "import", "fields", "csv")


@dataclass(frozen=True)
class HubOptions(CommandOptions):
    """`bringup hub`'s options: every action's dests (add_arguments'; plan's --json is Options.common's)."""

    hub_action: str | None = measured(None)
    hub_index: str | None = not_measured(None, "a cache of the Hub's listings and configs")
    source: str | None = measured(None)
    limit: int | None = measured(None)
    filter: str | None = measured(None)
    hub_workers: int = not_measured(DEFAULT_WORKERS, "concurrent config fetches")
    hub_rate: str | None = not_measured(None, "requests per window to the Hub")
    hub_refresh: bool = not_measured(False, "the same query listed again: the Hub as it is now")
    out: str | None = not_measured(None)
    file: str | None = measured(None)
    model_type: str | None = measured(None)
    run: str | None = measured(None)

    def fetch(self, db: str) -> HubFetch:
        """What the fetch reads (bringup/hub/plan.py), the index beside `db`."""
        return HubFetch(
            str(self.source),
            self.limit,
            self.filter,
            self.hub_index,
            self.hub_workers,
            self.hub_rate,
            self.hub_refresh,
            db,
        )


OPTIONS = HubOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="hub_action", metavar="ACTION", parser_class=type(p))
    for name, help_ in (
        ("fetch", "list a source and fetch its configs into the index"),
        ("plan", "ids -> signatures (nothing runs)"),
        ("export", "write the index as one .jsonl.gz file"),
        ("import", "merge an exported file into the index"),
        ("fields", "a model type's signature fields"),
        ("csv", "every id of a stored Hub sweep, with its outcome"),
    ):
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.add_argument("--hub-index", metavar="FILE", default=None, help="the Hub index (default beside --db)")
        if name in ("fetch", "plan", "export"):
            sp.add_argument(
                "--source",
                required=name != "export",
                default=None,
                help="hub-search:[TEXT][,library=L][,task=T][,author=A][,sort=...] | hub-list:FILE",
            )
            add_limit(sp, "ids")
            add_filter(sp, "ids")
        if name in ("fetch", "plan"):
            sp.add_argument("--hub-workers", type=positive_int, default=DEFAULT_WORKERS, metavar="N")
            sp.add_argument("--hub-rate", default=None, metavar="API,RESOLVE")
            sp.add_argument("--hub-refresh", action="store_true")
        if name == "plan":
            sp.add_argument("--json", default=None, metavar="FILE", help="write the plan (ids, signatures)")
        if name in ("export", "csv"):
            sp.add_argument("--out", required=True, metavar="FILE")
        if name == "import":
            sp.add_argument("file", metavar="FILE")
        if name == "fields":
            sp.add_argument("model_type", metavar="MODEL_TYPE")
        if name == "csv":
            sp.add_argument("run", metavar="RUN_ID")


def _entries(args: HubOptions, db: str) -> list[Any]:
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help

    if not hub_plan.is_sweep(args.source):
        raise BadInput(f"hub {args.hub_action}: --source {args.source!r}: use hub-search:QUERY or hub-list:FILE")
    if args.limit is not None and args.limit < 1:
        raise BadInput(f"--limit must be >= 1, got {args.limit}")
    fetch = args.fetch(db)
    hub_plan.check_options(fetch)
    pattern = None if args.filter is None else user_regex(args.filter, "--filter")
    return hub_plan.fetch_entries(fetch, pattern)


def main(sess: Any) -> int:
    # The Hub code (and torch, through bringup.models) is imported by the actions, where work starts:
    # `bringup hub --help` and a mistyped option answer without it.
    args = sess.options.of(HubOptions)
    if args.hub_action is None:
        raise BadInput(f"hub: name an action: {', '.join(ACTIONS)}")
    _ACTIONS[args.hub_action](sess, args)
    return 0


def _fields(sess: Any, args: HubOptions) -> None:
    from bringup.hub import signature as sg  # lazy: torch-free --help

    try:
        info = sg.explain(args.model_type)
    except KeyError:
        raise BadInput(f"hub fields: no model type {args.model_type!r} in this transformers") from None
    sess.console.print_json(json.dumps(info))


def _csv(sess: Any, args: HubOptions) -> None:
    from bringup.hub import summary as zs  # lazy: torch-free --help

    with Store(sess.db, create=False) as st:
        st.get_run(args.run)
        rows = st.hub_ids(args.run)
        if not rows:
            raise BadInput(f"hub csv: run {args.run} is not a Hub sweep (no ids stored)")
        cov = zs.coverage(rows, st.results(args.run))
    sess.console.print(f"{len(rows)} id(s) -> {zs.write_csv(Path(args.out), cov['per_id'])}", highlight=False)


def _import(sess: Any, args: HubOptions) -> None:
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help
    from bringup.hub.index import HubIndex  # lazy: torch-free --help

    with HubIndex(hub_plan.index_path(args.hub_index, str(sess.db))) as index:
        n = index.import_(args.file)
        sess.console.print(f"imported {n} row(s) into {index.path}; now: {index.counts()}", highlight=False)


def _export(sess: Any, args: HubOptions) -> None:
    from bringup.files import check_output_path  # lazy: torch-free --help
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help
    from bringup.hub.index import HubIndex  # lazy: torch-free --help

    db = str(sess.db)
    check_output_path(args.out, "--out")
    keys = None
    if args.source:
        keys = [e.key for e in _entries(args, db)]
    with HubIndex(hub_plan.index_path(args.hub_index, db)) as index:
        n = index.export(args.out, keys)
    sess.console.print(f"exported {n} row(s) to {args.out}", highlight=False)


def _fetch(sess: Any, args: HubOptions) -> None:
    entries = _entries(args, str(sess.db))
    sess.console.print(
        "by status: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(e.status for e in entries).items())),
        highlight=False,
    )


def _plan(sess: Any, args: HubOptions) -> None:
    from bringup.files import write_json  # lazy: torch-free --help
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help

    con = sess.console
    plan = hub_plan.plan_ids(_entries(args, str(sess.db)))
    by_arch = Counter(plan.sigs[s].architecture for s in plan.sigs)
    con.print(
        f"{len(plan.rows)} id(s) -> {len(plan.sigs)} signature(s) ({plan.signed} config(s) signed); config "
        f"failures: {hub_plan.failure_line(plan) or 'none'}",
        highlight=False,
    )
    con.print("signatures by architecture: " + ", ".join(f"{a} {n}" for a, n in by_arch.most_common()), highlight=False)
    if sess.options.common.json:
        data = {
            "ids": plan.rows,
            "signatures": {
                s: {
                    "architecture": plan.sigs[s].architecture,
                    "task": plan.sigs[s].task,
                    "ids": len(plan.members[s]),
                    "downloads": plan.downloads(s),
                    "config": plan.sigs[s].config,
                }
                for s in plan.order()
            },
        }
        write_json(sess.options.common.json, data)


_ACTIONS = {"fields": _fields, "csv": _csv, "import": _import, "export": _export, "fetch": _fetch, "plan": _plan}
