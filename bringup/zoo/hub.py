"""zoo over the Hub: discovery -> config-only fetch -> one case per signature -> the answer for every id.

    bringup zoo --source hub-search:[TEXT][,library=L][,task=T][,author=A][,sort=downloads|likes] --limit N
    bringup zoo --source hub-list:FILE                 (ORG/NAME[@REV] [downloads=N] [likes=N] per line)

1. Discovery and the fetch (models/hub_fetch.py): the ids, their downloads and likes, and each id's config.json
   (no weights), concurrent, rate-limited, retried, resumable through the Hub index (models/hub_index.py).
2. Planning (`plan_ids`, pure, what bench/hub_plan.py times): each fetched config gets its signature
   (models/signature.py: task, architecture and the tiny config); ids whose config failed are counted by reason.
3. One tiny case per signature (the zoo's own case, `bringup.zoo.run:run_model`, with the signature's config
   in its params: a worker needs no Hub and no cache), most downloaded first; `--full-top K` adds the K most
   downloaded signatures at real size (zoo/full.py: meta init, preflight, FSDP2 over --nproc ranks when
   one device is too small), each on its most downloaded id.
4. The run's ids are stored beside the cases (store.py `hub_ids`: id -> signature -> case): the verdict of a
   case fans out to every id that shares its signature (zoo/hub_summary.py), a full-size verdict to the
   ids whose config.json is the same up to names, versions and storage dtype (`signature.full_key`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.case import Case
from bringup.errors import BadInput
from bringup.models import hub_fetch as hf
from bringup.models import signature as sg
from bringup.models.hub_index import OK, Entry, HubIndex
from bringup.precision import Precision
from bringup.store import DEFAULT_DB
from bringup.zoo.args import FULL_BATCH, FULL_SEQ
from bringup.zoo.hub_args import DEFAULT_WORKERS, INDEX_NAME, add_arguments  # noqa: F401 (the face)

PREFIXES = (hf.SEARCH_PREFIX, hf.LIST_PREFIX)


def is_sweep(source: str | None) -> bool:
    return bool(source) and str(source).startswith(PREFIXES)


def index_path(args: argparse.Namespace) -> Path:
    if getattr(args, "hub_index", None):
        return Path(args.hub_index)
    db = getattr(args, "db", None) or os.environ.get("BRINGUP_DB", DEFAULT_DB)
    return Path(db).parent / INDEX_NAME


def check_options(args: argparse.Namespace) -> None:
    """Hub-sweep options that make no sense elsewhere, and bad values: BadInput before any work."""
    sweep = is_sweep(getattr(args, "source", None))
    if getattr(args, "full_top", 0) and not sweep:
        raise BadInput("--full-top needs a Hub sweep source (hub-search:QUERY or hub-list:FILE)")
    if (getattr(args, "full_top", 0) or 0) < 0:
        raise BadInput(f"--full-top must be >= 0, got {args.full_top}")
    if getattr(args, "hub_workers", DEFAULT_WORKERS) < 1:
        raise BadInput(f"--hub-workers must be >= 1, got {args.hub_workers}")
    if getattr(args, "nproc", 1) < 1:
        raise BadInput(f"--nproc must be >= 1, got {args.nproc}")
    mem = getattr(args, "device_memory", None)
    if mem is not None and not (mem > 0 and math.isfinite(mem)):
        raise BadInput(f"--device-memory must be a positive number of GiB, got {mem}")
    full = getattr(args, "size", "tiny") == "full" or bool(getattr(args, "full_top", 0))
    if not full and (getattr(args, "nproc", 1) > 1 or mem is not None):
        raise BadInput("--nproc and --device-memory apply to full-size runs (--size full, or --full-top K in a Hub "
                       "sweep); tiny models run on one device")  # fmt: skip
    batch, seq, nproc = getattr(args, "batch", None), getattr(args, "seq", None), getattr(args, "nproc", 1)
    batch = FULL_BATCH if batch is None else batch
    seq = FULL_SEQ if seq is None else seq
    if full and (batch < 1 or seq < 2):
        raise BadInput(f"--batch must be >= 1 and --seq >= 2, got {batch} and {seq}")
    if full and nproc > 1 and batch % nproc:
        raise BadInput(f"--batch {batch} does not split over --nproc {nproc} ranks (each rank takes batch / nproc "
                       f"rows of the global batch): use a multiple of {nproc}")  # fmt: skip
    hf.parse_limits(getattr(args, "hub_rate", None))


def check_ranks(nproc: int, device: Any) -> None:
    """--nproc N on a device with fewer than N units (cpu ranks are processes: any N): BadInput before any work."""
    if nproc > 1 and not device.is_cpu and nproc > device.count():
        raise BadInput(f"--nproc {nproc}: only {device.count()} {device.type} device(s) here")


# ---- ids -> configs -------------------------------------------------------------------------------
def resolve(args: argparse.Namespace, pattern: re.Pattern[str] | None) -> list[Entry]:
    """Discovery + the config-only fetch: the entries of the sweep, each settled (ok or a failure)."""
    say = hf.printer()
    limiters = hf.Limiters.of(hf.parse_limits(getattr(args, "hub_rate", None)))
    refresh = bool(getattr(args, "hub_refresh", False))
    with HubIndex(index_path(args)) as index:
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
            raise BadInput(f"zoo: --source {args.source} lists no model" + (f" matching --filter {args.filter!r}"
                                                                           if pattern is not None else ""))  # fmt: skip
        try:
            entries, stats = hf.fetch(entries, index, limiters, workers=getattr(args, "hub_workers", DEFAULT_WORKERS),
                                      refresh=refresh, log=say)  # fmt: skip
        except KeyboardInterrupt:
            say(f"hub: interrupted; the configs fetched so far are saved in {index.path}: run the same command "
                "again to continue")  # fmt: skip
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
            row: dict[str, Any] = {"model_id": e.model_id, "revision": e.revision, "sha": e.sha,
                                   "downloads": e.downloads, "likes": e.likes, "signature": None,
                                   "architecture": None, "model_type": None, "task": None, "full_key": None,
                                   "config_status": e.status, "reason": e.reason}  # fmt: skip
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
                row["reason"] = f"quantized checkpoint ({cfg['quantization_config'].get('quant_method', '?')}): " \
                                "run unquantized"  # fmt: skip
            out.sigs.setdefault(s.signature, s)
            out.members.setdefault(s.signature, []).append(i)
            out.configs[i] = cfg
    finally:
        from transformers.utils import logging as tlog

        tlog.set_verbosity(old)
    out.signed = signer.signed
    return out


# ---- signatures -> cases --------------------------------------------------------------------------
def case_name(plan: IdPlan, sig: str) -> str:
    rep = plan.rows[plan.representative(sig)]
    name = rep["model_id"] + (f"@{rep['revision']}" if rep["revision"] else "")
    n = len(plan.members[sig])
    return name if n == 1 else f"{name} (+{n - 1})"


def signature_cases(plan: IdPlan, dtype: str, steps: int, backend: str, timeout: float, seed: int, noise_seeds: int,
                    baseline: SigBaseline | None = None, module_check: bool | None = None,
                    ) -> tuple[list[Case], dict[str, str]]:  # fmt: skip
    """A tiny case per signature, most downloaded first (the zoo's own case, its params carrying the signature's
    config); returns them and signature -> case id."""
    from bringup.zoo.cases import Entry, make_case

    cases: list[Case] = []
    case_of: dict[str, str] = {}
    for sig in plan.order():
        s = plan.sigs[sig]
        base = make_case(Entry("hub-sig", sig, s.task), dtype, steps, backend, timeout, seed, None,
                             noise_seeds, module_check)  # fmt: skip
        params = {**base.params, "signature": sig, "architecture": s.architecture, "config": s.config}
        if baseline is not None and sig in baseline.by_name:
            params["baseline"] = baseline.entry_for(sig, dtype, steps)
        case = dataclasses.replace(base, name=case_name(plan, sig), params=params)
        cases.append(case)
        case_of[sig] = case.case_id
    return cases, case_of


def build_cases(args: argparse.Namespace, prec: Precision, backend: str, noise_seeds: int,
                pattern: re.Pattern[str] | None) -> list[Case]:  # fmt: skip
    """The sweep's cases: a tiny case per signature, most downloaded first, then the --full-top cases.
    The id rows are kept on `args.hub_plan` for `record_plan`."""
    check_options(args)
    baseline = _baseline(args, prec) if args.baseline else None
    entries = resolve(args, pattern)
    plan = plan_ids(entries)
    sigs = plan.order()
    if not sigs:
        raise BadInput(f"zoo: none of the {len(plan.rows)} id(s) of --source {args.source} has a usable config "
                       f"({_failure_line(plan)})")  # fmt: skip
    if baseline is not None:
        baseline.check_shared(sigs, prec.name, args.steps, args.baseline)
    from bringup.zoo.modules import from_arg

    cases, case_of = signature_cases(plan, prec.name, args.steps, backend, args.timeout, args.seed, noise_seeds,
                                     baseline, from_arg(args))  # fmt: skip
    full_of = _full_cases(args, prec, backend, plan, sigs, cases)
    for row in plan.rows:
        row["case_id"] = case_of.get(row["signature"] or "")
        row["full_case_id"] = full_of.get(row["full_key"] or "")
    args.hub_plan = plan
    hf.printer()(f"hub: {len(plan.rows)} id(s) -> {len(sigs)} distinct signature(s) ({plan.signed} config(s) signed)"
                 f"; config failures: {_failure_line(plan) or 'none'}"
                 + (f"; {len(set(full_of.values()))} at full size" if full_of else ""))  # fmt: skip
    return cases


def _failure_line(plan: IdPlan) -> str:
    from collections import Counter

    c = Counter(r["config_status"] for r in plan.rows if r["config_status"] != OK)
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))


def _full_cases(args: argparse.Namespace, prec: Precision, backend: str, plan: IdPlan, sigs: list[str],
                cases: list[Case]) -> dict[str, str]:  # fmt: skip
    """--full-top K: the K most downloaded signatures at real size, each on its most downloaded id; returns
    full_key -> case id (the ids a full-size verdict fans out to)."""
    from bringup.models import hub
    from bringup.zoo.args import FULL_STEPS, FULL_TIMEOUT
    from bringup.zoo.cases import FULL_ENTRY, full_params

    k = int(getattr(args, "full_top", 0) or 0)
    if not k:
        return {}
    reference = args.reference or "cpu"
    if reference == "baseline":
        raise BadInput("--full-top: --reference baseline is not offered for Hub sweeps (the bundle is compared per "
                       "signature at tiny size); use cpu or none")  # fmt: skip
    if reference == "none" and backend == "none":
        raise BadInput("--reference none with --compile-backend none: nothing would judge the full-size runs")
    out: dict[str, str] = {}
    for sig in sigs[:k]:
        i = plan.representative(sig)
        row, raw = plan.rows[i], plan.configs[i]
        name = row["model_id"] + (f"@{row['revision']}" if row["revision"] else "")
        try:
            ref = hub.parse_ref(name, "hub")
            weights = "cache" if hub.weight_files(ref) else "random"
        except BadInput:
            weights = "random"
        params = full_params("hub-cfg", name, plan.sigs[sig].task, prec.name, FULL_STEPS, backend, weights, reference,
                             args, hub_config=raw, signature=sig)  # fmt: skip
        c = Case("zoo", f"{name} [full]", params, FULL_ENTRY, budget_s=FULL_TIMEOUT,
                 isolated=True)  # fmt: skip
        cases.append(c)
        out[row["full_key"]] = c.case_id
    return out


def record_plan(store: Any, run_id: str, args: argparse.Namespace) -> None:
    plan: IdPlan | None = getattr(args, "hub_plan", None)
    if plan is not None:
        store.record_hub_ids(run_id, plan.rows)


# ---- --baseline per signature ---------------------------------------------------------------------
@dataclass
class SigBaseline:
    """A bundle's zoo results keyed by signature (a Hub sweep on another machine may list other ids)."""

    path: str
    index: Any  # zoo/baseline.py's BaselineIndex keyed by signature

    @property
    def by_name(self) -> dict[str, Any]:
        return self.index.by_name  # type: ignore[no-any-return]

    def check_shared(self, sigs: list[str], dtype: str, steps: int, given: str) -> None:
        shared = [s for s in sigs if s in self.by_name]
        if not shared:
            raise BadInput(f"--baseline {given}: the bundle shares no signature with this sweep (it has "
                           f"{len(self.by_name)}): nothing would be compared")  # fmt: skip
        self.index.check_comparable(shared, dtype, steps, given)

    def entry_for(self, sig: str, dtype: str, steps: int) -> dict[str, Any]:
        return self.index.entry_for(sig, dtype, steps)  # type: ignore[no-any-return]


def _baseline(args: argparse.Namespace, prec: Precision) -> SigBaseline:
    from bringup.zoo.baseline import load_baseline

    idx = load_baseline(args.baseline)
    by_sig = {str(r.params["signature"]): r for r in idx.by_name.values() if r.params.get("signature")
              and r.params.get("size", "tiny") != "full"}  # fmt: skip
    if not by_sig:
        raise BadInput(f"--baseline {args.baseline}: the bundle has no Hub-sweep results (no signatures): export "
                       "a `zoo --source hub-search:... / hub-list:...` run")  # fmt: skip
    return SigBaseline(idx.path, dataclasses.replace(idx, by_name=by_sig))


def summarize_stored(store: Any, run_id: str, results: list[Any], console: Any) -> dict[str, Any]:
    """zoo's summary, plus the answer per id when the run is a Hub sweep."""
    from bringup.zoo import hub_summary as zoo_hub_summary
    from bringup.zoo.summary import summarize

    extras = summarize(results, console)
    rows = store.hub_ids(run_id)
    if rows:
        run_dir = Path(store.path).resolve().parent / run_id
        extras["hub"] = zoo_hub_summary.summarize(rows, results, console, run_dir / zoo_hub_summary.CSV_NAME)
    return extras
