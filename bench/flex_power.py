"""Verdict power of `bringup flex`'s numerics: perturbing FlexAttention backends x strength x precision ->
flagged / applicable, and the false failures of correct backends, over the quick and the default matrix.

    .venv/bin/python bench/flex_power.py [--matrix quick|default|sample] [--precisions fp32,bf16,amp-bf16]
        [--families scale,score_hash,...] [--correct eager,aot_eager,inductor,upcast,...] [--no-power]
        [--backward] [--limit N] [--json FILE]
    .venv/bin/python bench/flex_power.py --table-only --json FILE [FILE ...]

Every forward run is a real flex case (bringup/flex/case.py's run_case, in this process, device cpu,
forward only: FlexAttention has no cpu backward), compiled with:
  * a perturbing backend (tests/flex/flex_bend.py: FAMILIES, each at its strengths): aot_eager with every
    FlexAttention call computed by a bent implementation; "flagged" = the case's status is fail_numeric;
  * a correct backend: eager, aot_eager, inductor, and flex_bend's CORRECT implementations (an fp32
    P @ V, an online softmax over key blocks in either order, split-kv with rounded partial outputs, q
    pre-scaled and rounded); any status but pass is a false failure.
Each family run records its `effect`: the same backend on the case's inputs in float64 against itself at
strength 0 (the largest relative RMS change of the output over the (batch, kv-head) slices), and the table
counts it applicable when effect >= 2 x the correct bf16 run's own error (inductor's bf16 rel_rmse on that
case, largest over slices): a perturbation smaller than that is under bf16's resolution.
`--backward`: the gradients, on synthetic tensors (no cpu backward to compile): flex_bend.flash_backward
(FlexAttention's math backward: fp32 scores, P and dS rounded) as the correct device, bent by BWD_FAMILIES,
judged by flex's check_attention against the float64 reference, the trusted run and the dither, exactly
as a case on a device with a backward is.
Rows are appended to --json as they finish (an interrupted run keeps what it measured). It is a bench,
not a test: the quick matrix in three precisions is ~1,000 runs (an hour on one busy core).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "flex"))

import flex_bend as fb  # noqa: E402
from torch._dynamo import register_backend  # noqa: E402

from bringup.case import Case  # noqa: E402
from bringup.checks.module_rule import one_rounding  # noqa: E402
from bringup.device import Device  # noqa: E402
from bringup.flex import suite  # noqa: E402
from bringup.flex.case import _inputs, run_case  # noqa: E402
from bringup.flex.dither import dithered_attention  # noqa: E402
from bringup.flex.matrix import Matrix, default_matrix, quick_matrix  # noqa: E402
from bringup.flex.mods import AttnShape, build_mod, default_scale, reference_for  # noqa: E402
from bringup.flex.reference import Attention, dense_attention, gather_kv, gather_q, ref_slices, trusted_attention  # noqa: E402
from bringup.flex.tolerance import attn_reason, check_attention, failed_checks  # noqa: E402
from bringup.runner.worker import WorkerContext  # noqa: E402

PRECISIONS = ("fp32", "bf16", "amp-bf16")
CORRECT = ("eager", "aot_eager", "inductor", *fb.CORRECT)
STRENGTHS = {**fb.FAMILIES, **fb.HELD_OUT}
APPLICABLE = 2.0  # effect >= this x the correct bf16 run's error (the goal's threshold)
# mods whose score derivative is 1 (masks, additive biases): flash_backward's synthetic backward needs it
BWD_MODS = ("noop", "causal", "sliding_window", "prefix_lm", "document_mask", "alibi", "head_bias")
BWD_SHAPES = (AttnShape(2, 256, 4, 2, 64), AttnShape(1, 512, 4, 4, 64))


def _matrix(name: str) -> Matrix:
    """quick, default, or sample: the default matrix's seq-1024 cases (all 8 mods, batch 1 and 4, 16/16 and
    16/2 heads, batch 1 first: what a 2-core cpu runs in hours; seq 4096 / 8192 hold 1-4 G scores per case,
    and aot_eager's dense scores at seq 8192, batch 4 are 17 GB)."""
    if name == "quick":
        return quick_matrix()
    full = default_matrix()
    if name == "default":
        return full
    # batch 1 first: an interrupted run has covered every mod and both head layouts at batch 1
    return Matrix("sample", tuple(sorted((c for c in full.cases if c.seq == 1024), key=lambda c: c.batch)))


