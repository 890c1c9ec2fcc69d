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
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.errors import BadInput, user_regex
from bringup.hub.flags import DEFAULT_WORKERS, SWEEP_PREFIXES, HubFetch, parse_limits
from bringup.options import (
    CommandOptions,
    add_options,
    filter_flag,
    flag,
    limit_flag,
    measured,
    not_measured,
    positive_int,
)
from bringup.session import CommandSession

FETCH = ("source", "limit", "filter", "hub_workers", "hub_rate", "hub_refresh")  # what a fetch reads
# Each action: its one-line help and its fields (HubOptions', in field order; --hub-index is every action's).
ACTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "fetch": ("list a source and fetch its configs into the index", ("hub_index", *FETCH)),
    "plan": ("ids -> signatures (nothing runs)", ("hub_index", *FETCH, "json")),
    "export": ("write the index as one .jsonl.gz file", ("hub_index", "source", "limit", "filter", "out")),
    "import": ("merge an exported file into the index", ("hub_index", "file")),
    "fields": ("a model type's signature fields", ("hub_index", "model_type")),
    "csv": ("every id of a stored Hub sweep, with its outcome", ("hub_index", "out", "run")),
}
SOURCE_REQUIRED = ("fetch", "plan")  # export's --source is optional: without it, the whole index


@dataclass(frozen=True)
class HubOptions(CommandOptions):
    """`bringup hub`'s options: one class for every action, each field its flag; an action's parser takes its
    fields (ACTIONS; add_arguments). `check` refuses a bad fetch where the options are built."""

    hub_action: str | None = measured(None)
    hub_index: str | None = not_measured(
        None,
        "a cache of the Hub's listings and configs",
        flag("--hub-index", metavar="FILE", help="the Hub index (default beside --db)"),
    )
    source: str | None = measured(
        None, flag=flag("--source", help="hub-search:[TEXT][,library=L][,task=T][,author=A][,sort=...] | hub-list:FILE")
    )
    limit: int | None = measured(None, flag=limit_flag("ids"))
    filter: str | None = measured(None, flag=filter_flag("ids"))
    hub_workers: int = not_measured(
        DEFAULT_WORKERS, "concurrent config fetches", flag("--hub-workers", type=positive_int, metavar="N")
    )
    hub_rate: str | None = not_measured(
        None, "requests per window to the Hub", flag("--hub-rate", metavar="API,RESOLVE")
    )
    hub_refresh: bool = not_measured(
        False, "the same query listed again: the Hub as it is now", flag("--hub-refresh", action="store_true")
    )
    # plan's --json: the plan (ids, signatures), in the global --json's dest (the command's own, as bisect's --repeat)
    json: str | None = not_measured(None, flag=flag("--json", metavar="FILE", help="write the plan (ids, signatures)"))
    out: str | None = not_measured(None, flag=flag("--out", required=True, metavar="FILE"))
    file: str | None = measured(None, flag=flag("file", metavar="FILE"))
    model_type: str | None = measured(None, flag=flag("model_type", metavar="MODEL_TYPE"))
    run: str | None = measured(None, flag=flag("run", metavar="RUN_ID"))

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

    def check(self) -> None:
        """The fetch's options (fetch, plan; export with --source), checked where they are built: a sweep
        source, --limit, --hub-rate, --filter (--hub-workers is checked by its type)."""
        if self.hub_action not in ("fetch", "plan") and not (self.hub_action == "export" and self.source):
            return
        if not str(self.source).startswith(SWEEP_PREFIXES):
            raise BadInput(f"hub {self.hub_action}: --source {self.source!r}: use hub-search:QUERY or hub-list:FILE")
        if self.limit is not None and self.limit < 1:
            raise BadInput(f"--limit must be >= 1, got {self.limit}")
        parse_limits(self.hub_rate)
        if self.filter is not None:
            user_regex(self.filter, "--filter")


OPTIONS = HubOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="hub_action", metavar="ACTION", parser_class=type(p))
    for name, (help_, fields) in ACTIONS.items():
        sp = sub.add_parser(name, help=help_, description=help_)
        add_options(sp, HubOptions, fields, required=("source",) if name in SOURCE_REQUIRED else ())


