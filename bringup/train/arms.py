"""The time-to-first-step arms: each a (mode, cache) pair run in a fresh worker process, as a new job
meets it, and the "fastest start" table and advice built from what they measured.

Modes beyond `bringup.models.lm.MODES` (eager, compile, regional), applied by train/modes.py:
    nested  the whole model compiled, each decoder block's forward a `torch.compiler.nested_compile_region`
            (repeated blocks are traced and compiled once, then reused inside the one graph)
    aot     ahead of time: `torch.compile(lm_loss, fullgraph=True).aot_compile(example)`, the compiled
            function saved with `save_compiled_function`; a new job loads it with
            `torch.compiler.load_compiled_function` (nothing traced, nothing compiled by dynamo)
Caches: cold (empty dirs), warm (the dirs a cold case left), artifact (empty dirs + a portable artifact
loaded first: torch's mega-cache for compile/regional/nested, the AOT-compiled function for aot).
"""

from __future__ import annotations

from typing import Any

from bringup.train.spec import CACHE_ARTIFACT, CACHE_COLD, CACHE_NONE, CACHE_WARM

EXTRA_MODES = ("nested", "aot")
# `--cache all`: every arm, in an order the local executor can run (a warm or artifact arm after the
# cold case whose dirs / artifact it reuses).
ALL_ARMS: tuple[tuple[str, str], ...] = (
    ("eager", CACHE_NONE),
    ("compile", CACHE_COLD),
    ("regional", CACHE_COLD),
    ("nested", CACHE_COLD),
    ("aot", CACHE_COLD),
    ("compile", CACHE_WARM),
    ("regional", CACHE_WARM),
    ("nested", CACHE_WARM),
    ("compile", CACHE_ARTIFACT),
    ("regional", CACHE_ARTIFACT),
    ("aot", CACHE_ARTIFACT),
)
STEPS_N = (1, 100, 10_000)


# ---- the fastest-start table (in the driver; pure) ----------------------------------------------
def time_to_step(ttfs_s: float, step_s: float, n: int) -> float:
    """When step n ends: the job's time to first step, then n - 1 steady steps."""
    return ttfs_s + (n - 1) * step_s


def fastest(arms: list[dict[str, Any]], steps: tuple[int, ...] = STEPS_N) -> dict[int, str]:
    """{N: the arm that reaches step N first} over arms with a job ttfs and a steady step."""
    ok = [a for a in arms if a.get("job_ttfs_s") and a.get("step_s")]
    if not ok:
        return {}
    return {n: min(ok, key=lambda a: time_to_step(a["job_ttfs_s"], a["step_s"], n))["arm"] for n in steps}


def table(arms: list[dict[str, Any]], reference: str = "compile-cold") -> list[dict[str, Any]]:
    """One row per usable arm: the job's time to first step and its phases, steady step, its cost
    relative to full compile (`reference`'s steady step), and when it reaches each step N."""
    ref = next((a for a in arms if a["arm"] == reference and a.get("step_s")), None)
    rows = []
    for a in arms:
        if not a.get("job_ttfs_s") or not a.get("step_s"):
            continue
        row = {k: a.get(k) for k in ("arm", "job_ttfs_s", "phases", "step_s", "tokens_per_s", "recompiles")}
        row["steady_vs_full_compile"] = a["step_s"] / ref["step_s"] if ref else None
        row["reach_s"] = {str(n): time_to_step(a["job_ttfs_s"], a["step_s"], n) for n in STEPS_N}
        rows.append(row)
    return sorted(rows, key=lambda r: r["job_ttfs_s"])


def advice(arms: list[dict[str, Any]]) -> str:
    """The arm that reaches step N first for N in 1, 100, 10k, from the measured first and steady steps."""
    best = fastest(arms)
    if not best:
        return ""
    by = {a["arm"]: a for a in arms}
    parts = []
    for n, name in best.items():
        a = by[name]
        parts.append(f"step {n:,}: {name} ({time_to_step(a['job_ttfs_s'], a['step_s'], n):.3g} s)")
    return "fastest start (measured first step + (N-1) x steady step): " + "; ".join(parts)


def waterfall(phases: dict[str, float], width: int = 40) -> str:
    """The phases of one arm's time to first step as a text bar ('.' load, 'b' build, 'm' mode, 'd' dynamo,
    'a' AOT autograd, 'k' backend/kernels, 'r' the rest of step 1)."""
    marks = {
        "load_artifact_s": ".",
        "build_s": "b",
        "apply_mode_s": "m",
        "dynamo_s": "d",
        "aot_autograd_s": "a",
        "backend_s": "k",
        "run_s": "r",
    }
    total = sum(max(phases.get(k, 0.0), 0.0) for k in marks)
    if total <= 0:
        return ""
    out = ""
    for k, ch in marks.items():
        out += ch * round(width * max(phases.get(k, 0.0), 0.0) / total)
    return out
