"""A Hub sweep's planning: its source's ids -> their configs (discovery and the config-only fetch, fetch.py,
through the Hub index, index.py) -> one signature per distinct computation (signature.py), without a device.

`fetch_entries` settles every id of a `hub-search:` / `hub-list:` source (ok or a failure, by reason); `plan_ids`
(pure, what bench/hub_plan.py times) signs each fetched config and groups the ids by signature, most downloaded
first; ids whose config failed are counted by reason (`failure_line`). The zoo turns the plan into one case per
signature (zoo/sweep.py); `bringup hub plan` (cli.py) prints it.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.errors import BadInput
from bringup.hub import fetch as hf
from bringup.hub import signature as sg
from bringup.hub.flags import INDEX_NAME, SWEEP_PREFIXES, HubFetch, parse_limits
from bringup.hub.index import OK, Entry, HubIndex
from bringup.store import DEFAULT_DB

PREFIXES = SWEEP_PREFIXES


def is_sweep(source: str | None) -> bool:
    return bool(source) and str(source).startswith(PREFIXES)


def index_path(hub_index: str | None, db: str | None) -> Path:
    """--hub-index, else hub-index.db beside --db (its default: $BRINGUP_DB, else ./bringup-results/)."""
    if hub_index:
        return Path(hub_index)
    return Path(db or os.environ.get("BRINGUP_DB", DEFAULT_DB)).parent / INDEX_NAME


# ---- ids -> configs -------------------------------------------------------------------------------
def fetch_entries(args: HubFetch, pattern: re.Pattern[str] | None) -> list[Entry]:
    """Discovery + the config-only fetch: the entries of the sweep, each settled (ok or a failure)."""
    say = hf.printer()
    limiters = hf.Limiters.of(parse_limits(args.hub_rate))
    refresh = bool(args.hub_refresh)
    with HubIndex(index_path(args.hub_index, args.db)) as index:
        if args.source.startswith(hf.SEARCH_PREFIX):
            search = hf.parse_search(args.source, args.limit)
            entries = hf.discover(search, index, limiters, refresh, say)
        else:
            entries = hf.listed_entries(hf.read_id_list(args.source), index)
        if pattern is not None:
            entries = [e for e in entries if pattern.search(e.name)]
        if args.limit is not None and args.source.startswith(hf.LIST_PREFIX):
            entries = entries[: args.limit]
        if not entries:
            raise BadInput(
                f"zoo: --source {args.source} lists no model"
                + (f" matching --filter {args.filter!r}" if pattern is not None else "")
            )
        try:
            entries, stats = hf.fetch(entries, index, limiters, workers=args.hub_workers, refresh=refresh, log=say)
        except KeyboardInterrupt:
            say(
                f"hub: interrupted; the configs fetched so far are saved in {index.path}: run the same command "
                "again to continue"
            )
            raise
        say(stats.line())
    return entries


# ---- configs -> signatures (pure) ------------------------------------------------------------------
@dataclass
class IdPlan:
    """Planning's answer: a row per id (store.HUB_ID_COLUMNS minus the case ids, plus `full_key`) and the
    distinct signatures, most downloaded first, with the rows that share each."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    sigs: dict[str, sg.Signature] = field(default_factory=dict)
    members: dict[str, list[int]] = field(default_factory=dict)
    configs: dict[int, dict[str, Any]] = field(default_factory=dict)  # row -> config.json (for --full-top)
    signed: int = 0  # configs really signed (the rest came from the memo)

    def downloads(self, sig: str) -> int:
        return sum(self.rows[i]["downloads"] or 0 for i in self.members[sig])

    def order(self) -> list[str]:
        return sorted(self.sigs, key=lambda s: (-self.downloads(s), s))

    def representative(self, sig: str) -> int:
        return min(self.members[sig], key=lambda i: (-(self.rows[i]["downloads"] or 0), self.rows[i]["model_id"]))


def plan_ids(entries: list[Entry], signer: sg.Signer | None = None) -> IdPlan:
    """Signature + dedup of fetched entries (no network, no model built)."""
    signer = signer or sg.Signer()
    old = sg.quiet_transformers()
    out = IdPlan()
    try:
        for e in entries:
            row: dict[str, Any] = {
                "model_id": e.model_id,
                "revision": e.revision,
                "sha": e.sha,
                "downloads": e.downloads,
                "likes": e.likes,
                "signature": None,
                "architecture": None,
                "model_type": None,
                "task": None,
                "full_key": None,
                "config_status": e.status,
                "reason": e.reason,
            }
            i = len(out.rows)
            out.rows.append(row)
            if e.status != OK or e.config is None:
                row["config_status"] = e.status if e.status != OK else sg.BAD_CONFIG
                continue
            cfg = e.config
            row["model_type"] = cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else None
            row["architecture"] = sg.architecture_of(cfg)
            s = signer(cfg)
            if isinstance(s, sg.ConfigFailure):
                row["config_status"], row["reason"] = s.reason, s.detail
                continue
            row.update(signature=s.signature, architecture=s.architecture, task=s.task, full_key=sg.full_key(cfg))
            if isinstance(cfg.get("quantization_config"), dict):
                row["reason"] = (
                    f"quantized checkpoint ({cfg['quantization_config'].get('quant_method', '?')}): run unquantized"
                )
            out.sigs.setdefault(s.signature, s)
            out.members.setdefault(s.signature, []).append(i)
            out.configs[i] = cfg
    finally:
        from transformers.utils import logging as tlog  # lazy: slow transformers import

        tlog.set_verbosity(old)
    out.signed = signer.signed
    return out


def case_name(plan: IdPlan, sig: str) -> str:
    rep = plan.rows[plan.representative(sig)]
    name = rep["model_id"] + (f"@{rep['revision']}" if rep["revision"] else "")
    n = len(plan.members[sig])
    return name if n == 1 else f"{name} (+{n - 1})"


def failure_line(plan: IdPlan) -> str:
    c = Counter(r["config_status"] for r in plan.rows if r["config_status"] != OK)
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
