"""zoo: every transformers architecture (tiny random-init configs) and timm models, each trained for
K steps on the device, eager and compiled, against a float64 CPU reference.

Per model, one case:
  a. reference: float64 on cpu (from the weights the run dtype holds), forward + backward, K SGD steps
     on fixed seeded batches -> loss curve, logits, every grad. Failure -> ref_fail (reason "config:"
     when the tiny model can't even be built, "reference:" when it can't run).
  b. trusted baseline: cpu eager in the run dtype (on cpu this IS the device eager run).
  c. device eager in the run dtype: parity of loss, logits and every grad (checks/parity.py) and the
     loss curve (checks/losscurve.py).
  d. device compiled with --compile-backend: graph count, graph breaks with reasons, recompiles and
     compile time (checks/graphs.py), parity and loss curve as in c.
  e. CPU fallbacks (not on cpu), params, wall time incl. compile, peak memory.
With --baseline BUNDLE, the run's curves and output statistics are also checked against the same
model in an exported run (another machine, say a CUDA box).
"""

from __future__ import annotations

import argparse
import math
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bringup.api import Suite, register_suite, specs
from bringup.case import Case, CaseResult, Status
from bringup.device import Device
from bringup.errors import BadInput, user_regex
from bringup.options import check_compile_backend
from bringup.precision import PRECISIONS, Precision, parse_precision
from bringup.zoo import hub as zoo_hub
from bringup.zoo import modules as zoo_modules
from bringup.zoo import section as zoo_section
from bringup.zoo.args import (  # the torch-free face (cli)
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT,
    FULL_STEPS,
    HELP,
    NOISE_SEEDS,
    ORDER,
    add_arguments,
)

SOURCES = ("hf-causal", "hf-all", "timm", "hub-top")
FULL_TIMEOUT = 3600.0
LR = 0.5  # SGD: big enough that a tiny random-init model's loss moves visibly in a few steps
MAX_GRAD_NORM = 1.0  # clipped like HF Trainer's default: keeps the few steps out of chaotic regimes
LOGIT_SAMPLES = 16
ENTRY = "bringup.zoo.suite:run_model"
# `bringup run --quick`: three HF types (dense GQA + rope + RMSNorm; learned positions + LayerNorm +
# gelu; qk-norm) and a timm convnet (BatchNorm): ~2 min on 2 cores with cold inductor compiles.
QUICK = (("hf", "llama", "causal-lm"), ("hf", "gpt2", "causal-lm"), ("hf", "qwen3", "causal-lm"),
         ("timm", "test_resnet", ""))  # fmt: skip
FULL_EXTRA_TIMM = 8  # `bringup run --full`: all hf-causal types and the first timm models


# ---- planning -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    source: str  # hf | timm | fn | hf-json | hub (a Hub id) | hub-top (a catalogue id)
    model: str  # model type, timm name, module:function or (absolute) config path
    task: str = ""
    label: str = ""  # the name as the user wrote it (a config path from a FILE), if not `model`

    @property
    def name(self) -> str:
        return self.label or self.model


def _hf_causal() -> list[Entry]:
    from bringup.models import zoo as mz

    return [Entry("hf", t, "causal-lm") for t in mz.causal_types()]


def _hf_all() -> list[Entry]:
    from bringup.models import zoo as mz

    return [Entry("hf", t, task) for t, task in mz.all_types()]


def _timm() -> list[Entry]:
    from bringup.models.timm_zoo import DEFAULT_MODELS, require

    require()
    return [Entry("timm", m.name) for m in DEFAULT_MODELS]


def _hub_entry(text: str, where: str) -> Entry:
    """A Hub id, resolved now (cache, or the Hub when online): a missing or uncached id is BadInput."""
    from bringup.models import hub

    ref = hub.parse_ref(text[len(hub.HUB_PREFIX) :] if text.startswith(hub.HUB_PREFIX) else text, where)
    task, _ = hub.task_of(hub.read_config(hub.resolve(ref), ref.name))
    return Entry("hub", ref.name, task)


def _hub_top() -> list[Entry]:
    from bringup.models import hub

    return [Entry("hub-top", e["id"], hub.task_of(e["config"])[0]) for e in hub.catalogue()]


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
            raise BadInput(f"--source {path}:{i}: {line!r} is neither module:function, a config .json path nor a "
                           "Hub id (ORG/NAME or hub:NAME)")  # fmt: skip
    if not out:
        raise BadInput(f"--source {path}: no models listed")
    return out


def entries_for(source: str) -> list[Entry]:
    if source == "hf-causal":
        return _hf_causal()
    if source == "hf-all":
        return _hf_all()
    if source == "timm":
        return _timm()
    if source == "hub-top":
        return _hub_top()
    if source.startswith("hub:"):
        from bringup.models import hub

        return [_hub_entry(ref.name, f"--source {source}") for ref in hub.parse_ids(source)]
    if Path(source).exists():
        return read_model_file(source)
    raise BadInput(f"unknown --source {source!r}: use hf-causal, hf-all, timm, hub-top, hub:ORG/NAME or a FILE "
                   "that exists")  # fmt: skip


def check_backend(name: str) -> str:
    if name.lower() == "none":
        return "none"
    return check_compile_backend(name)


