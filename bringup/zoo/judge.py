"""The zoo's verdicts on a tiny case: each device run against float64, bounded by the trusted runs' own noise
(checks/parity.py, checks/losscurve.py), and the run against an exported bundle (--baseline)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from bringup.case import CaseResult, Status
from bringup.checks.losscurve import compare_curves, rel_devs
from bringup.checks.masked_rows import NON_FINITE, describe, sentence
from bringup.checks.parity import parity, tolerance_for
from bringup.precision import Precision
from bringup.zoo.steps import RunOut, fail


@dataclass
class TrustedNoise:
    """The trusted run (cpu eager at the run precision) and its float64 reference under other seeds."""

    tensors: dict[str, Any] = field(default_factory=dict)  # name -> checks.parity.Noise
    curves: list[tuple[list[float], list[float]]] = field(default_factory=list)  # (trusted, float64) curves
    seeds: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    zeros: frozenset[str] = frozenset()  # tensors zero in exact arithmetic (parity.exact_zeros, the case's twin)


def judge_run(
    got: RunOut,
    ref: RunOut,
    base: RunOut | None,
    prec: Precision | torch.dtype,
    noise: TrustedNoise | None = None,
    trusted: bool = False,
) -> tuple[Any, Any]:
    """The zoo's verdict on one run: (ParityReport of loss, logits and every grad at step 0, CurveReport
    of the K-step loss curve), both against float64 and bounded by the trusted runs (checks/parity.py)."""

    nz = noise or TrustedNoise()
    with_base = base is not None and not trusted
    rep = parity(
        got.tensors,
        ref.tensors,
        prec,
        baseline=base.tensors if with_base and base else None,
        trusted=trusted,
        noise=nz.tensors if with_base else None,
        zeros=nz.zeros,
    )
    curve = compare_curves(
        got.curve,
        ref.curve,
        prec,
        baseline=base.curve if with_base and base else None,
        trusted=trusted,
        noise=nz.curves if with_base else (),
    )
    return rep, curve


def judge(
    r: CaseResult,
    label: str,
    got: RunOut,
    ref: RunOut,
    base: RunOut | None,
    dtype: Precision,
    noise: TrustedNoise,
    trusted: bool = False,
) -> None:
    rep, curve = judge_run(got, ref, base, dtype, noise, trusted)
    r.fields[f"{label}_max_rel_err"] = rep.max_rel_err
    r.fields[f"{label}_loss_divergence"] = curve.max_rel_dev
    r.fields[f"{label}_first_diverging_step"] = curve.first_diverging_step
    if curve.chaotic:
        r.fields[f"{label}_loss_curve"] = curve.summary()
    r.fields[f"{label}_tensors_compared"] = len(rep.tensors)
    r.fields["max_rel_err"] = max(r.fields.get("max_rel_err") or 0.0, rep.max_rel_err)
    r.fields["loss_divergence"] = max(r.fields.get("loss_divergence") or 0.0, curve.max_rel_dev)
    if not rep.ok:
        r.fields[f"{label}_parity"] = rep.summary()
        fail(r, Status.FAIL_NUMERIC, f"{label}: {rep.summary()}")
    if not curve.ok:
        fail(r, Status.FAIL_NUMERIC, f"{label}: {curve.summary()}")


def judge_graphs(r: CaseResult, graphs: Any) -> None:
    """A compiled run that was not compiled: a backend that raised (dynamo ran the frame eager: fail_compile) or no
    graph captured at all (silent_eager). `graphs`: checks/graphs.GraphReport."""
    if graphs.backend_errors:
        fail(r, Status.FAIL_COMPILE, f"compiled: {graphs.backend_failure()}")
    if graphs.graph_count == 0:
        fail(r, Status.SILENT_EAGER, "compiled: dynamo captured no graph (the run was eager)")


def judge_pads(r: CaseResult, label: str, got: RunOut, ref: RunOut, uniform: Any) -> None:
    """A run's logits at positions no loss reads (pads: what the kernel chose for them, checks/masked_rows.py):
    finite, or the case fails there; which convention they follow is said on the case, never judged. `uniform`: the
    reference's pads under the uniform convention, or how to compute them (checks/masked_rows.describe)."""

    if got.pads is None or ref.pads is None:
        return
    seen = r.fields.setdefault("fully_masked_rows", {})
    seen[label] = describe(got.pads, ref.pads, uniform)
    r.fields["fully_masked_note"] = sentence(seen)
    if seen[label] == NON_FINITE and bool(torch.isfinite(ref.pads).all()):
        bad = int((~torch.isfinite(got.pads)).any(-1).sum()) if got.pads.dim() > 1 else 1
        fail(
            r,
            Status.FAIL_NUMERIC,
            f"{label}: non-finite logits at {bad} pad position(s) (no loss reads them, but a NaN there is a NaN in "
            "the next layer's keys; the float64 reference is finite there)",
        )


