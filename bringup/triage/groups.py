"""Cases with one signature are one bug: groups, ranked by reach. Pure over what the store holds: a run's results
(its localize cases joined to the zoo cases they localized), its Hub ids (a sweep's fan-out: every id whose
signature case is in the group, with its downloads), and the bug blocks earlier runs stored (first and last run
a group was seen, on which devices).

Reach, largest first: Hub downloads behind the group, then distinct models, then cases.
The block (`bugs`, in the run's info and summary.json) is what the scorecard's section, `report --history` and
`bringup triage` read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.case import CaseResult, Status
from bringup.localize.post_run import cases_for
from bringup.store import RunInfo
from bringup.triage.signature import NOT_SIGNED, Signature, signature

BLOCK_VERSION = 1
TOP_IDS = 5


@dataclass(frozen=True)
class CaseRef:
    case_id: str
    suite: str
    name: str
    model: str
    status: str
    dtype: str
    reason: str

    @classmethod
    def of(cls, r: CaseResult) -> CaseRef:
        return cls(
            r.case_id,
            r.suite,
            r.name,
            str(r.params.get("model") or r.name),
            r.status.value,
            str(r.params.get("dtype") or ""),
            r.reason[:300],
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Seen:
    run_id: str
    at: float
    device: str


@dataclass
class Group:
    signature: Signature
    cases: list[CaseRef] = field(default_factory=list)
    hub: list[dict[str, Any]] = field(default_factory=list)  # the Hub ids behind its cases: model_id, downloads
    seen: list[Seen] = field(default_factory=list)  # the runs it was seen in (this one included)
    extra: dict[str, Any] = field(default_factory=dict)  # triage's additions: repro, bisect, issue file

    @property
    def models(self) -> list[str]:
        return sorted({c.model for c in self.cases})

    @property
    def downloads(self) -> int:
        return sum(int(h.get("downloads") or 0) for h in self.hub)

    @property
    def reach(self) -> tuple[int, int, int]:
        return (self.downloads, len(self.models), len(self.cases))

    def to_json(self) -> dict[str, Any]:
        seen = sorted(self.seen, key=lambda s: s.at)
        top = sorted(self.hub, key=lambda h: -int(h.get("downloads") or 0))[:TOP_IDS]
        return {
            **self.signature.to_json(),
            "reach": {
                "cases": len(self.cases),
                "models": len(self.models),
                "hub_ids": len(self.hub),
                "downloads": self.downloads,
            },
            "models": self.models,
            "dtypes": sorted({c.dtype for c in self.cases if c.dtype}),
            "devices": sorted({s.device for s in self.seen}),
            "statuses": sorted({c.status for c in self.cases}),
            "cases": [c.to_json() for c in self.cases],
            "hub_top": [{"model_id": h.get("model_id"), "downloads": h.get("downloads")} for h in top],
            "first_seen": {"run_id": seen[0].run_id, "at": seen[0].at} if seen else None,
            "last_seen": {"run_id": seen[-1].run_id, "at": seen[-1].at} if seen else None,
            "runs_seen": len(seen),
            **self.extra,
        }


def localize_join(results: Sequence[CaseResult]) -> dict[str, dict[str, Any]]:
    """zoo case id -> the fields of the localize result that localized it (`--localize`, or `bringup triage`),
    matched through the localize case the zoo case asks for (bringup/localize/post_run.py: cases_for)."""
    loc = {r.case_id: r for r in results if r.suite == "localize"}
    out: dict[str, dict[str, Any]] = {}
    if not loc:
        return out
    for r in results:
        if r.suite == "zoo" and r.status is Status.FAIL_NUMERIC:
            cases, _ = cases_for([r])
            hit = next((loc[c.case_id] for c in cases if c.case_id in loc), None)
            if hit is not None:
                out[r.case_id] = {**hit.fields, "reason": hit.reason, "status": hit.status.value}
    return out


def signed(results: Sequence[CaseResult], joined: Mapping[str, dict[str, Any]]) -> list[tuple[CaseResult, Signature]]:
    """Every case that did not pass with its signature; a localize case that localized a case of the run is
    that case's helper (its answer is in the case's signature), not a case of its own."""
    helpers = set()
    if joined:
        for r in results:
            if r.case_id in joined:
                helpers |= {c.case_id for c in cases_for([r])[0]}
    out = []
    for r in results:
        if r.status in NOT_SIGNED or r.case_id in helpers:
            continue
        own = r.fields if r.suite == "localize" else None
        sig = signature(r, joined.get(r.case_id) or own)
        if sig is not None:
            out.append((r, sig))
    return out


def group(pairs: Sequence[tuple[CaseResult, Signature]]) -> list[Group]:
    """One group per key; a module-level numeric key joins the op-level group that refines it when exactly one
    does (a case the budget left unlocalized, whose first module off is the one its localized peers had)."""
    by_key: dict[str, Group] = {}
    for r, sig in pairs:
        g = by_key.setdefault(sig.key, Group(sig))
        g.cases.append(CaseRef.of(r))
    refined: dict[str, list[str]] = {}
    for key, g in by_key.items():
        if g.signature.coarse:
            refined.setdefault(g.signature.coarse, []).append(key)
    for coarse, keys in refined.items():
        if len(keys) == 1 and coarse in by_key:
            target = by_key[keys[0]]
            moved = by_key.pop(coarse).cases
            target.cases.extend(moved)
            target.extra["inferred"] = sorted(set(target.extra.get("inferred", [])) | {c.case_id for c in moved})
    return list(by_key.values())


def add_reach(groups: Sequence[Group], hub_rows: Sequence[Mapping[str, Any]]) -> None:
    """Each group's Hub ids: the sweep's ids whose case (or --full-top case) is one of its cases."""
    by_case: dict[str, list[Mapping[str, Any]]] = {}
    for h in hub_rows:
        for k in ("case_id", "full_case_id"):
            if h.get(k):
                by_case.setdefault(str(h[k]), []).append(h)
    for g in groups:
        ids: dict[str, dict[str, Any]] = {}
        for c in g.cases:
            for h in by_case.get(c.case_id, []):
                ids[str(h.get("model_id"))] = {"model_id": h.get("model_id"), "downloads": h.get("downloads")}
        g.hub = list(ids.values())


def add_history(groups: Sequence[Group], run: RunInfo, others: Sequence[RunInfo]) -> None:
    """Where each group was seen: this run, and every other run whose stored bug block holds it."""
    for g in groups:
        g.seen = [Seen(run.run_id, run.started_at, run.device)]
        for o in others:
            block = o.info.get("bugs")
            if o.run_id == run.run_id or not isinstance(block, dict):
                continue
            if any(g.signature.matches(str(x.get("key")), str(x.get("coarse") or "")) for x in block.get("groups", [])):
                g.seen.append(Seen(o.run_id, o.started_at, o.device))


def ranked(groups: Sequence[Group]) -> list[Group]:
    return sorted(groups, key=lambda g: (-g.reach[0], -g.reach[1], -g.reach[2], g.signature.key))


def build_block(
    run: RunInfo,
    results: Sequence[CaseResult],
    hub_rows: Sequence[Mapping[str, Any]] = (),
    others: Sequence[RunInfo] = (),
) -> tuple[dict[str, Any], list[Group]]:
    """The run's bug block and its groups, ranked."""
    joined = localize_join(results)
    pairs = signed(results, joined)
    groups = ranked(group(pairs))
    add_reach(groups, hub_rows)
    add_history(groups, run, others)
    groups = ranked(groups)
    statuses: dict[str, int] = {}
    for r in results:
        if r.status in NOT_SIGNED:
            statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
    numeric = [s for _, s in pairs if s.kind == "numeric"]
    block = {
        "version": BLOCK_VERSION,
        "run_id": run.run_id,
        "device": run.device,
        "cases_signed": len(pairs),
        "not_signed": statuses,
        "numeric_resolution": {k: sum(s.resolution == k for s in numeric) for k in ("op", "module", "model")},
        "groups": [g.to_json() for g in groups],
    }
    return block, groups


def block_of(store: Any, run_id: str) -> tuple[dict[str, Any], list[Group]]:
    """build_block over what the store holds for `run_id`."""
    run = store.get_run(run_id)
    others = [r for r in store.runs() if r.run_id != run_id]
    return build_block(run, store.results(run_id), store.hub_ids(run_id), others)
