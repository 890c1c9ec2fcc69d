"""The Hub-sweep options of `bringup zoo` (a group of its own), torch-free like every suite's `*_args`
module: `bringup zoo --help` builds them without importing the sweep's code (plan.py, fetch.py, torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bringup.options import (
    DEFAULT_API,
    DEFAULT_RESOLVE,
    FREE_API,
    FREE_RESOLVE,
    nonneg_int,
    positive_float,
    positive_int,
)

INDEX_NAME = "hub-index.db"
DEFAULT_WORKERS = 8


@dataclass(frozen=True)
class HubFetch:
    """What a Hub sweep's discovery and fetch read (bringup/hub/plan.py), from `zoo`'s or `hub`'s options:
    the source and its --limit / --filter, the Hub flags, and the --db the index sits beside by default."""

    source: str
    limit: int | None = None
    filter: str | None = None
    hub_index: str | None = None
    hub_workers: int = DEFAULT_WORKERS
    hub_rate: str | None = None
    hub_refresh: bool = False
    db: str | None = None


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Hub sweeps (--source hub-search:QUERY | hub-list:FILE; docs/hub.md)")
    g.add_argument(
        "--hub-index",
        metavar="FILE",
        default=None,
        help=f"the Hub index: listings and fetched configs (resumable, exportable with `bringup hub "
        f"export`); default {INDEX_NAME} beside --db",
    )
    g.add_argument(
        "--hub-workers",
        type=positive_int,
        default=DEFAULT_WORKERS,
        metavar="N",
        help=f"concurrent config fetches (default {DEFAULT_WORKERS})",
    )
    g.add_argument(
        "--hub-rate",
        metavar="API,RESOLVE",
        default=None,
        help=f"requests per 5 minutes to the Hub's API and /resolve/ (default {DEFAULT_API},"
        f"{DEFAULT_RESOLVE}: 90%% of a free token's {FREE_API},{FREE_RESOLVE})",
    )
    g.add_argument(
        "--hub-refresh", action="store_true", help="list the query again and fetch every id whose config failed before"
    )
    g.add_argument(
        "--full-top",
        type=nonneg_int,
        default=0,
        metavar="K",
        help="also run the K most downloaded signatures at real size (meta init, memory preflight)",
    )
    g.add_argument(
        "--nproc",
        type=positive_int,
        default=1,
        metavar="N",
        help="--size full / --full-top: a model that does not fit one device is sharded with FSDP2 over "
        "N ranks (default 1: reported unsupported with the ranks it would need)",
    )
    g.add_argument(
        "--device-memory",
        type=positive_float,
        default=None,
        metavar="GIB",
        help="--size full / --full-top: the preflight's free device memory (default: what the device "
        "reports); e.g. plan for a smaller device",
    )
