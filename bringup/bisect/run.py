"""The worker entries of a bisection: one candidate (its env, then the target run until its verdict is
stable), and the follow-ups on the changed version (bringup localize, PyTorch's compiler bisector).

Each is a Case like any other, run by the local pool or the Ray executor, so a candidate's budget, a
crash and a kill mean what they mean everywhere, and every finished candidate is committed to the store
at once. A candidate whose env cannot be made (pip refused it, a pinned package moved, it does not import)
or whose repro says it cannot test it (exit 125) is a skip: stored as `ref_fail` (the status for "this
says nothing about the device"), `fields.outcome = "skip"`, never a verdict.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from bringup.bisect.candidates import pip_env
from bringup.bisect.envs import Env, EnvCache, EnvFailed, EnvRequest
from bringup.bisect.plan import FLAKY, SKIP
from bringup.bisect.spec import BisectSpec, Candidate, Settings, Target
from bringup.bisect.target import RunOutcome, child_command, run_case, run_env, run_repro, timed, verdict_of
from bringup.case import Case, CaseResult, Status

CANDIDATE_ENTRY = "bringup.bisect.run:run_candidate"
FOLLOWUP_ENTRY = "bringup.bisect.run:run_followup"
DRIVER = Path(__file__).with_name("compiler_driver.py")


def candidate_case(spec: BisectSpec, index: int) -> Case:
    c = spec.candidates[index]
    s = spec.settings
    params = {
        "kind": "candidate",
        "index": index,
        "candidate": c.to_json(),
        "env_requirements": list(spec.env_requirements(c)),
        "target": spec.target.to_json(),
        "settings": s.to_json(),
    }
    budget = s.build_budget_s + s.repeat * (s.run_budget_s + 150.0) + 120.0
    return Case("bisect", c.label, params, CANDIDATE_ENTRY, budget_s=budget)


def followup_case(spec: BisectSpec, index: int, kind: str, budget_s: float) -> Case:
    c = spec.candidates[index]
    params = {
        "kind": kind,
        "index": index,
        "candidate": c.to_json(),
        "env_requirements": list(spec.env_requirements(c)),
        "target": spec.target.to_json(),
        "settings": spec.settings.to_json(),
        "budget_s": budget_s,
    }
    word = {"compiler_bisect": "compiler bisector", "localize": "localize"}[kind]
    return Case(
        "bisect",
        f"{c.label} [{word}]",
        params,
        FOLLOWUP_ENTRY,
        budget_s=spec.settings.build_budget_s + budget_s + 180.0,
    )


def env_request(p: dict[str, Any]) -> EnvRequest:
    c, s, t = Candidate.from_json(p["candidate"]), Settings.from_json(p["settings"]), Target.from_json(p["target"])
    case = t.kind == "case"
    return EnvRequest(
        tuple(p["env_requirements"]),
        s.python,
        s.inherit_site,
        c.find_links,
        overlay=s.bringup_wheel if case else "",
        imports=("bringup.bisect.child",) if case else (),
    )


def release_notes(env: Env, c: Candidate) -> str | None:
    """The moving package's release notes, as its metadata names them (a Project-URL called release notes /
    changelog), else its GitHub repository's release page for that version; None when neither is there."""
    if not c.version or not c.requirements:
        return None
    name = re.split(r"[\s\[@=<>!~;]", c.requirements[0], maxsplit=1)[0]
    urls = env.urls.get(name) or {}
    for label, url in urls.items():
        if re.search(r"release|change|news|history", label, re.I):
            return url
    for url in urls.values():
        m = re.match(r"(https://github\.com/[\w.-]+/[\w.-]+?)(?:\.git)?/?$", url)
        if m:
            return f"{m.group(1)}/releases/tag/v{c.version}"
    return None


def _env_fields(env: Env, c: Candidate) -> dict[str, Any]:
    return {
        "env": {
            "key": env.key,
            "path": str(env.path),
            "reused": env.reused,
            "build_s": round(env.build_s, 2),
            "size_bytes": env.size_bytes,
        },
        "installed": env.installed,
        "release_notes": release_notes(env, c),
    }


def skip_result(case: Case, reason: str, build_s: float, **fields: Any) -> CaseResult:
    r = CaseResult.for_case(case, Status.REF_FAIL, f"skip: {reason}")
    r.fields.update(
        {
            "outcome": SKIP,
            "verdict": SKIP,
            "index": case.params["index"],
            "label": case.name,
            "skip_reason": reason,
            "runs": [],
            "env": {"reused": False, "build_s": round(build_s, 2)},
            **fields,
        }
    )
    return r


def run_candidate(case: Case, ctx: Any) -> CaseResult:
    p = case.params
    c, s, t = Candidate.from_json(p["candidate"]), Settings.from_json(p["settings"]), Target.from_json(p["target"])
    cache = EnvCache(s.env_cache, s.env_cache_max_gb)
    work = ctx.artifact("bisect")
    t0 = time.monotonic()
    with open(work.with_suffix(".log"), "a") as log:
        try:
            with cache.env(env_request(p), s.build_budget_s, log, pip_env()) as env:
                outcomes: list[RunOutcome] = []
                for i in range(s.repeat):
                    wd = work / f"run-{i + 1}"
                    runner = run_repro if t.kind == "repro" else run_case
                    outcomes.append(runner(env.python, t, s, wd, run_env(env.path, wd, pip_env()), log))
                    if verdict_of(outcomes) in (SKIP, FLAKY):
                        break
        except EnvFailed as e:
            return skip_result(case, e.reason, e.build_s)
    verdict = verdict_of(outcomes)
    first = outcomes[0]
    runs = [o.to_json() for o in outcomes]
    if verdict == SKIP:
        r = skip_result(case, first.reason, env.build_s, runs=runs, **_env_fields(env, c))
        r.wall_s = time.monotonic() - t0
        return r
    status = Status(first.status)
    if s.new_signature and verdict not in (FLAKY, "pass") and first.signature != s.new_signature:
        verdict = f"{verdict} (another signature)"  # a failure, not the one looked for: a third verdict
    if verdict == FLAKY:
        seen = [o.status for o in outcomes]
        names = ", ".join(f"{x} x{seen.count(x)}" for x in dict.fromkeys(seen))
        reason = f"flaky: differs across {len(seen)} runs: {names}"
    else:
        reason = first.reason
    r = CaseResult.for_case(case, status, reason)
    r.fields.update(
        {
            "outcome": "flaky" if verdict == FLAKY else "verdict",
            "verdict": verdict,
            "index": p["index"],
            "label": c.label,
            "runs": runs,
            "figures": first.figures,
            "signature": first.signature,
            "log": str(work.with_suffix(".log")),
            **_env_fields(env, c),
        }
    )
    r.artifacts["log"] = str(work.with_suffix(".log"))
    r.wall_s = time.monotonic() - t0
    return r


