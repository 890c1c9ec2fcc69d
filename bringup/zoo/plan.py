"""The zoo's planning: the models a --source lists (transformers types, timm models, Hub ids, a FILE of
module:function / config paths / ids), every option validated before any work (bad input: one line, exit 2), one
case per model (zoo/cases.py), a Hub sweep's through zoo/sweep.py, --size full's for zoo/full.py.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from bringup.case import Case
from bringup.device import Device
from bringup.errors import BadInput
from bringup.hub import build, refs
from bringup.models import tiny as mz
from bringup.options import Options
from bringup.precision import Precision, parse_precision
from bringup.zoo import modules as zoo_modules
from bringup.zoo import sweep as zoo_sweep
from bringup.zoo import upstream
from bringup.zoo.args import (
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT,
    ZooOptions,
    compile_backend,
)
from bringup.zoo.baseline import load_baseline
from bringup.zoo.cases import FULL_ENTRY, Entry, FullRun, TinyRun, full_params, make_case
from bringup.zoo.timm_models import DEFAULT_MODELS, require

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


# ---- sources --------------------------------------------------------------------------------------
def hf_causal() -> list[Entry]:
    return [Entry("hf", t, "causal-lm") for t in mz.causal_types()]


def long_entries() -> list[Entry]:
    """hf-causal's long-row cases (LONG): `TYPE@512`."""
    return [Entry("hf", t, "causal-lm", label=f"{t}@{LONG_SEQ}") for t, _ in LONG]


def _hf_all() -> list[Entry]:
    return [Entry("hf", t, task) for t, task in mz.all_types()]


def timm_entries() -> list[Entry]:
    require()
    return [Entry("timm", m.name) for m in DEFAULT_MODELS]


def _hub_entry(text: str, where: str) -> Entry:
    """A Hub id, resolved now (cache, or the Hub when online): a missing or uncached id is BadInput."""
    ref = refs.parse_ref(text[len(refs.HUB_PREFIX) :] if text.startswith(refs.HUB_PREFIX) else text, where)
    task, _ = build.task_of(refs.read_config(refs.resolve(ref), ref.name))
    return Entry("hub", ref.name, task)


def _hub_top() -> list[Entry]:
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
        return [_hub_entry(ref.name, f"--source {source}") for ref in refs.parse_ids(source)]
    if Path(source).exists():
        return read_model_file(source)
    raise BadInput(
        f"unknown --source {source!r}: use hf-causal, hf-all, timm, hub-top, hub:ORG/NAME, dynamo:huggingface, "
        "dynamo:timm, hf-class:NAME, csv:FILE.csv or a FILE that exists"
    )


# ---- cases ----------------------------------------------------------------------------------------
def resolved(opts: ZooOptions) -> ZooOptions:
    """`opts` with the size's defaults where an option was not given (ZooOptions.resolved)."""
    return opts.resolved()


def build_cases(options: Options, device: Device) -> list[Case]:
    """One case per model (the options were checked where they were built: ZooOptions.check, check_device)."""
    opts = resolved(options.of(ZooOptions))
    assert opts.steps is not None and opts.case_budget is not None  # resolved() sets both
    prec = parse_precision(opts.dtype)
    backend = compile_backend(opts.compile_backend or device.default_compile_backend)
    pattern = None if opts.filter is None else re.compile(opts.filter)
    if opts.size == "full":
        return build_full_cases(opts, prec, backend, pattern)
    if opts.sweep:
        return zoo_sweep.build_cases(opts, opts.hub_fetch(options.common.db), prec, backend, pattern)
    baseline = load_baseline(opts.baseline) if opts.baseline else None
    inputs = opts.inputs or "text"
    seq, batch = opts.seq, opts.batch
    entries = entries_for(opts.source)
    if opts.source == "hf-causal" and not seq and inputs == "text" and not opts.baseline and opts.limit is None:
        entries += long_entries()  # the long rows of the default sweep (LONG)
    entries = _select(entries, pattern, opts)
    if baseline is not None and opts.baseline:
        baseline.check_comparable([e.name for e in entries], prec.name, opts.steps, opts.baseline)
    run = TinyRun(
        prec.name,
        opts.steps,
        backend,
        opts.case_budget,
        seed=opts.seed,
        noise_seeds=opts.noise_seeds,
        module_check=zoo_modules.from_arg(opts.module_check),
        inputs=inputs,
        batch=batch or 0,
        seq=seq or 0,
    )
    long_run = dataclasses.replace(run, batch=LONG_BATCH, seq=LONG_SEQ)
    return [make_case(e, long_run if _long(e) else run, baseline) for e in entries]


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


def build_full_cases(opts: ZooOptions, prec: Precision, backend: str, pattern: re.Pattern[str] | None) -> list[Case]:
    """--size full: Hub ids or catalogue entries at their real size (zoo/full.py)."""
    reference = opts.reference or ("baseline" if opts.baseline else "cpu")
    entries = [e for e in entries_for(opts.source) if e.source in ("hub", "hub-top")]
    if not entries:
        raise BadInput(
            f"--size full: --source {opts.source} lists no Hub model (use hub-top, hub:ORG/NAME or a file of ids)"
        )
    entries = _select(entries, pattern, opts)
    weights = {
        e.name: "cache" if e.source == "hub" and refs.weight_files(refs.parse_ref(e.model, "hub")) else "random"
        for e in entries
    }
    baseline = load_baseline(opts.baseline) if opts.baseline else None
    assert opts.steps is not None and opts.case_budget is not None  # resolved() sets them at --size full
    run = FullRun(prec.name, opts.steps, backend, reference, opts)
    cases = []
    for e in entries:
        params = full_params(e, run, weights[e.name])
        if baseline is not None and opts.baseline:
            params["baseline"] = baseline.full_entry_for(e.name, params, opts.baseline)
        cases.append(Case("zoo", e.name, params, FULL_ENTRY, budget_s=opts.case_budget, isolated=True))
    return cases


def run_cases(device: Device, quick: bool) -> list[Case]:
    if quick:
        quick_run = TinyRun("fp32", 3, device.default_compile_backend, 300.0)
        return [dataclasses.replace(make_case(Entry(s, m, t), quick_run), cost=cost) for s, m, t, cost in QUICK]
    run = TinyRun("fp32", DEFAULT_STEPS, device.default_compile_backend, DEFAULT_TIMEOUT)
    long_run = dataclasses.replace(run, batch=LONG_BATCH, seq=LONG_SEQ)
    entries = hf_causal() + timm_entries()[:FULL_EXTRA_TIMM]
    return [make_case(e, run) for e in entries] + [make_case(e, long_run) for e in long_entries()]
