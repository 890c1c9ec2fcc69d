"""Cache accounting of one compiled case: hits, misses and bypasses per cache layer (torch's counters,
train/compile_metrics.py), the compiled C++ kernels the artifact supplied vs the job built (files in the
inductor cache dir), the warnings a team needs (a backend that bypasses a layer), and the one
verdict: a warm or artifact arm whose caches gave nothing (every lookup missed) did not start warm."""

from __future__ import annotations

from typing import Any

from bringup.case import CaseResult, Status
from bringup.train.spec import CACHE_ARTIFACT, CACHE_WARM, TrainSpec

LAYERS = {
    "fx_graph": "fx",
    "aot_autograd": "aot",
    "kernels": "kernel",
    "generated_modules": "module",
    "precompile": "precompile",
}


def layers(cache: dict[str, int]) -> dict[str, dict[str, int]]:
    """{layer: {hit, miss[, bypass]}} from the flat counters."""
    out = {}
    for name, k in LAYERS.items():
        row = {"hit": cache.get(f"{k}_hit", 0), "miss": cache.get(f"{k}_miss", 0)}
        if f"{k}_bypass" in cache:
            row["bypass"] = cache[f"{k}_bypass"]
        out[name] = row
    out["autotune"] = {"ran": cache.get("autotune", 0)}
    return out


def warnings(spec: TrainSpec, snap: dict[str, Any]) -> list[str]:
    """Plain warnings from what the counters show (no list of backends: a rule on the counters). None for
    aot: `aot_compile` bundles the compiled code into the function it returns (it bypasses the FX graph
    cache by design, and takes only backends whose output it can serialize), so the artifact is that
    function, not these layers."""
    if spec.mode == "aot":
        return []
    c, out = snap["cache"], []
    compiled_graphs = snap["graphs"] > 0
    if compiled_graphs and c["aot_hit"] + c["aot_miss"] + c["aot_bypass"] == 0:
        out.append(
            f"backend {spec.backend!r} bypasses AOTAutograd's cache (it applies to inductor-style compilers "
            "only): every new job traces forward and backward again"
        )
    elif c["aot_bypass"]:
        out.append(
            f"AOTAutograd's cache was bypassed {c['aot_bypass']} time(s) (a graph it cannot cache): those "
            "graphs compile again in every new job"
        )
    if compiled_graphs and c["fx_hit"] + c["fx_miss"] + c["fx_bypass"] == 0:
        out.append(
            f"backend {spec.backend!r} uses no FX graph cache: its code generation is not reused by a new "
            "job (warm caches and artifacts cannot help it)"
        )
    elif c["fx_bypass"]:
        out.append(
            f"the FX graph cache was bypassed {c['fx_bypass']} time(s): those graphs compile again in every new job"
        )
    return out


def reused_nothing(spec: TrainSpec, cache: dict[str, int], backend: tuple[str, dict[str, int]] | None = None) -> str:
    """Non-empty when a warm or artifact arm looked its caches up and every lookup missed: it started
    cold, so its time to first step says nothing about a warm start. `backend`: the device family's own
    persistent compile cache (its name, {hit, miss, failed}: PyTorch/XLA's), counted with torch's."""
    if spec.cache not in (CACHE_WARM, CACHE_ARTIFACT) or spec.mode == "aot":
        return ""
    own = backend[1] if backend else {}
    hits = cache["fx_hit"] + cache["aot_hit"] + own.get("hit", 0)
    misses = cache["fx_miss"] + cache["aot_miss"] + own.get("miss", 0) + own.get("failed", 0)
    if misses and not hits:
        src = "the loaded cache artifact" if spec.cache == CACHE_ARTIFACT else "the warm cache dirs"
        text = f"{src} gave nothing: {cache['fx_miss']} FX graph and {cache['aot_miss']} AOTAutograd cache miss(es)"
        if backend:
            text += (
                f", {backend[0]}: {own.get('miss', 0)} miss(es) and {own.get('failed', 0)} entr(ies) it "
                "wrote but could not load"
            )
        return text + ", 0 hits: this job compiled cold"
    return ""


def compiled_kernels(loaded: dict[str, Any], built: int | None) -> dict[str, int] | None:
    """The compiled C++ kernels (files on disk, not the in-memory `kernels` counters): how many the artifact
    supplied and how many this job had to build. None when not counted."""
    if built is None:
        return None
    return {"supplied": int(loaded.get("kernels_supplied", 0)), "built": built}


def kernel_warning(spec: TrainSpec, kernels: dict[str, int] | None) -> str:
    """An artifact arm that still built compiled kernels paid for them in its first step: say how many
    and why that can be (no kernel section, or kernels for other compile flags)."""
    if spec.cache != CACHE_ARTIFACT or not kernels or not kernels["built"]:
        return ""
    if not kernels["supplied"]:
        return (
            f"the cache artifact supplied no compiled kernels: this job built {kernels['built']} itself "
            "(the artifact holds graphs only)"
        )
    return (
        f"the cache artifact supplied {kernels['supplied']} compiled kernel(s) but this job built "
        f"{kernels['built']} more (other compile flags or code than the job that made it)"
    )


def account(
    r: CaseResult,
    spec: TrainSpec,
    snap: dict[str, Any],
    loaded: dict[str, Any],
    built: int | None = None,
    backend: tuple[str, dict[str, int]] | None = None,
) -> list[tuple[Status, str]]:
    """Record the case's cache layers and warnings; the verdicts they give (a warm start that was cold).
    `built`: compiled kernel files this job wrote (None: not counted). `backend`: the device family's own
    persistent compile cache's lookups in this job (Device.adapter.compile_cache_counts())."""
    r.fields["cache_layers"] = layers(snap["cache"])
    if backend is not None:
        r.fields["cache_layers"]["backend"] = {"name": backend[0], **backend[1]}
    kernels = compiled_kernels(loaded, built)
    if kernels is not None:
        r.fields["cache_layers"]["compiled_kernels"] = kernels
    if loaded:
        r.fields["cache_layers"]["artifact"] = {
            "loaded": sum(loaded.get("entries", {}).values()) or 1,
            "bytes": loaded.get("bytes", 0),
            "kernels": loaded.get("kernels_supplied", 0),
            "headers": loaded.get("headers_supplied", 0),
        }
    warns = warnings(spec, snap) + ([w] if (w := kernel_warning(spec, kernels)) else [])
    if warns:
        r.fields["cache_warnings"] = warns
    if why := reused_nothing(spec, snap["cache"], backend):
        return [(Status.UNSUPPORTED, why)]
    return []