def build_cases(args: argparse.Namespace, device: Device) -> list[Case]:
    """Validate every option (BadInput before any work), then one case per model."""
    prec = parse_precision(args.dtype)
    if prec.name == "fp64":
        raise BadInput(f"--dtype {args.dtype}: the zoo runs fp32, bf16, fp16, amp-bf16 or amp-fp16 (float64 is the "
                       "reference)")  # fmt: skip
    size = getattr(args, "size", "tiny") or "tiny"
    if args.steps is None:
        args.steps = FULL_STEPS if size == "full" else DEFAULT_STEPS
    sweep = zoo_hub.is_sweep(args.source)
    zoo_hub.check_options(args)
    zoo_hub.check_ranks(getattr(args, "nproc", 1), device)
    if size == "full":
        if sweep:
            raise BadInput("--size full with a Hub sweep: use --full-top K (the K most downloaded signatures at "
                           "real size, beside the tiny sweep)")  # fmt: skip
        return build_full_cases(args, prec, device)
    if getattr(args, "reference", None) is not None and not (sweep and getattr(args, "full_top", 0)):
        raise BadInput("--reference applies to --size full (and --full-top); tiny models are judged against float64 "
                       "on cpu")  # fmt: skip
    noise_seeds = getattr(args, "noise_seeds", NOISE_SEEDS)
    if noise_seeds is None or not 0 <= noise_seeds <= 16:
        raise BadInput(f"--noise-seeds must be 0..16, got {noise_seeds}")
    if args.steps is None or args.steps < 1:
        raise BadInput(f"--steps must be >= 1, got {args.steps}")
    if args.limit is not None and args.limit < 1:
        raise BadInput(f"--limit must be >= 1, got {args.limit}")
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise BadInput(f"--timeout must be a positive number of seconds, got {args.timeout}")
    pattern = None if args.filter is None else user_regex(args.filter, "--filter")
    backend = check_backend(args.compile_backend or device.default_compile_backend)
    if sweep:
        return zoo_hub.build_cases(args, prec, backend, noise_seeds, pattern)
    baseline = _load_baseline(args.baseline) if args.baseline else None
    entries = entries_for(args.source)
    entries = _select(entries, pattern, args)
    if baseline is not None:
        baseline.check_comparable([e.name for e in entries], prec.name, args.steps, args.baseline)
    module_check = zoo_modules.from_arg(args)
    return [make_case(e, prec.name, args.steps, backend, args.timeout, args.seed, baseline, noise_seeds, module_check)
            for e in entries]  # fmt: skip


def _select(entries: list[Any], pattern: Any, args: argparse.Namespace) -> list[Any]:
    """The entries --filter keeps, cut to --limit; none left is bad input."""
    if pattern is not None:
        entries = [e for e in entries if pattern.search(e.name)]
    if args.limit is not None:
        entries = entries[: args.limit]
    if not entries:
        raise BadInput(f"zoo: no model of --source {args.source} matches --filter {args.filter!r}")
    return entries


def build_full_cases(args: argparse.Namespace, prec: Precision, device: Device) -> list[Case]:
    """--size full: Hub ids or catalogue entries at their real size (zoo/full.py)."""
    from bringup.models import hub

    if args.steps < 1:
        raise BadInput(f"--steps must be >= 1, got {args.steps}")
    if args.batch < 1 or args.seq < 2:
        raise BadInput(f"--batch must be >= 1 and --seq >= 2, got {args.batch} and {args.seq}")
    if args.limit is not None and args.limit < 1:
        raise BadInput(f"--limit must be >= 1, got {args.limit}")
    timeout = args.timeout if args.timeout != DEFAULT_TIMEOUT else FULL_TIMEOUT
    if not (timeout > 0 and math.isfinite(timeout)):
        raise BadInput(f"--timeout must be a positive number of seconds, got {args.timeout}")
    pattern = None if args.filter is None else user_regex(args.filter, "--filter")
    backend = check_backend(args.compile_backend or device.default_compile_backend)
    reference = args.reference or ("baseline" if args.baseline else "cpu")
    if reference == "baseline" and not args.baseline:
        raise BadInput("--reference baseline needs --baseline BUNDLE (an exported full-size run of the same ids)")
    entries = [e for e in entries_for(args.source) if e.source in ("hub", "hub-top")]
    if not entries:
        raise BadInput(f"--size full: --source {args.source} lists no Hub model (use hub-top, hub:ORG/NAME or a "
                       "file of ids)")  # fmt: skip
    entries = _select(entries, pattern, args)
    if reference == "none" and backend == "none" and not args.baseline:
        raise BadInput("--reference none with --compile-backend none and no --baseline: nothing would judge the "
                       "run's numerics")  # fmt: skip
    weights = {e.name: "cache" if e.source == "hub" and hub.weight_files(hub.parse_ref(e.model, "hub")) else "random"
               for e in entries}  # fmt: skip
    baseline = _load_baseline(args.baseline) if args.baseline else None
    cases = []
    for e in entries:
        params: dict[str, Any] = {"source": e.source, "model": e.model, "task": e.task, "dtype": prec.name,
                                  "steps": args.steps, "backend": backend, "seed": args.seed, "size": "full",
                                  "batch": args.batch, "seq": args.seq, "weights": weights[e.name],
                                  "reference": reference}  # fmt: skip
        if getattr(args, "nproc", 1) > 1:  # FSDP2 over N ranks when one device is too small (zoo/fsdp.py)
            params["nproc"] = int(args.nproc)
        if getattr(args, "device_memory", None):
            params["device_memory_gib"] = float(args.device_memory)
        if baseline is not None:
            params["baseline"] = baseline.full_entry_for(e.name, params, args.baseline)
        cases.append(Case("zoo", e.name, params, "bringup.zoo.full:run_full", budget_s=timeout, isolated=True))
    return cases


