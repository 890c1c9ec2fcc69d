"""The answer of a bisection: the last candidate with the old verdict and the first with the new one, every
run's verdict and figures side by side, skips with pip's reason, flaky candidates named, the follow-ups on
the changed version, and what it cost (installs, runs, wall time, disk). One dict (the `--json` answer and
what the report section reads from the run's info), printed as a table and a sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table

from bringup.bisect.plan import AMBIGUOUS, BUDGET, ENDPOINT, EVERY, FOUND, NO_CHANGE, Conclusion, max_envs_bound
from bringup.bisect.spec import BisectSpec
from bringup.case import CaseResult
from bringup.console import clip

if TYPE_CHECKING:
    from rich.console import Console

FOLLOWUP_KINDS = ("compiler_bisect", "localize")


def candidate_rows(spec: BisectSpec, results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """One row per candidate, in order; `ran` False for those the search did not need."""
    by_index = {int(r.params["index"]): r for r in results if r.params.get("kind") == "candidate"}
    rows = []
    for i, c in enumerate(spec.candidates):
        r = by_index.get(i)
        row: dict[str, Any] = {
            "index": i,
            "label": c.label,
            "version": c.version,
            "requirements": list(c.requirements),
            "ran": r is not None,
        }
        if r is not None:
            runs = r.fields.get("runs") or []
            row.update(
                {
                    "outcome": r.fields.get("outcome") or "skip",
                    "verdict": r.fields.get("verdict") or "skip",
                    "status": r.status.value,
                    "reason": r.reason,
                    "seen": [x.get("status") for x in runs],
                    "figures": r.fields.get("figures") or {},
                    "signature": r.fields.get("signature") or "",
                    "installed": r.fields.get("installed") or {},
                    "release_notes": r.fields.get("release_notes"),
                    "env": r.fields.get("env") or {},
                    "runs": runs,
                    "wall_s": round(r.wall_s, 2),
                    "case_id": r.case_id,
                }
            )
        rows.append(row)
    return rows


def followups(results: Sequence[CaseResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in results:
        kind = r.params.get("kind")
        if kind in FOLLOWUP_KINDS:
            label = (r.params.get("candidate") or {}).get("label", r.name)
            out[kind] = {
                "label": label,
                "index": r.params.get("index"),
                "status": r.status.value,
                "reason": r.reason,
                "answer": r.fields.get("answer") or {},
                "wall_s": round(r.wall_s, 1),
                "log": r.fields.get("log"),
            }
    return out


def costs(spec: BisectSpec, results: Sequence[CaseResult], wall_s: float, cache_bytes: int) -> dict[str, Any]:
    envs: dict[str, dict[str, Any]] = {}
    built = reused = failed = runs = 0
    install_s = run_s = 0.0
    for r in results:
        env = r.fields.get("env") or {}
        if r.params.get("kind") == "candidate":
            if env.get("reused"):
                reused += 1
            elif env.get("key"):
                built += 1
            else:
                failed += 1
            runs += len(r.fields.get("runs") or [])
            run_s += sum(float(x.get("wall_s") or 0) for x in r.fields.get("runs") or [])
        install_s += float(env.get("build_s") or 0)
        if env.get("key"):
            envs[str(env["key"])] = env
    k = len(spec.candidates)
    return {
        "candidates": k,
        "environments": built + reused + failed,
        "built": built,
        "reused": reused,
        "failed": failed,
        "bound": max_envs_bound(k),
        "install_s": round(install_s, 1),
        "runs": runs,
        "run_s": round(run_s, 1),
        "wall_s": round(wall_s, 1),
        "disk_bytes": sum(int(e.get("size_bytes") or 0) for e in envs.values()),
        "cache_bytes": cache_bytes,
    }


def _name(rows: list[dict[str, Any]], i: int | None) -> str:
    return rows[i]["label"] if i is not None else "?"


def change_text(rows: list[dict[str, Any]], a: int, b: int) -> str:
    """One change of verdict, between candidate a (the last with the verdict before) and b (the first with the
    next): found when nothing lies between them, else the candidates that cannot tell are named."""
    va, vb = rows[a].get("verdict"), rows[b].get("verdict")
    if b - a <= 1:
        return f"{rows[b]['label']} is the first {vb}; {rows[a]['label']}, the last before it, is {va}"
    why = ", ".join(f"{rows[i]['label']} ({rows[i].get('verdict', 'not run')})" for i in range(a + 1, b))
    return (
        f"the change from {va} to {vb} is at one of: {why}, or {rows[b]['label']} "
        f"(candidates that cannot tell lie between {rows[a]['label']} and it)"
    )


def message(con: Conclusion, rows: list[dict[str, Any]]) -> str:
    flaky = [rows[i]["label"] for i in con.flaky]
    tail = f"; flaky (not a verdict): {', '.join(flaky)}" if flaky else ""
    if con.other:
        others = ", ".join(f"{rows[i]['label']} ({rows[i].get('verdict')})" for i in con.other)
        tail += f"; a third verdict, stepped over: {others}"
    if con.kind in (FOUND, AMBIGUOUS):
        steps = con.changes or ((con.last_old, con.first_new),)
        return "; then ".join(change_text(rows, a, b) for a, b in steps if a is not None and b is not None) + tail
    if con.kind == EVERY:
        if not con.changes:
            return f"no change: every candidate that ran is {con.old or 'unusable'}{tail}"
        moves = "; ".join(f"{rows[a]['verdict']} -> {rows[b]['verdict']} at {rows[b]['label']}" for a, b in con.changes)
        return f"{moves}{tail}"
    if con.kind == NO_CHANGE:
        return f"no change between the endpoints: {con.note} ({rows[0]['label']}, {rows[-1]['label']}){tail}"
    if con.kind == ENDPOINT:
        return f"cannot bisect: {con.note}{tail}"
    if con.kind == BUDGET:
        return f"{con.note}: the change lies in {', '.join(rows[i]['label'] for i in con.between) or '?'}{tail}"
    return con.kind


def exit_code(con: Conclusion) -> int:
    """0: the answer is one candidate (or, with --all, every candidate ran) and nothing was flaky; else 1."""
    if con.kind in (FOUND, EVERY) and not con.flaky and (con.kind == FOUND or con.old is not None):
        return 0
    return 1


def build(
    run_id: str, spec: BisectSpec, con: Conclusion, results: Sequence[CaseResult], wall_s: float, cache_bytes: int
) -> dict[str, Any]:
    rows = candidate_rows(spec, results)
    t = spec.target
    return {
        "run_id": run_id,
        "target": {
            "kind": t.kind,
            "title": t.title,
            "path": t.path or None,
            "case_id": t.case.get("case_id") if t.kind == "case" else None,
            "from_run": t.from_run or None,
            "device": t.device,
        },
        "source": spec.source,
        "mode": "every" if spec.every else "bisect",
        "result": con.kind,
        "message": message(con, rows),
        "exit_code": exit_code(con),
        # each endpoint with its own verdict (not the change's: a range may hold more than two verdicts)
        "old": {"verdict": rows[0].get("verdict"), "label": rows[0]["label"]},
        "new": {"verdict": rows[-1].get("verdict"), "label": rows[-1]["label"]},
        "found": {"old": con.old, "new": con.new},  # the verdicts of the (first) change found
        "last_old": rows[con.last_old] if con.last_old is not None else None,
        "first_new": rows[con.first_new] if con.first_new is not None else None,
        "between": [rows[i]["label"] for i in con.between],
        "changes": [
            {
                "from": rows[a]["label"],
                "to": rows[b]["label"],
                "verdicts": [rows[a].get("verdict"), rows[b].get("verdict")],
                "between": [rows[i]["label"] for i in range(a + 1, b)],
            }
            for a, b in con.changes
        ],
        "flaky": [rows[i]["label"] for i in con.flaky],
        "skipped": [{"label": rows[i]["label"], "reason": rows[i].get("reason", "")} for i in con.skipped],
        "nonmonotone": [rows[i]["label"] for i in con.nonmonotone],
        "other": [{"label": rows[i]["label"], "verdict": rows[i].get("verdict")} for i in con.other],
        "conclusion": con.to_json(),
        "candidates": rows,
        "followups": followups(results),
        "figures": costs(spec, results, wall_s, cache_bytes),
    }


def figure_labels(rows: Sequence[dict[str, Any]], limit: int = 3) -> list[str]:
    labels: list[str] = []
    for r in rows:
        for k in r.get("figures") or {}:
            if k not in labels:
                labels.append(k)
    return labels[:limit]


def print_answer(ans: dict[str, Any], console: Console) -> None:
    rows = ans["candidates"]
    figs = figure_labels(rows)
    tbl = Table(title=f"bisect {ans['target']['title']}: {ans['source']}", title_justify="left")
    for col in ("candidate", "verdict", "runs", "installed", *(clip(f, 28) for f in figs), "env", "run s", "reason"):
        tbl.add_column(col, overflow="fold")
    for r in rows:
        if not r["ran"]:
            tbl.add_row(r["label"], "-", "", "", *("" for _ in figs), "", "", "not needed")
            continue
        env = r.get("env") or {}
        envtxt = env_text(env)
        inst = ", ".join(f"{k} {v}" for k, v in (r.get("installed") or {}).items())
        vals = [f"{r['figures'][f]:.3g}" if f in (r.get("figures") or {}) else "" for f in figs]
        run_s = sum(float(x.get("wall_s") or 0) for x in r.get("runs") or [])
        tbl.add_row(
            r["label"],
            str(r.get("verdict")),
            " ".join(str(s) for s in r.get("seen") or []),
            inst,
            *vals,
            envtxt,
            f"{run_s:.1f}",
            clip(str(r.get("reason", "")), 70),
        )
    console.print(tbl)
    for kind, f in ans["followups"].items():
        console.print(f"{kind.replace('_', ' ')} on {f['label']}: {f['reason']}", highlight=False, markup=False)
    for row in (ans.get("first_new"), ans.get("last_old")):
        if row and row.get("release_notes"):
            console.print(f"release notes of {row['label']}: {row['release_notes']}", highlight=False, markup=False)
    console.print(costs_line(ans), highlight=False, markup=False)
    console.print(f"bisect: {ans['message']}", highlight=False, markup=False)


def env_text(env: dict[str, Any]) -> str:
    if env.get("reused"):
        return "reused"
    word = "built" if env.get("key") else "not made"
    return f"{word} in {float(env.get('build_s') or 0):.0f} s"


def human_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def costs_line(ans: dict[str, Any]) -> str:
    fg = ans["figures"]
    bound = f" (bound ceil(log2 k)+2 = {fg['bound']})" if ans["mode"] == "bisect" else ""
    failed = f", {fg['failed']} could not be made" if fg.get("failed") else ""
    return (
        f"{fg['environments']} environment(s) for {fg['candidates']} candidates{bound}: {fg['built']} built "
        f"({fg['install_s']:.0f} s), {fg['reused']} reused{failed}; {fg['runs']} run(s) ({fg['run_s']:.0f} s); "
        f"{fg['wall_s']:.0f} s wall; {human_bytes(fg['disk_bytes'])} of environments "
        f"(cache {human_bytes(fg['cache_bytes'])})"
    )