def _entries(args: HubOptions, db: str) -> list[Any]:
    """The source's entries, fetched (the options were checked where they were built: HubOptions.check)."""
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help

    pattern = None if args.filter is None else re.compile(args.filter)
    return hub_plan.fetch_entries(args.fetch(db), pattern)


def main(sess: CommandSession) -> int:
    """`bringup hub ACTION`: one function per action (the Hub code, and torch through bringup.models, imported
    in each, where work starts: `bringup hub --help` and a mistyped option answer without it)."""
    args = sess.options.of(HubOptions)
    action = args.hub_action
    if action is None:
        raise BadInput(f"hub: name an action: {', '.join(ACTIONS)}")
    return ACTION_MAINS[action](sess, args)


def _fields(sess: CommandSession, args: HubOptions) -> int:
    from bringup.hub import signature as sg  # lazy: torch-free --help

    assert args.model_type is not None  # a positional of the `fields` parser
    try:
        info = sg.explain(args.model_type)
    except KeyError:
        raise BadInput(f"hub fields: no model type {args.model_type!r} in this transformers") from None
    sess.console.print_json(json.dumps(info))
    return 0


def _csv(sess: CommandSession, args: HubOptions) -> int:
    from bringup.hub import summary as zs  # lazy: torch-free --help
    from bringup.store import Store  # lazy: torch-free --help

    assert args.run is not None and args.out is not None  # required by the `csv` parser
    with Store(sess.db, create=False) as st:
        st.get_run(args.run)
        rows = st.hub_ids(args.run)
        if not rows:
            raise BadInput(f"hub csv: run {args.run} is not a Hub sweep (no ids stored)")
        cov = zs.coverage(rows, st.results(args.run))
    sess.console.print(f"{len(rows)} id(s) -> {zs.write_csv(Path(args.out), cov['per_id'])}", highlight=False)
    return 0


def _import(sess: CommandSession, args: HubOptions) -> int:
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help
    from bringup.hub.index import HubIndex  # lazy: torch-free --help

    assert args.file is not None  # a positional of the `import` parser
    with HubIndex(hub_plan.index_path(args.hub_index, str(sess.db))) as index:
        n = index.import_(args.file)
        sess.console.print(f"imported {n} row(s) into {index.path}; now: {index.counts()}", highlight=False)
    return 0


def _export(sess: CommandSession, args: HubOptions) -> int:
    from bringup.files import check_output_path  # lazy: torch-free --help
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help
    from bringup.hub.index import HubIndex  # lazy: torch-free --help

    db = str(sess.db)
    assert args.out is not None  # required by the `export` parser
    check_output_path(args.out, "--out")
    keys = [e.key for e in _entries(args, db)] if args.source else None
    with HubIndex(hub_plan.index_path(args.hub_index, db)) as index:
        n = index.export(args.out, keys)
    sess.console.print(f"exported {n} row(s) to {args.out}", highlight=False)
    return 0


def _fetch(sess: CommandSession, args: HubOptions) -> int:
    entries = _entries(args, str(sess.db))
    sess.console.print(
        "by status: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(e.status for e in entries).items())),
        highlight=False,
    )
    return 0


def _plan(sess: CommandSession, args: HubOptions) -> int:
    from bringup.hub import plan as hub_plan  # lazy: torch-free --help

    plan = hub_plan.plan_ids(_entries(args, str(sess.db)))
    by_arch = Counter(plan.sigs[s].architecture for s in plan.sigs)
    con = sess.console
    con.print(
        f"{len(plan.rows)} id(s) -> {len(plan.sigs)} signature(s) ({plan.signed} config(s) signed); config "
        f"failures: {hub_plan.failure_line(plan) or 'none'}",
        highlight=False,
    )
    con.print("signatures by architecture: " + ", ".join(f"{a} {n}" for a, n in by_arch.most_common()), highlight=False)
    if args.json:
        from bringup.files import write_json  # lazy: torch-free --help

        write_json(args.json, _plan_json(plan))
    return 0


def _plan_json(plan: Any) -> dict[str, Any]:
    """`hub plan --json`: the ids and, per signature, its architecture, task, ids, downloads and config."""
    return {
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


ACTION_MAINS = {"fetch": _fetch, "plan": _plan, "export": _export, "import": _import, "fields": _fields, "csv": _csv}
