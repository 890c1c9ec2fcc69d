"""`report --history`'s bugs: the groups each run stored (its bug block, `info.bugs`, written after every run and
refined by `bringup triage`) followed across the runs of one machine: where a group was first seen, the run that
fixed it (its cases ran again and none of them has its signature any more) and a run where it came back.

A group whose cases did not run in a later run is neither fixed nor present there (`not run`): a run of other
models says nothing about it. Groups are matched by signature (bringup.outcomes.same_cause), so a run that was
triaged (signatures at op level) and one that was not (module level) still meet. Reads run info only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.outcomes import same_cause
from bringup.report.history import StoredRun
from bringup.report.kit import esc, section

PRESENT, FIXED, NOT_RUN, BACK = "present", "fixed", "not run", "back"


@dataclass
class Track:
    machine: str
    key: str
    coarse: str
    kind: str
    title: str
    case_ids: set[str] = field(default_factory=set)
    states: dict[int, str] = field(default_factory=dict)  # run number -> PRESENT | FIXED | BACK | NOT_RUN

    @property
    def events(self) -> list[tuple[int, str]]:
        """(run number, "new" | "fixed" | "back") in order."""
        out, seen = [], False
        for n, st in sorted(self.states.items()):
            if st in (PRESENT, BACK) and not seen:
                out.append((n, "new"))
                seen = True
            elif st in (FIXED, BACK):
                out.append((n, "fixed" if st == FIXED else "back"))
        return out

    @property
    def open(self) -> bool:
        last = [st for _, st in sorted(self.states.items()) if st != NOT_RUN]
        return bool(last) and last[-1] in (PRESENT, BACK)


def _groups(sr: StoredRun) -> list[Mapping[str, Any]] | None:
    block = sr.run.info.get("bugs")
    if not isinstance(block, dict):
        return None
    return [g for g in block.get("groups", []) if isinstance(g, dict)]


def _match(t: Track, g: Mapping[str, Any]) -> bool:
    return same_cause(t.key, t.coarse, str(g.get("key")), str(g.get("coarse") or ""))


def tracks(runs: Sequence[StoredRun]) -> list[Track]:
    """Every group of every run with a bug block, followed over its machine's runs in order."""
    out: list[Track] = []
    for machine in sorted({sr.machine for sr in runs}):
        mine: list[Track] = []
        for sr in (r for r in runs if r.machine == machine):
            groups = _groups(sr)
            if groups is None:
                continue
            ran = {r.case_id for r in sr.results}
            hit: set[int] = set()
            for g in groups:
                t = next((t for t in mine if _match(t, g)), None)
                if t is None:
                    t = Track(
                        machine, str(g.get("key")), str(g.get("coarse") or ""), str(g.get("kind")), str(g.get("title"))
                    )
                    mine.append(t)
                fixed_before = any(st == FIXED for st in t.states.values())
                t.states[sr.n] = BACK if fixed_before and t.open is False else PRESENT
                t.case_ids |= {str(c.get("case_id")) for c in g.get("cases", []) if isinstance(c, dict)}
                hit.add(id(t))
            for t in mine:
                if id(t) not in hit and t.states:
                    t.states[sr.n] = FIXED if (t.case_ids & ran) and t.open else NOT_RUN
        out += mine
    return out


def summary(ts: Sequence[Track]) -> str:
    fixed = sum(any(e == "fixed" for _, e in t.events) for t in ts)
    back = sum(any(e == "back" for _, e in t.events) for t in ts)
    return f"{len(ts)} bug group(s), {sum(t.open for t in ts)} open, {fixed} fixed in a later run, {back} came back"


def section_html(runs: Sequence[StoredRun]) -> str:
    ts = tracks(runs)
    if not ts:
        return section(
            "bugs",
            "Bugs",
            '<p class="empty">No run shown stored a bug block (runs before bringup grouped failures).</p>',
        )
    nums = [sr.n for sr in runs]
    head = "".join(f"<th>#{n}</th>" for n in nums)
    mark = {PRESENT: "●", BACK: "● back", FIXED: "fixed", NOT_RUN: "·"}
    rows = []
    for t in sorted(ts, key=lambda t: (not t.open, t.machine, t.title)):
        states = [t.states.get(n, "") for n in nums]
        cells = "".join(f'<td class="bug-{esc(st.replace(" ", "-"))}">{esc(mark.get(st, ""))}</td>' for st in states)
        ev = "; ".join(f"{word} in run #{n}" for n, word in t.events)
        rows.append(
            f"<tr><td>{esc(t.kind)}</td><td><b>{esc(t.title)}</b><br><code>{esc(t.key)}</code></td>"
            f"<td>{esc(t.machine)}</td><td>{esc(ev)}</td>{cells}</tr>"
        )
    body = (
        f"<p>{esc(summary(ts))}. ● present, fixed: its cases ran and none has its signature, · its cases did not "
        "run.</p>"
        f'<table class="bugs"><thead><tr><th>kind</th><th>bug</th><th>machine</th><th>history</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return section("bugs", f"Bugs ({len(ts)})", body)