def _backend_name(family: str, d: float) -> str:
    """A registered dynamo backend for flex_bend's family at strength d (registered once)."""
    from torch._dynamo.backends.registry import list_backends

    name = f"flex_bend_{family}_{d:g}"
    if name not in list_backends(exclude_tags=()):
        register_backend(name=name, compiler_fn=fb.bend_backend(family, d))
    return name


def _correct_name(backend: str) -> str:
    return f"flex_bend_{backend}" if backend in fb.CORRECT else backend


def _run(case: Case, ctx: WorkerContext) -> dict[str, Any]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = run_case(case, ctx)
    fields = r.fields
    return {
        "status": r.status.value,
        "reason": (r.reason or "")[:400],
        "rel_rmse": r.metrics["rel_rmse"].value if "rel_rmse" in r.metrics else None,
        "rule": fields.get("rule"),
        "checks": sorted({c["check"] for c in fields.get("failed_checks", [])}),
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def _effect(case: Case, family: str, d: float) -> float:
    """The family's float64 effect on this case's output: the backend at d vs at 0 on the same inputs
    (largest relative RMS over the slices)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    p = case.params
    shape = AttnShape(p["batch"], p["seq"], p["q_heads"], p["kv_heads"], p["head_dim"])
    x = {k: v.double() for k, v in _inputs(shape, torch.bfloat16, False).items()}
    mod = build_mod(p["mod"], shape, torch.device("cpu"))
    bm = None
    if mod.mask_mod is not None:
        bh = (None, None) if mod.mask_broadcast else (shape.batch, shape.q_heads)
        bm = create_block_mask(mod.mask_mod, bh[0], bh[1], shape.seq, shape.seq, device="cpu")
    outs = []
    for strength in (0.0, d):
        torch._dynamo.reset()
        f = torch.compile(flex_attention, backend=fb.bend_backend(family, strength), dynamic=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            o = f(
                x["q"],
                x["k"],
                x["v"],
                score_mod=mod.score_mod,
                block_mask=bm,
                enable_gqa=shape.q_heads > shape.kv_heads,
            )
        outs.append(gather_q(shape, ref_slices(shape), o.detach()))
    return max(_rel(outs[1][i], outs[0][i]) for i in range(outs[0].shape[0]))


def _rel(a: torch.Tensor, r: torch.Tensor) -> float:
    rms = float(r.pow(2).mean().sqrt())
    return float((a - r).pow(2).mean().sqrt()) / rms if rms else 0.0


def _emit(path: Path | None, row: dict[str, Any]) -> None:
    line = json.dumps(row)
    print(line, flush=True)
    if path is not None:
        with path.open("a") as f:
            f.write(line + "\n")


def _done(paths: list[Path]) -> set[tuple[Any, ...]]:
    """The runs an earlier, interrupted invocation already wrote to the rows file (--resume skips them)."""
    out: set[tuple[Any, ...]] = set()
    for p in paths:
        for line in p.read_text().splitlines() if p.exists() else []:
            r = json.loads(line)
            out.add((r["case"], r.get("backend") or r.get("family"), r.get("strength")))
    return out


def forward_rows(args: argparse.Namespace, ctx: WorkerContext) -> Iterator[dict[str, Any]]:
    matrix = _matrix(args.matrix)
    specs = matrix.cases[: args.limit] if args.limit else matrix.cases
    effects: dict[tuple[str, str, float], float] = {}
    done = _done([Path(p) for p in args.json[:1]]) if args.resume else set()
    for spec in specs:
        one = Matrix(matrix.name, (spec,))
        for prec in args.precisions:
            base = {"section": "forward", "matrix": args.matrix, "precision": prec}
            for backend in args.correct:
                case = suite.plan(one, Device("cpu"), dtype=prec, backward="off", backend=_correct_name(backend))[0]
                if (case.name, backend, None) in done:
                    continue
                yield (
                    base | {"case": case.name, "mod": spec.mod, "kind": "correct", "backend": backend} | _run(case, ctx)
                )
            if args.no_power:
                continue
            for family in args.families:
                for d in STRENGTHS[family]:
                    name = _backend_name(family, d)
                    case = suite.plan(one, Device("cpu"), dtype=prec, backward="off", backend=name)[0]
                    if (case.name, family, d) in done:
                        continue
                    key = (case.name.rsplit(" ", 1)[0], family, d)
                    if key not in effects:
                        effects[key] = _effect(case, family, d)
                    row = base | {
                        "case": case.name,
                        "mod": spec.mod,
                        "kind": "family",
                        "family": family,
                        "strength": d,
                        "effect": effects[key],
                    }
                    yield row | _run(case, ctx)


# ---- backward, synthetic -------------------------------------------------------------------------------
def _bwd_inputs(shape: AttnShape, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    B, Hq, Hkv, S, D = shape.batch, shape.q_heads, shape.kv_heads, shape.seq, shape.head_dim
    return {
        "q": torch.randn(B, Hq, S, D, generator=g),
        "k": torch.randn(B, Hkv, S, D, generator=g),
        "v": torch.randn(B, Hkv, S, D, generator=g),
        "do": torch.randn(B, Hq, S, D, generator=g),
    }


def backward_rows(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    for shape in BWD_SHAPES:
        for mod in BWD_MODS:
            for prec, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
                x = {k: v.to(dtype) for k, v in _bwd_inputs(shape, 7).items()}
                dense, _ = reference_for(mod, shape)
                slices, scale = ref_slices(shape), default_scale(shape.head_dim)
                at = Attention(x["q"], x["k"], x["v"], dense, scale, slices, x["do"])
                ref = dense_attention(at)
                trusted = trusted_attention(at, dtype)
                dith: list[dict[str, torch.Tensor]] = []
                if dtype == torch.bfloat16:
                    dith, _ = dithered_attention(at, one_rounding(dtype), ref)
                inputs = {
                    "q": gather_q(shape, slices, x["q"]),
                    "k": gather_kv(slices, x["k"]),
                    "v": gather_kv(slices, x["v"]),
                }
                label = f"{mod} b{shape.batch} s{shape.seq} h{shape.q_heads}/{shape.kv_heads} d{shape.head_dim}"
                base = {"section": "backward", "precision": prec, "case": label, "mod": mod}
                clean = fb.flash_grads(shape, x, dense, dtype)
                err = max(_rel(clean[n][i], ref[n][i]) for n in ref for i in range(len(slices)))
                yield (
                    base
                    | {"kind": "correct", "backend": "flash_backward", "correct_err": err}
                    | _judge(clean, ref, dtype, trusted, dith, inputs)
                )
                x64 = {k: v.double() for k, v in x.items()}
                clean64 = fb.flash_grads(shape, x64, dense, torch.float64)
                for family, strengths in fb.BWD_FAMILIES.items():
                    if args.families_bwd and family not in args.families_bwd:
                        continue
                    for d in strengths:
                        bent64 = fb.flash_grads(shape, x64, dense, torch.float64, family, d)
                        eff = max(_rel(bent64[n][i], clean64[n][i]) for n in ref for i in range(len(slices)))
                        got = fb.flash_grads(shape, x, dense, dtype, family, d)
                        yield (
                            base
                            | {"kind": "family", "family": family, "strength": d, "effect": eff, "correct_err": err}
                            | _judge(got, ref, dtype, trusted, dith, inputs)
                        )


def _judge(
    got: dict[str, torch.Tensor],
    ref: dict[str, torch.Tensor],
    dtype: torch.dtype,
    trusted: dict[str, torch.Tensor],
    dith: list[dict[str, torch.Tensor]],
    inputs: dict[str, torch.Tensor],
) -> dict[str, Any]:
    t0 = time.perf_counter()
    rep = check_attention(got, ref, dtype, trusted, dith, inputs)
    return {
        "status": "pass" if rep.ok else "fail_numeric",
        "reason": attn_reason(rep)[:400],
        "rel_rmse": rep.rel_rmse,
        "checks": sorted({c["check"] for c in failed_checks(rep)}),
        "wall_s": round(time.perf_counter() - t0, 2),
    }


# ---- the tables ----------------------------------------------------------------------------------------
def _correct_err(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per case (name without its precision): the correct bf16 run's error (inductor's bf16 rel_rmse)."""
    out: dict[str, float] = {}
    for r in rows:
        if r.get("section") == "forward" and r["kind"] == "correct" and r["backend"] == "inductor":
            if r["precision"] == "bf16" and r.get("rel_rmse") is not None:
                out[r["case"].rsplit(" ", 1)[0]] = r["rel_rmse"]
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    err = _correct_err(rows)
    for section in ("forward", "backward"):
        sec = [r for r in rows if r.get("section") == section]
        if not sec:
            continue
        precs = [p for p in (*PRECISIONS, "fp16") if any(r["precision"] == p for r in sec)]
        lines.append(f"\n== {section}: flagged / applicable (effect >= {APPLICABLE:g} x the correct bf16 run's error)")
        fams = sorted({r["family"] for r in sec if r["kind"] == "family"})
        lines.append(f"{'family':<18}" + "".join(f"{p:>22}" for p in precs))
        tot = {g: {p: [0, 0] for p in precs} for g in ("all", "held", "below")}
        for fam in fams:
            cells = []
            for p in precs:
                app = [r for r in sec if r["kind"] == "family" and r["family"] == fam and r["precision"] == p]
                a, f, b, bf = _count(app, err, section)
                for g, add in (
                    ("all", (f, a)),
                    ("below", (bf, b)),
                    ("held", (f, a) if fam.startswith("ho_") else (0, 0)),
                ):
                    tot[g][p][0] += add[0]
                    tot[g][p][1] += add[1]
                cells.append(f"{f}/{a}" + (f" (+{bf}/{b} below)" if b else ""))
            lines.append(f"{fam:<18}" + "".join(f"{c:>22}" for c in cells))
        names = {"all": "all families", "held": "  held out (ho_)", "below": "  below threshold"}
        for g, name in names.items():
            lines.append(f"{name:<18}" + "".join(f"{f'{t[0]}/{t[1]}':>22}" for t in tot[g].values()))
        lines.append(f"\n== {section}: false failures of correct backends (any status but pass)")
        for p in precs:
            cor = [r for r in sec if r["kind"] == "correct" and r["precision"] == p]
            bad = [r for r in cor if r["status"] != "pass"]
            by = defaultdict(lambda: [0, 0])
            for r in cor:
                by[r["backend"]][1] += 1
                by[r["backend"]][0] += r["status"] != "pass"
            detail = ", ".join(f"{b} {v[0]}/{v[1]}" for b, v in by.items())
            lines.append(f"{p:<10} {len(bad)}/{len(cor)}  ({detail})")
            for r in bad[:10]:
                lines.append(f"    {r['backend']} {r['case']}: {r['status']} {r['reason'][:160]}")
        missed = [r for r in sec if r["kind"] == "family" and r["status"] != "fail_numeric" and _applicable(r, err)]
        if missed:
            lines.append(f"\n== {section}: applicable runs not flagged")
            for r in missed[:40]:
                lines.append(
                    f"    {r['precision']:<9} {r['family']}@{r['strength']:g} {r['case']}: effect "
                    f"{r['effect']:.3g} ({r['status']}; {r['reason'][:120]})"
                )
    return "\n".join(lines)


def _applicable(r: dict[str, Any], err: dict[str, float]) -> bool:
    base = r.get("correct_err") if r.get("section") == "backward" else err.get(r["case"].rsplit(" ", 1)[0])
    return base is not None and r.get("effect") is not None and r["effect"] >= APPLICABLE * base


def _count(rows: list[dict[str, Any]], err: dict[str, float], section: str) -> tuple[int, int, int, int]:
    """(applicable, flagged among them, below the threshold, flagged among those)."""
    app = [r for r in rows if _applicable(r, err)]
    low = [r for r in rows if not _applicable(r, err)]
    flagged = lambda rs: sum(r["status"] == "fail_numeric" for r in rs)
    return len(app), flagged(app), len(low), flagged(low)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--matrix", default="quick", choices=("quick", "default", "sample"))
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--families", default=",".join(fb.FAMILIES))
    ap.add_argument("--held-out", action="store_true", help="add flex_bend.HELD_OUT (written after the rule froze)")
    ap.add_argument("--families-bwd", default="", help="backward families (default: all)")
    ap.add_argument("--correct", default=",".join(CORRECT))
    ap.add_argument("--no-power", action="store_true", help="correct backends only (false failures)")
    ap.add_argument("--backward", action="store_true", help="the synthetic backward section only")
    ap.add_argument("--limit", type=int, default=0, help="first N cases of the matrix")
    ap.add_argument("--json", nargs="*", default=[], help="rows file(s): appended to; --table-only reads them")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--resume", action="store_true", help="skip the runs the --json rows file already has")
    args = ap.parse_args(argv)
    args.precisions = [p for p in args.precisions.split(",") if p]
    args.families = [f for f in args.families.split(",") if f] + (list(fb.HELD_OUT) if args.held_out else [])
    args.families_bwd = [f for f in args.families_bwd.split(",") if f]
    args.correct = [c for c in args.correct.split(",") if c]
    paths = [Path(p) for p in args.json]
    if args.table_only:
        rows = [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]
        print(table(rows))
        return 0
    out = paths[0] if paths else None
    rows = []
    t0 = time.perf_counter()
    if args.backward:
        it: Iterator[dict[str, Any]] = backward_rows(args)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="flex_power_"))
        it = forward_rows(args, WorkerContext(Device("cpu"), None, tmp, tmp))
    for row in it:
        rows.append(row)
        _emit(out, row)
    print(table(rows))
    print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
