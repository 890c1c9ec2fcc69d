"""What the Hub-sweep options of `bringup zoo` and `bringup hub` share (their spellings are the fields of
ZooOptions, zoo/args.py, and HubOptions, hub/cli.py): the fetch they ask for, the sweep sources' prefixes and
the --hub-rate check. Torch-free: `bringup zoo --help` builds without importing the sweep's code (plan.py,
fetch.py, torch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.errors import BadInput

INDEX_NAME = "hub-index.db"
SEARCH_PREFIX = "hub-search:"
LIST_PREFIX = "hub-list:"
SWEEP_PREFIXES = (SEARCH_PREFIX, LIST_PREFIX)  # the sources that are Hub sweeps
DEFAULT_WORKERS = 8

# --hub-rate (zoo's Hub sweeps, `bringup hub`): requests per 5-minute window to the Hub's API and /resolve/.
# Here, torch-free, so that `zoo --help` shows them without importing the Hub code (bringup.hub.fetch).
FREE_API, FREE_RESOLVE = 1000, 5000  # a free user's requests per window (docs/hub/rate-limits)
DEFAULT_API, DEFAULT_RESOLVE = 900, 4500  # 90% of those


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


# ---- the rate limit (--hub-rate), checked where the options are built (zoo/args.py, hub/cli.py) ---------------
@dataclass(frozen=True)
class Limits:
    api: int = DEFAULT_API  # API calls per 5-minute window
    resolve: int = DEFAULT_RESOLVE  # /resolve/ calls per 5-minute window


def parse_limits(text: str | None) -> Limits:
    """--hub-rate API,RESOLVE (None: the defaults); BadInput on anything else."""
    if not text:
        return Limits()
    m = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 2:
        raise BadInput(
            f"--hub-rate {text!r}: expected API,RESOLVE requests per 5 minutes (e.g. {DEFAULT_API},"
            f"{DEFAULT_RESOLVE}; a free token allows {FREE_API},{FREE_RESOLVE})"
        )
    return Limits(int(m.group(1)), int(m.group(2)))
