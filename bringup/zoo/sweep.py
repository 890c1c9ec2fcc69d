"""A Hub sweep in the zoo (`zoo --source hub-search:QUERY | hub-list:FILE`): the Hub's plan (bringup.hub: ids ->
configs -> one signature per distinct computation) -> one case per signature -> the answer for every id.

1. The Hub package plans (hub/plan.py `fetch_entries`, `plan_ids`): discovery, the config-only fetch through the
   Hub index, a signature per fetched config, config failures counted by reason.
2. One tiny case per signature (the zoo's own case, `bringup.zoo.run:run_model`, with the signature's config
   in its params: a worker needs no Hub and no cache), most downloaded first; `--full-top K` adds the K most
   downloaded signatures at real size (zoo/full.py: meta init, preflight, FSDP2 over --nproc ranks when
   one device is too small), each on its most downloaded id.
3. The run's ids are stored beside the cases (store.py `hub_ids`: id -> signature -> case): the verdict of a
   case fans out to every id that shares its signature (hub/summary.py), a full-size verdict to the
   ids whose config.json is the same up to names, versions and storage dtype (`signature.full_key`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.api import PlannedCases
from bringup.case import Case
from bringup.errors import BadInput
from bringup.hub import fetch as hf
from bringup.hub import plan as hub_plan
from bringup.hub import refs
from bringup.hub import summary as hub_summary
from bringup.hub.flags import HubFetch
from bringup.hub.plan import IdPlan
from bringup.precision import Precision
from bringup.zoo.args import FULL_STEPS, FULL_TIMEOUT, ZooOptions
from bringup.zoo.baseline import load_baseline
from bringup.zoo.cases import FULL_ENTRY, Entry, FullRun, TinyRun, full_params, make_case
from bringup.zoo.modules import from_arg
from bringup.zoo.summary import summarize

if TYPE_CHECKING:
    from rich.console import Console


# ---- signatures -> cases --------------------------------------------------------------------------
def signature_cases(
    plan: IdPlan, run: TinyRun, baseline: SigBaseline | None = None
) -> tuple[list[Case], dict[str, str]]:
    """A tiny case per signature, most downloaded first (the zoo's own case, its params carrying the signature's
    config); returns them and signature -> case id."""
    cases: list[Case] = []
    case_of: dict[str, str] = {}
    for sig in plan.order():
        s = plan.sigs[sig]
        base = make_case(Entry("hub-sig", sig, s.task), run)
        params = {**base.params, "signature": sig, "architecture": s.architecture, "config": s.config}
        if baseline is not None and sig in baseline.by_name:
            params["baseline"] = baseline.entry_for(sig, run.dtype, run.steps)
        case = dataclasses.replace(base, name=hub_plan.case_name(plan, sig), params=params)
        cases.append(case)
        case_of[sig] = case.case_id
    return cases, case_of


def build_cases(
    opts: ZooOptions, fetch: HubFetch, prec: Precision, backend: str, pattern: re.Pattern[str] | None
) -> PlannedCases:
    """The sweep's cases: a tiny case per signature, most downloaded first, then the --full-top cases; their
    `record` stores the id rows beside them (`record_plan`). The options were checked where they were built."""
    baseline = _baseline(opts, prec) if opts.baseline else None
    entries = hub_plan.fetch_entries(fetch, pattern)
    plan = hub_plan.plan_ids(entries)
    sigs = plan.order()
    if not sigs:
        raise BadInput(
            f"zoo: none of the {len(plan.rows)} id(s) of --source {opts.source} has a usable config "
            f"({hub_plan.failure_line(plan)})"
        )
    assert opts.steps is not None and opts.case_budget is not None  # resolved() (zoo/plan.py) sets both
    if baseline is not None and opts.baseline:
        baseline.check_shared(sigs, prec.name, opts.steps, opts.baseline)

    run = TinyRun(
        prec.name,
        opts.steps,
        backend,
        opts.case_budget,
        seed=opts.seed,
        noise_seeds=opts.noise_seeds,
        module_check=from_arg(opts.module_check),
    )
    cases, case_of = signature_cases(plan, run, baseline)
    full_of = _full_cases(opts, prec, backend, plan, sigs, cases)
    for row in plan.rows:
        row["case_id"] = case_of.get(row["signature"] or "")
        row["full_case_id"] = full_of.get(row["full_key"] or "")
    hf.printer()(
        f"hub: {len(plan.rows)} id(s) -> {len(sigs)} distinct signature(s) ({plan.signed} config(s) signed)"
        f"; config failures: {hub_plan.failure_line(plan) or 'none'}"
        + (f"; {len(set(full_of.values()))} at full size" if full_of else "")
    )
    return PlannedCases(cases, record_plan(plan))


def _full_cases(
    opts: ZooOptions, prec: Precision, backend: str, plan: IdPlan, sigs: list[str], cases: list[Case]
) -> dict[str, str]:
    """--full-top K: the K most downloaded signatures at real size, each on its most downloaded id; returns
    full_key -> case id (the ids a full-size verdict fans out to)."""
    k = int(opts.full_top or 0)
    if not k:
        return {}
    reference = opts.reference or "cpu"
    if reference == "baseline":
        raise BadInput(
            "--full-top: --reference baseline is not offered for Hub sweeps (the bundle is compared per "
            "signature at tiny size); use cpu or none"
        )
    if reference == "none" and backend == "none":
        raise BadInput("--reference none with --compile-backend none: nothing would judge the full-size runs")
    run = FullRun(prec.name, FULL_STEPS, backend, reference, opts)
    out: dict[str, str] = {}
    for sig in sigs[:k]:
        i = plan.representative(sig)
        row, raw = plan.rows[i], plan.configs[i]
        name = row["model_id"] + (f"@{row['revision']}" if row["revision"] else "")
        try:
            ref = refs.parse_ref(name, "hub")
            weights = "cache" if refs.weight_files(ref) else "random"
        except BadInput:
            weights = "random"
        params = full_params(Entry("hub-cfg", name, plan.sigs[sig].task), run, weights, hub_config=raw, signature=sig)
        c = Case("zoo", f"{name} [full]", params, FULL_ENTRY, budget_s=FULL_TIMEOUT, isolated=True)
        cases.append(c)
        out[row["full_key"]] = c.case_id
    return out


def record_plan(plan: IdPlan) -> Callable[[Any, str], None]:
    """record(store, run_id): the sweep's id rows stored beside its cases, once the run row exists."""
    return lambda store, run_id: store.record_hub_ids(run_id, plan.rows)