def run_followup(case: Case, ctx: Any) -> CaseResult:
    """On one candidate: PyTorch's compiler bisector over the target, or bringup localize of its model.
    `pass`: the tool answered (its answer in fields.answer); `budget` / `error`: it did not."""
    p = case.params
    c, s, t = Candidate.from_json(p["candidate"]), Settings.from_json(p["settings"]), Target.from_json(p["target"])
    kind, budget = str(p["kind"]), float(p["budget_s"])
    cache = EnvCache(s.env_cache, s.env_cache_max_gb)
    work = ctx.artifact(f"bisect-{kind}")
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(work.with_suffix(".log"), "a") as log:
        try:
            with cache.env(env_request(p), s.build_budget_s, log, pip_env()) as env:
                fn = _compiler_bisect if kind == "compiler_bisect" else _localize
                status, reason, answer = fn(env, t, s, work, budget, log)
        except EnvFailed as e:
            return skip_result(case, e.reason, e.build_s, kind=kind)
    r = CaseResult.for_case(case, status, reason)
    r.fields.update(
        {
            "outcome": "followup",
            "kind": kind,
            "index": p["index"],
            "label": c.label,
            "answer": answer,
            "log": str(work.with_suffix(".log")),
            **_env_fields(env, c),
        }
    )
    r.artifacts["log"] = str(work.with_suffix(".log"))
    r.wall_s = time.monotonic() - t0
    return r


def _compiler_bisect(
    env: Env, t: Target, s: Settings, work: Path, budget: float, log: Any
) -> tuple[Status, str, dict[str, Any]]:
    cmd = [str(env.python), t.path] if t.kind == "repro" else child_command(env.python, t, work, s.run_budget_s)
    renv = run_env(env.path, work, pip_env())
    renv["BRINGUP_BISECT_LOG"] = str(work / "runs.log")
    rc, out, late = timed(
        [str(env.python), str(DRIVER), str(budget), str(s.run_budget_s), *cmd], work, renv, budget + 120.0, log
    )
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("BRINGUP_COMPILER_BISECT ")), None)
    if line is None:
        why = "over its budget" if late else f"exit {rc}, no answer"
        return (Status.BUDGET if late else Status.ERROR), f"compiler bisector: {why}", {}
    ans = json.loads(line.split(" ", 1)[1])
    ans["runs_log"] = str(work / "runs.log")
    if ans.get("error"):
        return Status.ERROR, f"compiler bisector: {ans['error']}"[:300], ans
    res = ans.get("result")
    if not res:
        return Status.PASS, "compiler bisector: no backend reproduces the failure (it passed under every one)", ans
    where = res["backend"] + (f" / {res['subsystem']}" if res.get("subsystem") else "")
    if res.get("bisect_number") is not None and res.get("subsystem"):
        where += f", application #{res['bisect_number']}"
    info = f" ({str(res['debug_info'])[:160]})" if res.get("debug_info") else ""
    return Status.PASS, f"compiler bisector: {where}{info}", ans


def _localize(
    env: Env, t: Target, s: Settings, work: Path, budget: float, log: Any
) -> tuple[Status, str, dict[str, Any]]:
    m = t.zoo_model
    if m is None:
        return Status.ERROR, "localize: the target is not a stored zoo case (no model to localize)", {}
    out = work / "localize.json"
    cmd = [str(env.python), "-m", "bringup.cli", "--db", str(work / "localize.db"), "--device", t.device]
    for mod in t.imports:
        cmd += ["--import", mod]
    cmd += [
        "localize",
        m["model"],
        "--source",
        m["source"],
        "--dtype",
        m["dtype"],
        "--case-budget",
        str(budget),
        "--json",
        str(out),
    ]
    if m["source"] == "hf":
        cmd += ["--task", m["task"]]
    if m["backend"] not in ("", "none", "eager"):
        cmd += ["--compile-backend", m["backend"]]
    rc, text, late = timed(cmd, work, run_env(env.path, work, pip_env()), budget + 120.0, log)
    try:
        data = json.loads(out.read_text())
        row = data["cases"][0]
    except (OSError, ValueError, KeyError, IndexError):
        lines = [ln for ln in text.splitlines() if ln.strip()]
        why = "over its budget" if late else (lines[-1][:200] if lines else f"exit {rc}")
        return (Status.BUDGET if late else Status.ERROR), f"localize: {why}", {}
    keys = ("status", "reason", "first_module", "first_op", "op_rel_err", "module_rel_err", "repro", "compiled_region")
    ans = {k: row.get(k) for k in keys}
    return Status.PASS, f"localize: {row.get('reason', '')}"[:300], ans