def compare_bundle(r: CaseResult, bl: dict[str, Any], dtype: Precision) -> None:
    """This run vs the same model in an exported run: the float64 reference curves must agree (same
    model, same data: otherwise the comparison says nothing), then each run's device curves and logits
    statistics must agree within the dtype's loss tolerance (both sides carry their own rounding)."""

    out: dict[str, Any] = {"bundle": bl.get("path"), "bundle_device": bl.get("device")}
    r.fields["baseline_check"] = out
    if not bl.get("found"):  # planning refuses this (BaselineIndex.check_comparable): reaching it is our bug
        out["status"] = "missing"
        fail(r, Status.ERROR, "baseline: the bundle has no result for this model: nothing compared")
        return
    if bl.get("dtype") != dtype.name or int(bl.get("steps") or 0) != len(r.series.get("loss.ref", [])):
        out["status"] = f"incomparable: bundle ran {bl.get('dtype')} x {bl.get('steps')} steps"
        fail(r, Status.ERROR, f"baseline: {out['status']}: nothing compared")
        return
    curves = bl.get("curves") or {}
    ours = {k: [v for _, v in s] for k, s in r.series.items()}
    ref_dev = max(rel_devs(ours.get("loss.ref", []), curves.get("loss.ref", [])), default=math.inf)
    out["ref_curve_dev"] = ref_dev
    if not curves.get("loss.ref") or ref_dev > 1e-6:
        out["status"] = "incomparable: the float64 reference curves differ (another model or data?)"
        fail(r, Status.FAIL_NUMERIC, f"baseline: float64 reference differs from the bundle's ({ref_dev:.3g})")
        return
    tol = tolerance_for(dtype).loss_rel * 2  # two independent runs, each within loss_rel of float64
    problems: list[str] = []
    for key in ("loss.eager", "loss.compiled"):
        if key in ours and key in curves:
            d = max(rel_devs(ours[key], curves[key]), default=0.0)
            out[f"{key}_dev"] = d
            if d > tol:
                problems.append(f"{key} deviates {d:.3g} (> {tol:.3g})")
    # logits: 16 fixed-position values, in units of the reference logits' std. Each side is within
    # ~rel_rmse of float64 in RMS (the max of 16 noisy samples stays within ~4 RMS), so two correct
    # runs differ by at most 2 x 4 x rel_rmse.
    sample_tol = 8 * tolerance_for(dtype).rel_rmse
    theirs, mine = bl.get("logits") or {}, r.fields.get("logits") or {}
    ref = mine.get("ref") or {}
    for key in ("eager", "compiled"):
        a, b = mine.get(key), theirs.get(key)
        if a and b and a.get("shape") == b.get("shape"):
            scale = max(abs(ref.get("std") or 0.0), 1e-12)
            d = max(abs(x - y) for x, y in zip(a["sample"], b["sample"], strict=False)) / scale
            out[f"logits.{key}_dev"] = d
            if d > sample_tol:
                problems.append(f"{key} logits deviate {d:.3g} std (> {sample_tol:.3g})")
    out["status"] = "ok" if not problems else "differs"
    if problems:
        fail(r, Status.FAIL_NUMERIC, f"baseline: vs the {bl.get('device')} bundle: {'; '.join(problems)}")
