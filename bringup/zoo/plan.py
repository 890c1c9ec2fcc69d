"""The zoo's planning: the models a --source lists (transformers types, timm models, Hub ids, a FILE of
module:function / config paths / ids), every option validated before any work (bad input: one line, exit 2), one
case per model (zoo/cases.py), a Hub sweep's through zoo/sweep.py, --size full's for zoo/full.py.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

from bringup.case import Case
from bringup.device import Device
from bringup.errors import BadInput, user_regex
from bringup.hub import plan as hub_plan
from bringup.options import Options, check_compile_backend
from bringup.precision import Precision, parse_precision
from bringup.zoo import modules as zoo_modules
from bringup.zoo import sweep as zoo_sweep
from bringup.zoo.args import (
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT,
    FULL_BATCH,
    FULL_SEQ,
    FULL_STEPS,
    FULL_TIMEOUT,
    TINY_BATCH,
    TINY_SEQ,
    ZooOptions,
)
from bringup.zoo.baseline import load_baseline
from bringup.zoo.cases import FULL_ENTRY, Entry, full_params, make_case

# `bringup run --quick`: three HF types (dense GQA + rope + RMSNorm; learned positions + LayerNorm +
# gelu; qk-norm) and a timm convnet (BatchNorm). The last field is a scheduling hint only (Case.cost: workers side
# by side start the longest first, bringup/runner/schedule.py): a case's work, as seconds of 2 cpu cores with
# cold inductor compiles; no verdict or figure reads it.
QUICK = (
    ("hf", "llama", "causal-lm", 45.0),
    ("hf", "gpt2", "causal-lm", 45.0),
    ("hf", "qwen3", "causal-lm", 40.0),
    ("timm", "test_resnet", "", 80.0),
)
FULL_EXTRA_TIMM = 8  # `bringup run --full`: all hf-causal types and the first timm models
# hf-causal's long rows: one case per attention family at LONG_SEQ tokens (every row of its two microbatches), so
# rotary at large angles, softmax over long rows, windows that slide and long reductions are judged in the default
# sweep; the tiny width keeps them cheap (each type chosen among its family's for a float64 step of seconds). As
# long-context jobs run them: batch 1 (LONG_BATCH: one left-padded row, one packed row), and a length that no block
# divides (509, prime: a kernel's last partial block runs, where 512 fills every block of 16 ... 512 exactly).
LONG_SEQ, LONG_BATCH = 509, 1
LONG = (
    ("llama", "full attention"),
    ("mistral", "sliding window"),
    ("gemma2", "alternating sliding / full, softcap"),
    ("deepseek_v3", "multi-head latent attention"),
    ("minimax", "linear attention hybrid"),
    ("zamba2", "SSM (mamba2) hybrid"),
)
# tiny models' --batch / --seq: a float64 reference and the module check hold every activation of a step on the
# host; beyond these a tiny case stops being tiny (MIN_TINY_SEQ: a padded row keeps a document of >= 4 tokens)
MAX_TINY_BATCH, MIN_TINY_SEQ, MAX_TINY_SEQ = 16, 8, 4096


# ---- sources --------------------------------------------------------------------------------------
def hf_causal() -> list[Entry]:
    from bringup.models import tiny as mz

    return [Entry("hf", t, "causal-lm") for t in mz.causal_types()]


def long_entries() -> list[Entry]:
    """hf-causal's long-row cases (LONG): `TYPE@512`."""
    return [Entry("hf", t, "causal-lm", label=f"{t}@{LONG_SEQ}") for t, _ in LONG]


def _hf_all() -> list[Entry]:
    from bringup.models import tiny as mz

    return [Entry("hf", t, task) for t, task in mz.all_types()]


def timm_entries() -> list[Entry]:
    from bringup.zoo.timm_models import DEFAULT_MODELS, require

    require()
    return [Entry("timm", m.name) for m in DEFAULT_MODELS]


def _hub_entry(text: str, where: str) -> Entry:
    """A Hub id, resolved now (cache, or the Hub when online): a missing or uncached id is BadInput."""
    from bringup.hub import build, refs

    ref = refs.parse_ref(text[len(refs.HUB_PREFIX) :] if text.startswith(refs.HUB_PREFIX) else text, where)
    task, _ = build.task_of(refs.read_config(refs.resolve(ref), ref.name))
    return Entry("hub", ref.name, task)


def _hub_top() -> list[Entry]:
    from bringup.hub import build, refs

    return [Entry("hub-top", e["id"], build.task_of(e["config"])[0]) for e in refs.catalogue()]


