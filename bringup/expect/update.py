"""`--update-expect` and `bringup expect init`: write what a run saw into the expectations file.

Only the section for this device type and torch version changes (a fallback section of another torch
is copied, not edited); entries of cases the run did not include stay as they are; comments, key
order and links stay. Per case of the run:
- failing (or flaky, or with graph breaks): the entry gets the status seen first, the reason it had
  when the status is unchanged (else the taxonomy's default for the result), the flaky list (the
  statuses seen, added to those already known), the graph-break count when there is one (or one was
  pinned before);
- passing: the entry is removed, unless it carries a link or a note (then `status: pass` keeps the
  history) or pins graph breaks (then `status: pass` + the count).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from bringup.case import CaseResult, Status
from bringup.expect.classify import Judgement, case_key, graph_breaks
from bringup.expect.file import ENTRY_KEYS, ExpectFile
from bringup.expect.taxonomy import default_reason


def _set(entry: Any, key: str, value: Any) -> None:
    """Set key, keeping the canonical order (status, reason, flaky, graph_breaks, link, note) for new keys."""
    if key in entry:
        entry[key] = value
        return
    order = list(ENTRY_KEYS)
    pos = sum(1 for k in entry if k in order and order.index(k) < order.index(key))
    entry.insert(pos, key, value)


def _flow_list(items: list[str]) -> Any:
    seq = CommentedSeq(items)
    seq.fa.set_flow_style()
    return seq


def apply(
    f: ExpectFile,
    results: Sequence[CaseResult],
    repeats: Sequence[Sequence[CaseResult]],
    device: str,
    torch_version: str,
    sel: tuple[str, str] | None,
) -> dict[str, int]:
    """Write the run into `f.doc` (not saved). Returns counts: added, changed, removed."""
    section = f.target_section(device, torch_version, sel)
    seen: dict[str, list[Status]] = {}
    for rs in repeats:
        for r in rs:
            seen.setdefault(r.case_id, []).append(r.status)
    counts = {"added": 0, "changed": 0, "removed": 0}
    for r in results:
        statuses = list(dict.fromkeys([r.status, *seen.get(r.case_id, [])]))
        _record(section, case_key(r), r, statuses, counts)
    return counts


def _record(section: Any, key: str, r: CaseResult, statuses: list[Status], counts: dict[str, int]) -> None:
    """One case into its entry: a clean pass drops an entry that pins nothing (graph breaks, a link, a
    note); anything else is written with its status, reason, flaky statuses and graph breaks."""
    gb = graph_breaks(r)
    entry = section.get(key)
    old = dict(entry) if entry is not None else None
    known_flaky = [str(s) for s in (entry or {}).get("flaky") or []]
    flaky = (
        sorted(set(known_flaky) | {s.value for s in statuses})
        if len(statuses) > 1
        else (known_flaky if r.status.value in known_flaky else [])
    )
    pins_breaks = gb is not None and (gb > 0 or (entry is not None and "graph_breaks" in entry))
    if r.status is Status.PASS and not flaky:
        if entry is None:
            if not pins_breaks:
                return
            entry = section[key] = CommentedMap()
            counts["added"] += 1
        elif not (pins_breaks or entry.get("link") or entry.get("note")):
            del section[key]
            counts["removed"] += 1
            return
        _set(entry, "status", "pass")
        entry.pop("reason", None)
        entry.pop("flaky", None)
    else:
        if entry is None:
            entry = section[key] = CommentedMap()
            counts["added"] += 1
        _write_status(entry, r, flaky)
    if pins_breaks:
        _set(entry, "graph_breaks", gb)
    counts["changed"] += old is not None and dict(entry) != old


def _write_status(entry: Any, r: CaseResult, flaky: list[str]) -> None:
    """Status, reason (a hand-written one kept while the status stays) and flaky statuses."""
    keep_reason = str(entry.get("status", "")) == r.status.value and entry.get("reason")
    _set(entry, "status", r.status.value)
    if r.status is Status.PASS:
        entry.pop("reason", None)
    elif not keep_reason:
        _set(entry, "reason", default_reason(r))
    if flaky:
        _set(entry, "flaky", _flow_list(flaky))
    else:
        entry.pop("flaky", None)


def update_from_judgement(
    f: ExpectFile,
    j: Judgement,
    results: Sequence[CaseResult],
    repeats: Sequence[Sequence[CaseResult]],
    device: str,
    torch_version: str,
) -> dict[str, int]:
    return apply(f, results, repeats, device, torch_version, j.section)