def make_case(e: Entry, dtype: str, steps: int, backend: str, timeout: float, seed: int = 0,
              baseline: BaselineIndex | None = None, noise_seeds: int = NOISE_SEEDS,
              module_check: bool | None = zoo_modules.DEFAULT) -> Case:  # fmt: skip
    params: dict[str, Any] = {"source": e.source, "model": e.model, "task": e.task, "dtype": dtype,
                              "steps": steps, "backend": backend, "seed": seed}  # fmt: skip
    if noise_seeds != NOISE_SEEDS:  # the default stays out of the params: existing case ids stay stable
        params["noise_seeds"] = noise_seeds
    if module_check is not None:  # auto stays out of the params
        params["module_check"] = module_check
    if baseline is not None:
        params["baseline"] = baseline.entry_for(e.name, dtype, steps)
    # Pooled, not isolated: a fresh process per model would re-import torch + transformers (~5-10 s)
    # and start inductor's compile workers cold every time. What a model could leak into the next
    # case is reset per case (dynamo caches and counters, seeds, peak memory); a hang, segfault or
    # OOM still costs only its own case (the runner replaces the worker).
    return Case("zoo", e.name, params, ENTRY, budget_s=timeout, isolated=False)


def run_cases(device: Device, quick: bool) -> list[Case]:
    if quick:
        entries = [Entry(s, m, t) for s, m, t in QUICK]
        return [make_case(e, "fp32", 3, device.default_compile_backend, 300.0) for e in entries]
    entries = _hf_causal() + _timm()[:FULL_EXTRA_TIMM]
    return [make_case(e, "fp32", DEFAULT_STEPS, device.default_compile_backend, DEFAULT_TIMEOUT) for e in entries]


# ---- baselines (an exported run) ------------------------------------------------------------------
@dataclass
class BaselineIndex:
    path: str
    device: str
    by_name: dict[str, CaseResult] = field(default_factory=dict)

    def check_comparable(self, names: list[str], dtype: str, steps: int, given: str) -> None:
        """--baseline that would compare nothing for some model is bad input, caught before any work
        (exit 2, one line): a model the bundle lacks, or one it ran in another dtype or step count.
        Otherwise such a case said "missing" / "incomparable" and the run exited 0 having compared nothing."""
        missing = [n for n in names if n not in self.by_name]
        other = sorted({f"{r.params.get('dtype')} x {r.params.get('steps')} steps" for n in names
                        if (r := self.by_name.get(n)) is not None
                        and (r.params.get("dtype") != dtype or r.params.get("steps") != steps)})  # fmt: skip
        if missing:
            held = ", ".join(sorted(self.by_name)[:8]) + (" ..." if len(self.by_name) > 8 else "")
            raise BadInput(f"--baseline {given}: the bundle has no result for {', '.join(missing[:8])}"
                           f"{' ...' if len(missing) > 8 else ''}, so nothing would be compared for it; narrow "
                           f"--filter to the bundle's models ({held})")  # fmt: skip
        if other:
            raise BadInput(f"--baseline {given}: the bundle ran {', '.join(other)}, this run {dtype} x {steps} steps: "
                           "nothing would be comparable; use the bundle's --dtype and --steps")  # fmt: skip

    def full_entry_for(self, name: str, params: dict[str, Any], given: str) -> dict[str, Any]:
        """A full-size case's view of the bundle: its per-step series. The bundle must hold the same id at
        full size, same seed, batch, sequence length and weights source (any precision: the tolerance
        comes from both), else BadInput before any work."""
        r = self.by_name.get(name)
        if r is None:
            held = ", ".join(sorted(self.by_name)[:8]) + (" ..." if len(self.by_name) > 8 else "")
            raise BadInput(f"--baseline {given}: the bundle has no result for {name}, so nothing would be compared "
                           f"for it; narrow --filter to the bundle's models ({held})")  # fmt: skip
        bp = r.params
        for key in ("size", "seed", "batch", "seq", "weights"):
            if bp.get(key) != params.get(key):
                raise BadInput(f"--baseline {given}: {name} ran {key}={bp.get(key)!r} in the bundle, "
                               f"{params.get(key)!r} here: nothing would be comparable")  # fmt: skip
        return {"path": self.path, "device": self.device, "found": True, "status": r.status.value,
                "dtype": bp.get("dtype"), "steps": bp.get("steps"), "grad_norms0": r.fields.get("grad_norms0"),
                "series": {k: [v for _, v in s] for k, s in r.series.items()}}  # fmt: skip

    def entry_for(self, name: str, dtype: str, steps: int) -> dict[str, Any]:
        """What the worker needs to compare a model with the bundle (small: curves and statistics)."""
        r = self.by_name.get(name)
        head = {"path": self.path, "device": self.device}
        if r is None:
            return {**head, "found": False}
        f = r.fields
        return {
            **head, "found": True, "status": r.status.value, "dtype": r.params.get("dtype"),
            "steps": r.params.get("steps"),
            "curves": {k: [v for _, v in s] for k, s in r.series.items() if k.startswith("loss.")},
            "logits": f.get("logits"),
        }  # fmt: skip


def _load_baseline(path: str) -> BaselineIndex:
    from bringup.bundle import load_bundle

    run, results = load_bundle(path)
    zoo = [r for r in results if r.suite == "zoo"]
    if not zoo:
        raise BadInput(f"--baseline {path}: the bundle has no zoo results (run {run.run_id}: {run.command})")
    return BaselineIndex(str(Path(path).resolve()), run.device, {r.name: r for r in zoo})


def bundle_names(path: str) -> set[str]:
    from bringup.bundle import load_bundle

    _, results = load_bundle(path)
    return {r.name for r in results if r.suite == "zoo"}


# ---- one model ------------------------------------------------------------------------------------
@dataclass
class RunOut:
    """One training run: step-0 tensors (loss, logits, grads) and the K-step loss curve."""

    tensors: dict[str, torch.Tensor]
    curve: list[float]
    seconds: float = 0.0
    first_step_s: float = 0.0


def build_model(params: dict[str, Any]) -> Any:
    """The model of a case, initialised so that every operator matters to the result (seeded): Linear
    weights at N(0, 1/fan_in) so attention is not uniform and activations see unit-size inputs
    (models/testable_init.py), and all-zero parameters (biases, norm offsets) drawn small
    (models/zoo.py: nonzero_init): a dropped bias, a wrong softmax temperature must change the result."""
    from bringup.models import testable_init
    from bringup.models import zoo as mz

    built = _build_model(params)
    seed = int(params.get("seed", 0))
    testable_init.fan_in_init(built.model, seed)
    mz.nonzero_init(built.model, seed)
    return built