def read_model_file(path: str) -> list[Entry]:
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"--source {path}: cannot read: {type(e).__name__}: {e}") from e
    out = []
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.endswith(".json"):
            cfg = Path(line) if Path(line).is_absolute() else (p.parent / line)
            if not cfg.is_file():
                raise BadInput(f"--source {path}:{i}: config {line} does not exist")
            out.append(Entry("hf-json", str(cfg.resolve()), label=line))
        elif line.startswith("hub:") or re.fullmatch(r"[\w.\-]+/[\w.\-]+(@[\w.\-/]+)?", line):
            out.append(_hub_entry(line, f"--source {path}:{i}"))
        elif re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", line):
            out.append(Entry("fn", line))
        else:
            raise BadInput(
                f"--source {path}:{i}: {line!r} is neither module:function, a config .json path nor a "
                "Hub id (ORG/NAME or hub:NAME)"
            )
    if not out:
        raise BadInput(f"--source {path}: no models listed")
    return out


def entries_for(source: str) -> list[Entry]:
    from bringup.zoo import upstream

    if upstream.handles(source):  # dynamo:SUITE, hf-class:NAME, csv:FILE: named as upstream names them
        return upstream.entries(source)
    if source == "hf-causal":
        return hf_causal()
    if source == "hf-all":
        return _hf_all()
    if source == "timm":
        return timm_entries()
    if source == "hub-top":
        return _hub_top()
    if source.startswith("hub:"):
        from bringup.hub import refs

        return [_hub_entry(ref.name, f"--source {source}") for ref in refs.parse_ids(source)]
    if Path(source).exists():
        return read_model_file(source)
    raise BadInput(
        f"unknown --source {source!r}: use hf-causal, hf-all, timm, hub-top, hub:ORG/NAME, dynamo:huggingface, "
        "dynamo:timm, hf-class:NAME, csv:FILE.csv or a FILE that exists"
    )


# ---- cases ----------------------------------------------------------------------------------------
def resolved(opts: ZooOptions) -> ZooOptions:
    """`opts` with the size's defaults where an option was not given (--steps, --case-budget; at --size full
    --batch and --seq too): a copy, the options as given are never changed."""
    full = opts.size == "full"
    return dataclasses.replace(
        opts,
        steps=opts.steps if opts.steps is not None else (FULL_STEPS if full else DEFAULT_STEPS),
        case_budget=opts.case_budget if opts.case_budget is not None else (FULL_TIMEOUT if full else DEFAULT_TIMEOUT),
        batch=FULL_BATCH if full and opts.batch is None else opts.batch,
        seq=FULL_SEQ if full and opts.seq is None else opts.seq,
    )


def check_backend(name: str) -> str:
    if name.lower() == "none":
        return "none"
    return check_compile_backend(name)


def build_cases(options: Options, device: Device) -> list[Case]:
    """Validate every option (BadInput before any work), then one case per model."""
    opts = resolved(options.of(ZooOptions))
    prec = parse_precision(opts.dtype)
    if prec.name == "fp64":
        raise BadInput(
            f"--dtype {opts.dtype}: the zoo runs fp32, bf16, fp16, amp-bf16 or amp-fp16 (float64 is the reference)"
        )
    size = opts.size
    sweep = hub_plan.is_sweep(opts.source)
    zoo_sweep.check_options(opts)
    zoo_sweep.check_ranks(opts.nproc, device)
    if size == "full":
        if sweep:
            raise BadInput(
                "--size full with a Hub sweep: use --full-top K (the K most downloaded signatures at "
                "real size, beside the tiny sweep)"
            )
        return build_full_cases(opts, prec, device)
    if opts.reference is not None and not (sweep and opts.full_top):
        raise BadInput(
            "--reference applies to --size full (and --full-top); tiny models are judged against float64 on cpu"
        )
    batch, seq = opts.batch, opts.seq
    if batch is not None and not 1 <= batch <= MAX_TINY_BATCH:
        raise BadInput(f"--batch must be 1..{MAX_TINY_BATCH} rows for tiny models (default {TINY_BATCH}), got {batch}")
    if seq is not None and not MIN_TINY_SEQ <= seq <= MAX_TINY_SEQ:
        raise BadInput(
            f"--seq must be {MIN_TINY_SEQ}..{MAX_TINY_SEQ} tokens for tiny models (default {TINY_SEQ}), got {seq}"
        )
    noise_seeds = opts.noise_seeds
    if noise_seeds is None or not 0 <= noise_seeds <= 16:
        raise BadInput(f"--noise-seeds must be 0..16, got {noise_seeds}")
    if opts.steps is None or opts.steps < 1:
        raise BadInput(f"--steps must be >= 1, got {opts.steps}")
    if opts.limit is not None and opts.limit < 1:
        raise BadInput(f"--limit must be >= 1, got {opts.limit}")
    if not (opts.case_budget > 0 and math.isfinite(opts.case_budget)):
        raise BadInput(f"--case-budget must be a positive number of seconds, got {opts.case_budget}")
    pattern = None if opts.filter is None else user_regex(opts.filter, "--filter")
    backend = check_backend(opts.compile_backend or device.default_compile_backend)
    if sweep:
        return zoo_sweep.build_cases(opts, opts.hub_fetch(options.common.db), prec, backend, noise_seeds, pattern)
    baseline = load_baseline(opts.baseline) if opts.baseline else None
    inputs = opts.inputs or "text"
    entries = entries_for(opts.source)
    if opts.source == "hf-causal" and not seq and inputs == "text" and not opts.baseline and opts.limit is None:
        entries += long_entries()  # the long rows of the default sweep (LONG)
    entries = _select(entries, pattern, opts)
    if baseline is not None:
        baseline.check_comparable([e.name for e in entries], prec.name, opts.steps, opts.baseline)
    module_check = zoo_modules.from_arg(opts.module_check)
    return [
        make_case(
            e,
            prec.name,
            opts.steps,
            backend,
            opts.case_budget,
            opts.seed,
            baseline,
            noise_seeds,
            module_check,
            inputs,
            LONG_BATCH if _long(e) else batch or 0,
            LONG_SEQ if _long(e) else seq or 0,
        )
        for e in entries
    ]