# ---- --baseline per signature ---------------------------------------------------------------------
@dataclass
class SigBaseline:
    """A bundle's zoo results keyed by signature (a Hub sweep on another machine may list other ids)."""

    path: str
    index: Any  # zoo/baseline.py's BaselineIndex keyed by signature

    @property
    def by_name(self) -> dict[str, Any]:
        return self.index.by_name

    def check_shared(self, sigs: list[str], dtype: str, steps: int, given: str) -> None:
        shared = [s for s in sigs if s in self.by_name]
        if not shared:
            raise BadInput(
                f"--baseline {given}: the bundle shares no signature with this sweep (it has "
                f"{len(self.by_name)}): nothing would be compared"
            )
        self.index.check_comparable(shared, dtype, steps, given)

    def entry_for(self, sig: str, dtype: str, steps: int) -> dict[str, Any]:
        return self.index.entry_for(sig, dtype, steps)


def _baseline(opts: ZooOptions, prec: Precision) -> SigBaseline:
    assert opts.baseline is not None  # called with --baseline only
    idx = load_baseline(opts.baseline)
    by_sig = {
        str(r.params["signature"]): r
        for r in idx.by_name.values()
        if r.params.get("signature") and r.params.get("size", "tiny") != "full"
    }
    if not by_sig:
        raise BadInput(
            f"--baseline {opts.baseline}: the bundle has no Hub-sweep results (no signatures): export "
            "a `zoo --source hub-search:... / hub-list:...` run"
        )
    return SigBaseline(idx.path, dataclasses.replace(idx, by_name=by_sig))


def summarize_stored(store: Any, run_id: str, results: list[Any], console: Console) -> dict[str, Any]:
    """zoo's summary, plus the answer per id when the run is a Hub sweep."""
    extras = summarize(results, console)
    rows = store.hub_ids(run_id)
    if rows:
        run_dir = Path(store.path).resolve().parent / run_id
        extras["hub"] = hub_summary.summarize(rows, results, console, run_dir / hub_summary.CSV_NAME)
    return extras