def _build_model(params: dict[str, Any]) -> Any:
    from bringup.models import zoo as mz

    src, model, seed = params["source"], params["model"], int(params.get("seed", 0))
    if src == "hf":
        return mz.build_hf(model, params.get("task") or "causal-lm", seed=seed)
    if src == "timm":
        from bringup.models import timm_zoo

        return timm_zoo.build(model, seed=seed)
    if src == "fn":
        return mz.build_fn(model, seed=seed)
    if src == "hf-json":
        return mz.build_hf_json(model, seed=seed)
    if src in ("hub", "hub-top"):
        from bringup.models import hub
        from bringup.zoo.full import config_data

        return hub.build_tiny(config_data(params), model, seed=seed)
    if src == "hub-sig":  # a Hub sweep's signature: exactly its tiny config (zoo/hub.py)
        from bringup.models import signature

        return signature.build(params.get("task") or "causal-lm", params["config"], seed=seed)
    raise mz.ConfigError(f"unknown source {src!r}")


def _cast_batch(batch: dict[str, Any], device: torch.device, dtype: torch.dtype,
                round_to: torch.dtype | None = None) -> dict[str, Any]:  # fmt: skip
    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            if v.is_floating_point():
                if round_to is not None:
                    v = v.to(round_to)
                return v.to(device=device, dtype=dtype)
            return v.to(device)
        if isinstance(v, dict):
            return {k: one(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(one(x) for x in v)
        return v

    return {k: one(v) for k, v in batch.items()}


def _load_init(model: torch.nn.Module, init: dict[str, torch.Tensor], device: torch.device, dtype: torch.dtype,
               round_to: torch.dtype | None) -> torch.nn.Module:  # fmt: skip
    """The model on `device` in `dtype`, its floating state first rounded through `round_to` (the run
    dtype): the float64 reference starts from exactly the weights the run holds."""
    model.load_state_dict(init)
    model.to(device=device, dtype=dtype)
    if round_to is not None and round_to != dtype:
        with torch.no_grad():
            for t in [*model.parameters(), *model.buffers()]:
                if t.is_floating_point():
                    t.copy_(t.to(round_to).to(dtype))
    return model


def _experts_impl(model: torch.nn.Module, impl: str | None) -> None:
    """transformers' MoE layers dispatch on config._experts_implementation at call time; the default
    (grouped_mm) has no float64 kernel, so the float64 reference runs the eager per-expert loop: the
    same mathematics, another code path. Other runs get back the model's own choice."""
    seen: set[int] = set()
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is None or id(cfg) in seen or not hasattr(cfg, "_experts_implementation"):
            continue
        seen.add(id(cfg))
        own = cfg.__dict__.setdefault("_bringup_own_experts_impl", cfg._experts_implementation)
        cfg._experts_implementation = impl or own


def _no_dropout(model: torch.nn.Module) -> None:
    """Dropout draws different masks in each run (and compiled code draws them differently again):
    parity needs the same function in every run. Configs are built with dropout 0 (models/zoo.py);
    this catches nn.Dropout modules a user model or a fixed-size config still has."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """The float64 reference also creates its own tensors (masks, `torch.full(finfo.min)`, position
    tables) in float64: some models build them with the default dtype. Restored afterwards."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype if dtype == torch.float64 else old)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def as_precision(p: Precision | torch.dtype | str) -> Precision:
    if isinstance(p, Precision):
        return p
    if isinstance(p, str):
        return parse_precision(p)
    return next(x for x in PRECISIONS.values() if not x.mixed and x.param_dtype == p)


def train_run(built: Any, init: dict[str, torch.Tensor], batches: list[dict[str, Any]], device: torch.device,
              dtype: Precision | torch.dtype | str, round_to: torch.dtype | None = None, backend: str | None = None,
              on_first_step: Any = None, step_context: Any = None, module_check: Any = None) -> RunOut:  # fmt: skip
    """K SGD steps at a precision (a pure dtype, or mixed: fp32 weights, forward under autocast, fp16 with
    a GradScaler). Step 0's loss, logits and grads (unscaled) are kept (moved to cpu) for parity.
    `step_context` (a context-manager factory, e.g. a TorchDispatchMode) wraps each step's forward and
    backward, not the optimizer. `module_check` (checks/module_check.ModuleCheck, eager runs only)
    records step 0's module calls and replays them on the device, inside `step_context`."""
    prec = as_precision(dtype)
    if module_check is not None and backend is not None:
        raise ValueError("a module check records an eager run (hooks do not fire inside a compiled graph)")
    with _default_dtype(prec.param_dtype):
        return _train_run(built, init, batches, device, prec, round_to, backend, on_first_step, step_context,
                          module_check)  # fmt: skip


def _train_run(built: Any, init: dict[str, torch.Tensor], batches: list[dict[str, Any]], device: torch.device,
               prec: Precision, round_to: torch.dtype | None, backend: str | None,
               on_first_step: Any, step_context: Any = None, module_check: Any = None) -> RunOut:  # fmt: skip
    dtype = prec.param_dtype
    model = _load_init(built.model, init, device, dtype, round_to)
    model.zero_grad(set_to_none=True)  # a run that raised mid-backward must not leave its grads to the next
    model.train()
    _no_dropout(model)
    _experts_impl(model, "eager" if dtype == torch.float64 else None)

    def fwd_loss(b: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        with prec.autocast(device.type):
            out = built.forward(model, b)
            return built.loss(out, b), built.logits(out)

    step_fn = fwd_loss if backend is None else torch.compile(fwd_loss, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    scaler = prec.grad_scaler(device.type)

    def backward(loss: torch.Tensor) -> None:
        (loss if scaler is None else scaler.scale(loss)).backward()
        if scaler is not None:
            scaler.unscale_(opt)  # the grads kept and clipped are the true ones

    curve: list[float] = []
    tensors: dict[str, torch.Tensor] = {}
    t0 = time.perf_counter()
    first = 0.0
    for i, raw in enumerate(batches):
        b = _cast_batch(raw, device, dtype, round_to)
        ts = time.perf_counter()
        with step_context() if step_context is not None else nullcontext():
            if i == 0 and (on_first_step is not None or module_check is not None):
                first_ctx = on_first_step() if on_first_step is not None else nullcontext()
                with first_ctx, module_check.recording() if module_check is not None else nullcontext():
                    loss, logits = step_fn(b)
                    backward(loss)
            else:
                loss, logits = step_fn(b)
                backward(loss)
        if i == 0:  # the step computed (a lazy device: one graph) before its clock stops and its tensors are read
            Device(device.type, device.index).materialize(loss, logits, model)
            first = time.perf_counter() - ts
            tensors["loss"] = loss.detach().to("cpu").reshape(())
            if logits is not None:
                tensors["logits"] = logits.detach().to("cpu")
            for n, p in model.named_parameters():
                if p.grad is not None:
                    tensors[f"grad.{n}"] = p.grad.detach().to("cpu").clone()
        curve.append(float(loss.detach().to("cpu", torch.float64)))
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], MAX_GRAD_NORM)
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
        opt.zero_grad(set_to_none=True)
    return RunOut(tensors, curve, time.perf_counter() - t0, first)


def _finite_curve(c: list[float]) -> bool:
    return all(math.isfinite(x) for x in c)


def logits_digest(t: torch.Tensor | None) -> dict[str, Any] | None:
    """Output statistics + a few fixed-position values: what a bundle keeps of the logits."""
    if t is None:
        return None
    x = t.detach().to("cpu", torch.float64).flatten()
    if x.numel() == 0:
        return None
    # float64 positions: float32 rounds the last index past the end above 2**24 elements (16M logits)
    idx = torch.linspace(0, x.numel() - 1, min(LOGIT_SAMPLES, x.numel()), dtype=torch.float64).round().long()
    fin = x[torch.isfinite(x)]
    n = fin.numel()
    return {
        "shape": list(t.shape), "mean": float(fin.mean()) if n else math.nan,
        "std": float(fin.std()) if n > 1 else 0.0, "abs_max": float(fin.abs().max()) if n else math.nan,
        "sample": [float(v) for v in x[idx]],
    }  # fmt: skip


def _series(curve: list[float]) -> list[tuple[int, float]]:
    return [(i, v) for i, v in enumerate(curve)]


def _fail(r: CaseResult, status: Status, reason: str) -> CaseResult:
    if r.status is Status.PASS:  # the first failure names the case
        r.status, r.reason = status, reason
    return r


def run_model(case: Case, ctx: Any) -> CaseResult:
    """One model: reference, trusted baseline, device eager, device compiled; then the verdict."""
    import traceback

    from bringup.checks.errors import classify, first_line
    from bringup.checks.graphs import watch
    from bringup.checks.parity import parity
    from bringup.models.zoo import ConfigError, param_count

    t_case = time.monotonic()
    p = case.params
    dtype = parse_precision(p["dtype"])
    steps = int(p["steps"])
    backend = p.get("backend") or "none"
    dev: Device = ctx.device
    cpu = torch.device("cpu")
    r = CaseResult.for_case(case, Status.PASS)
    r.fields.update({"source": p["source"], "task": p.get("task") or "", "backend": backend, "params": None,
                     "graph_breaks": None, "fallback_ops": None, "max_rel_err": None, "loss_divergence": None,
                     "compile_s": None, "peak_mem_bytes": None})  # fmt: skip
    torch._dynamo.reset()
    torch.manual_seed(int(p.get("seed", 0)))
    # -- build (ref_fail "config" when the tiny model can't be made) --
    try:
        built = build_model(p)
    except (ConfigError, BadInput) as e:
        return _fail(r, Status.REF_FAIL, f"config: {e}")
    except Exception as e:
        return _fail(r, Status.REF_FAIL, f"config: {first_line(e)}")
    r.fields["params"] = param_count(built.model)
    r.fields["note"] = built.note
    init = {k: v.detach().clone() for k, v in built.model.state_dict().items()}
    # -- a. reference --
    try:
        batches = [built.make_batch(i) for i in range(steps)]
        ref = train_run(built, init, batches, cpu, torch.float64, round_to=dtype.param_dtype)
    except Exception as e:
        r.error = traceback.format_exc()
        return _fail(r, Status.REF_FAIL, f"reference: {first_line(e)}")
    if not _finite_curve(ref.curve):
        return _fail(r, Status.REF_FAIL, "reference: non-finite loss in float64")
    r.series["loss.ref"] = _series(ref.curve)
    r.fields["logits"] = {"ref": logits_digest(ref.tensors.get("logits"))}
    # -- b. trusted baseline: cpu eager in the run dtype (on cpu also the device's eager run: recorded) --
    use_mc = zoo_modules.enabled(p.get("module_check", zoo_modules.DEFAULT), dev)
    if not use_mc and p.get("module_check") is None:
        r.fields["module_check_note"] = zoo_modules.LAZY_NOTE
    mc = zoo_modules.new_check(built.model, dtype, cpu) if use_mc and dev.is_cpu else None
    base: RunOut | None = None
    try:
        base = train_run(built, init, batches, cpu, dtype, module_check=mc)
        r.series["loss.cpu_eager"] = _series(base.curve)
    except Exception as e:
        r.fields["baseline_error"] = first_line(e)
    if base is not None:
        # the trusted run must itself be near float64; if even cpu eager in this dtype is grossly off
        # (a discontinuous model: LSH buckets, near-tied routing), the comparison says nothing
        gross = parity(base.tensors, ref.tensors, dtype, trusted=True)
        r.fields["cpu_eager_max_rel_err"] = gross.max_rel_err
        if not gross.ok:
            return _fail(r, Status.REF_FAIL, f"reference: cpu eager in {p['dtype']} is itself off float64 "
                         f"({gross.summary()}): ill-conditioned at this precision")  # fmt: skip
        from bringup.checks.losscurve import compare_curves

        drift = compare_curves(base.curve, ref.curve, dtype, trusted=True)
        if not drift.ok:  # e.g. BatchNorm over 2 samples at a high learning rate: training itself diverges
            return _fail(r, Status.REF_FAIL, f"reference: cpu eager in {p['dtype']} drifts off float64 over "
                         f"{len(ref.curve)} steps ({drift.summary()}): ill-conditioned training at this "
                         "precision")  # fmt: skip
        noise = measure_noise(p, dtype, steps, int(p.get("noise_seeds", NOISE_SEEDS)))
        r.fields["noise_seeds"] = noise.seeds
        if noise.errors:
            r.fields["noise_errors"] = noise.errors
        torch.manual_seed(int(p.get("seed", 0)))
    else:
        noise = TrustedNoise()
    dev.reset_peak_memory()
    # -- c. device eager --
    eager: RunOut | None = None
    try:
        if dev.is_cpu and base is not None:
            eager = base
        else:
            mc = zoo_modules.new_check(built.model, dtype, dev.torch_device) if use_mc else None
            eager = _device_run(built, init, batches, dev, dtype, r, module_check=mc)
    except Exception as e:
        r.error = traceback.format_exc()
        _fail(r, classify(e), f"eager: {first_line(e)}")
    if eager is not None:
        r.series["loss.eager"] = _series(eager.curve)
        r.fields["logits"]["eager"] = logits_digest(eager.tensors.get("logits"))
        # on cpu, eager in the run dtype IS the trusted baseline: judged for gross errors only
        self_trusted = dev.is_cpu and eager is base
        _judge(r, "eager", eager, ref, None if self_trusted else base, dtype, noise, trusted=self_trusted)
        if mc is not None and mc.recorded and not self_trusted:
            zoo_modules.judge(r, "eager", mc.judge_eager())
    # -- d. device compiled --
    comp: RunOut | None = None
    if backend != "none":
        left = max(1.0, case.budget_s - (time.monotonic() - t_case))
        try:
            with watch() as graphs:
                comp = train_run(built, init, batches, dev.torch_device, dtype, backend=backend,
                                 on_first_step=lambda: ctx.phase("compile", budget_s=left))  # fmt: skip
        except Exception as e:
            r.error = r.error or traceback.format_exc()
            _fail(r, classify(e, compiling=True), f"compiled: {first_line(e)}")
        r.fields.update({"graph_count": graphs.graph_count, "graph_breaks": graphs.graph_breaks,
                         "break_reasons": graphs.break_reasons, "recompiles": graphs.recompiles,
                         "recompile_reasons": graphs.recompile_reasons})  # fmt: skip
        if comp is not None:
            r.fields["compile_s"] = round(graphs.compile_s or comp.first_step_s, 3)
            r.series["loss.compiled"] = _series(comp.curve)
            r.fields["logits"]["compiled"] = logits_digest(comp.tensors.get("logits"))
            if graphs.graph_count == 0:
                _fail(r, Status.SILENT_EAGER, "compiled: dynamo captured no graph (the run was eager)")
            _judge(r, "compiled", comp, ref, base if base is not None else eager, dtype,
                   noise if base is not None else TrustedNoise())  # fmt: skip
            if use_mc:
                left = max(1.0, case.budget_s - (time.monotonic() - t_case))
                zoo_modules.judge_compiled(r, mc, backend, ctx, left)
    # -- e. fallbacks, memory --
    r.fields["peak_mem_bytes"] = dev.peak_memory()
    fb = r.fields.get("fallback_ops")
    if fb:
        top = ", ".join(f"{k} x{v}" for k, v in sorted(fb.items(), key=lambda kv: -kv[1])[:5])
        _fail(r, Status.FALLBACK, f"ran through the CPU fallback: {top}")
    # -- baseline bundle --
    bl = p.get("baseline")
    if bl:
        _compare_bundle(r, bl, dtype)
    if finding := r.fields.get("tying_finding"):  # a device finding beside the verdict, not instead of it
        r.reason = f"{r.reason}; {finding}" if r.reason else finding
    for k in ("max_rel_err", "loss_divergence", "compile_s", "params", "graph_breaks", "peak_mem_bytes"):
        v = r.fields.get(k)  # the fields keep them for the terminal table; metrics are what reports read
        r.metric(k, v if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    return r


def _device_run(built: Any, init: dict[str, torch.Tensor], batches: list[dict[str, Any]], dev: Device,
                dtype: Precision, r: CaseResult, module_check: Any = None) -> RunOut:  # fmt: skip
    """Device eager run; off cpu, under the fallback detector (which ops ran through the CPU fallback).
    A detector that can't start (another profiler active, ...) leaves fallback_ops unknown (null)."""
    from bringup.checks.errors import first_line
    from bringup.checks.fallbacks import FallbackDetector
    from bringup.models import tying

    # Ties the move to the device splits are a finding of their own (models/tying.py): named on the case,
    # and the model re-tied, so parity judges the model as meant (train_run's own .to is then a no-op).
    if broken := tying.move(built.model, dev.torch_device, dtype.param_dtype):
        r.fields["tying_broken"] = broken
        r.fields["tying_finding"] = tying.describe(broken, dev.name)
    r.metric("broken_ties", len(broken))
    try:
        det = FallbackDetector(dev)
        det.__enter__()
    except Exception as e:
        r.fields["fallback_note"] = f"fallback detector unavailable: {first_line(e)}"
        return train_run(built, init, batches, dev.torch_device, dtype, module_check=module_check)
    try:
        out = train_run(built, init, batches, dev.torch_device, dtype, module_check=module_check)
    finally:
        det.__exit__(None, None, None)
    r.fields["fallback_ops"] = dict(det.report().fallback_ops)
    return out


@dataclass
class TrustedNoise:
    """The trusted run (cpu eager at the run precision) and its float64 reference under other seeds."""

    tensors: dict[str, Any] = field(default_factory=dict)  # name -> checks.parity.Noise
    curves: list[tuple[list[float], list[float]]] = field(default_factory=list)  # (trusted, float64) curves
    seeds: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def measure_noise(params: dict[str, Any], prec: Precision, steps: int, n: int) -> TrustedNoise:
    """Build the same model under `n` other seeds (other init, other batches) and run the float64
    reference and the trusted run at `prec` on each: per tensor, how far correct runs at this
    precision are from float64 (checks/parity.py: trusted_noise). A seed whose trusted run is itself
    grossly off (or fails) is left out and named in `errors`."""
    from bringup.checks.errors import first_line
    from bringup.checks.parity import parity, trusted_noise

    cpu = torch.device("cpu")
    out = TrustedNoise()
    samples = []
    seed0 = int(params.get("seed", 0))
    for k in range(1, n + 1):
        s = seed0 + 7919 * k  # far from the small seeds users pick
        try:
            built = build_model({**params, "seed": s})
            init = {k2: v.detach().clone() for k2, v in built.model.state_dict().items()}
            batches = [built.make_batch(i) for i in range(steps)]
            ref = train_run(built, init, batches, cpu, torch.float64, round_to=prec.param_dtype)
            base = train_run(built, init, batches, cpu, prec)
        except Exception as e:
            out.errors.append(f"seed {s}: {first_line(e)}")
            continue
        if not (_finite_curve(ref.curve) and parity(base.tensors, ref.tensors, prec, trusted=True).ok):
            out.errors.append(f"seed {s}: the trusted run is itself off float64 (left out)")
            continue
        samples.append((base.tensors, ref.tensors))
        out.curves.append((base.curve, ref.curve))
        out.seeds.append(s)
    out.tensors = trusted_noise(samples, prec)
    return out


def judge_run(got: RunOut, ref: RunOut, base: RunOut | None, prec: Precision | torch.dtype,
              noise: TrustedNoise | None = None, trusted: bool = False) -> tuple[Any, Any]:  # fmt: skip
    """The zoo's verdict on one run: (ParityReport of loss, logits and every grad at step 0, CurveReport
    of the K-step loss curve), both against float64 and bounded by the trusted runs (checks/parity.py)."""
    from bringup.checks.losscurve import compare_curves
    from bringup.checks.parity import parity

    nz = noise or TrustedNoise()
    with_base = base is not None and not trusted
    rep = parity(got.tensors, ref.tensors, prec, baseline=base.tensors if with_base and base else None,
                 trusted=trusted, noise=nz.tensors if with_base else None)  # fmt: skip
    curve = compare_curves(got.curve, ref.curve, prec, baseline=base.curve if with_base and base else None,
                           trusted=trusted, noise=nz.curves if with_base else ())  # fmt: skip
    return rep, curve


def _judge(r: CaseResult, label: str, got: RunOut, ref: RunOut, base: RunOut | None, dtype: Precision,
           noise: TrustedNoise, trusted: bool = False) -> None:  # fmt: skip
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
        _fail(r, Status.FAIL_NUMERIC, f"{label}: {rep.summary()}")
    if not curve.ok:
        _fail(r, Status.FAIL_NUMERIC, f"{label}: {curve.summary()}")


def _compare_bundle(r: CaseResult, bl: dict[str, Any], dtype: Precision) -> None:
    """This run vs the same model in an exported run: the float64 reference curves must agree (same
    model, same data: otherwise the comparison says nothing), then each run's device curves and logits
    statistics must agree within the dtype's loss tolerance (both sides carry their own rounding)."""
    from bringup.checks.losscurve import rel_devs
    from bringup.checks.parity import tolerance_for

    out: dict[str, Any] = {"bundle": bl.get("path"), "bundle_device": bl.get("device")}
    r.fields["baseline_check"] = out
    if not bl.get("found"):  # planning refuses this (BaselineIndex.check_comparable): reaching it is our bug
        out["status"] = "missing"
        _fail(r, Status.ERROR, "baseline: the bundle has no result for this model: nothing compared")
        return
    if bl.get("dtype") != dtype.name or int(bl.get("steps") or 0) != len(r.series.get("loss.ref", [])):
        out["status"] = f"incomparable: bundle ran {bl.get('dtype')} x {bl.get('steps')} steps"
        _fail(r, Status.ERROR, f"baseline: {out['status']}: nothing compared")
        return
    curves = bl.get("curves") or {}
    ours = {k: [v for _, v in s] for k, s in r.series.items()}
    ref_dev = max(rel_devs(ours.get("loss.ref", []), curves.get("loss.ref", [])), default=math.inf)
    out["ref_curve_dev"] = ref_dev
    if not curves.get("loss.ref") or ref_dev > 1e-6:
        out["status"] = "incomparable: the float64 reference curves differ (another model or data?)"
        _fail(r, Status.FAIL_NUMERIC, f"baseline: float64 reference differs from the bundle's ({ref_dev:.3g})")
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
        _fail(r, Status.FAIL_NUMERIC, f"baseline: vs the {bl.get('device')} bundle: {'; '.join(problems)}")


# ---- summary --------------------------------------------------------------------------------------
def failure_reason(r: CaseResult) -> str:
    """The reason class of a non-pass: what failed (config, reference, eager, compiled, baseline) or,
    for runner statuses, the status itself (budget, crash, oom)."""
    if r.status is Status.PASS:
        return ""
    head = r.reason.split(":", 1)[0].strip() if ":" in r.reason else ""
    if head in ("config", "reference", "eager", "compiled", "baseline"):
        return head
    return r.status.value


def _fmt_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)) or n <= 0:
        return "-"
    return f"{n / 2**20:.0f}M"


def _fmt_count(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e4:
        return f"{n / 1e3:.0f}k"
    return str(int(n))


def _fmt_small(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return "0" if v == 0 else ("inf" if not math.isfinite(v) else f"{v:.0e}")


def _len_or_none(v: Any) -> int | None:
    return None if v is None else len(v)


def _fmt_secs(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, (int, float)) else "-"


def summarize(results: list[CaseResult], console: Any) -> dict[str, Any]:
    from rich.table import Table

    from bringup.console import esc, styled

    t = Table(title="zoo", title_justify="left", pad_edge=False, collapse_padding=True)
    any_fb = any(r.fields.get("fallback_ops") is not None for r in results)
    cols: list[tuple[str, str, Any]] = [
        ("model", "left", lambda r: r.name),
        ("status", "left", lambda r: styled(r.status)),
        ("params", "right", lambda r: _fmt_count(r.fields.get("params"))),
        ("breaks", "right", lambda r: _fmt_count(r.fields.get("graph_breaks"))),
        ("fallbk", "right", lambda r: _fmt_count(_len_or_none(r.fields.get("fallback_ops")))),
        ("rel err", "right", lambda r: _fmt_small(r.fields.get("max_rel_err"))),
        ("loss dev", "right", lambda r: _fmt_small(r.fields.get("loss_divergence"))),
        ("comp s", "right", lambda r: _fmt_secs(r.fields.get("compile_s"))),
        ("wall s", "right", lambda r: f"{r.wall_s:.0f}"),
        ("peak", "right", lambda r: _fmt_bytes(r.fields.get("peak_mem_bytes"))),
        ("reason", "left", lambda r: esc(r.reason[:160])),
    ]  # fmt: skip
    if not any_fb:  # cpu: nothing can fall back; the JSON still has fallback_ops (null)
        cols = [c for c in cols if c[0] != "fallbk"]
    if (getattr(console, "width", 200) or 200) < 130:  # narrow terminal: the JSON has the rest
        cols = [c for c in cols if c[0] not in ("peak", "comp s")]
    for col, just, _ in cols:
        t.add_column(col, justify=just, overflow="fold", no_wrap=col not in ("reason", "model"),  # type: ignore[arg-type]
                     max_width=24 if col == "model" else None, min_width=16 if col == "reason" else None)  # fmt: skip
    for r in results:
        t.add_row(*(fn(r) for _, _, fn in cols))
    console.print(t)
    by_status = Counter(r.status.value for r in results)
    by_reason = Counter(failure_reason(r) for r in results if r.status is not Status.PASS)
    config_fail = by_reason.get("config", 0)
    judged = [r for r in results if r.status is not Status.REF_FAIL]
    extras: dict[str, Any] = {
        "totals": {
            "models": len(results), "built": len(results) - config_fail, "config_fail": config_fail,
            "judged": len(judged), "pass": by_status.get("pass", 0),
            "pass_rate": round(by_status.get("pass", 0) / len(judged), 4) if judged else None,
        },
        "by_status": dict(sorted(by_status.items())),
        "by_reason": dict(sorted(by_reason.items())),
        "graph_breaks_total": sum(int(r.fields.get("graph_breaks") or 0) for r in results),
    }  # fmt: skip
    base = _baseline_summary(results)
    if base:
        extras["baseline"] = base
    console.print(
        f"zoo: {len(results)} model(s), {extras['totals']['built']} built ({config_fail} config failures, counted "
        f"apart); {by_status.get('pass', 0)}/{len(judged)} judged pass; by status: "
        + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
        + ("; by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(by_reason.items())) if by_reason else ""),
        highlight=False, markup=False,
    )  # fmt: skip
    if base:
        console.print(f"baseline {base['bundle']}: {base['compared']} compared, {base['differs']} differ; missing "
                      f"in the bundle: {', '.join(base['missing_in_bundle']) or 'none'}; missing in this run: "
                      f"{', '.join(base['missing_in_run']) or 'none'}", highlight=False, markup=False)  # fmt: skip
    return extras


def _baseline_summary(results: list[CaseResult]) -> dict[str, Any] | None:
    paths = {str((r.params.get("baseline") or {}).get("path")) for r in results if r.params.get("baseline")}
    if not paths:
        return None
    path = sorted(paths)[0]
    ours = {r.name for r in results}
    try:
        theirs = bundle_names(path)
    except BadInput:
        theirs = set()
    st = [((r.fields.get("baseline_check") or {}).get("status") or "") for r in results]
    return {
        "bundle": path,
        "compared": sum(s in ("ok", "differs") for s in st),
        "differs": sum(s == "differs" for s in st),
        "missing_in_bundle": sorted(r.name for r in results if (r.params.get("baseline") or {}).get("found") is False),
        "missing_in_run": sorted(theirs - ours),
    }


register_suite(
    Suite(
        name="zoo",
        help=HELP,
        add_arguments=add_arguments,
        build_cases=build_cases,
        run_cases=run_cases,
        summarize=summarize,
        order=ORDER,
        title="Model zoo",
        section=zoo_section.render,
        metrics=specs("params", "graph_breaks", "max_rel_err", "loss_divergence", "compile_s", "peak_mem_bytes"),
        record_plan=zoo_hub.record_plan,
        summarize_stored=zoo_hub.summarize_stored,
    )
)