def _long(e: Entry) -> bool:
    return e.label.endswith(f"@{LONG_SEQ}")


def _select(entries: list[Any], pattern: Any, opts: ZooOptions) -> list[Any]:
    """The entries --filter keeps, cut to --limit; none left is bad input."""
    if pattern is not None:
        entries = [e for e in entries if pattern.search(e.name)]
    if opts.limit is not None:
        entries = entries[: opts.limit]
    if not entries:
        raise BadInput(f"zoo: no model of --source {opts.source} matches --filter {opts.filter!r}")
    return entries


def build_full_cases(opts: ZooOptions, prec: Precision, device: Device) -> list[Case]:
    """--size full: Hub ids or catalogue entries at their real size (zoo/full.py)."""
    from bringup.hub import refs

    if opts.steps < 1:
        raise BadInput(f"--steps must be >= 1, got {opts.steps}")
    if opts.batch < 1 or opts.seq < 2:
        raise BadInput(f"--batch must be >= 1 and --seq >= 2, got {opts.batch} and {opts.seq}")
    if opts.limit is not None and opts.limit < 1:
        raise BadInput(f"--limit must be >= 1, got {opts.limit}")
    timeout = opts.case_budget
    if not (timeout > 0 and math.isfinite(timeout)):
        raise BadInput(f"--case-budget must be a positive number of seconds, got {opts.case_budget}")
    pattern = None if opts.filter is None else user_regex(opts.filter, "--filter")
    backend = check_backend(opts.compile_backend or device.default_compile_backend)
    reference = opts.reference or ("baseline" if opts.baseline else "cpu")
    if reference == "baseline" and not opts.baseline:
        raise BadInput("--reference baseline needs --baseline BUNDLE (an exported full-size run of the same ids)")
    entries = [e for e in entries_for(opts.source) if e.source in ("hub", "hub-top")]
    if not entries:
        raise BadInput(
            f"--size full: --source {opts.source} lists no Hub model (use hub-top, hub:ORG/NAME or a file of ids)"
        )
    entries = _select(entries, pattern, opts)
    if reference == "none" and backend == "none" and not opts.baseline:
        raise BadInput(
            "--reference none with --compile-backend none and no --baseline: nothing would judge the run's numerics"
        )
    weights = {
        e.name: "cache" if e.source == "hub" and refs.weight_files(refs.parse_ref(e.model, "hub")) else "random"
        for e in entries
    }
    baseline = load_baseline(opts.baseline) if opts.baseline else None
    cases = []
    for e in entries:
        params = full_params(
            e.source, e.model, e.task, prec.name, opts.steps, backend, weights[e.name], reference, opts
        )
        if baseline is not None:
            params["baseline"] = baseline.full_entry_for(e.name, params, opts.baseline)
        cases.append(Case("zoo", e.name, params, FULL_ENTRY, budget_s=timeout, isolated=True))
    return cases


def run_cases(device: Device, quick: bool) -> list[Case]:
    if quick:
        return [
            dataclasses.replace(make_case(Entry(s, m, t), "fp32", 3, device.default_compile_backend, 300.0), cost=cost)
            for s, m, t, cost in QUICK
        ]
    entries = hf_causal() + timm_entries()[:FULL_EXTRA_TIMM]
    cases = [make_case(e, "fp32", DEFAULT_STEPS, device.default_compile_backend, DEFAULT_TIMEOUT) for e in entries]
    return cases + [
        make_case(
            e, "fp32", DEFAULT_STEPS, device.default_compile_backend, DEFAULT_TIMEOUT, batch=LONG_BATCH, seq=LONG_SEQ
        )
        for e in long_entries()
    ]
