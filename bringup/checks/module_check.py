"""The module-level verdict: beside the whole-model comparison (checks/parity.py), every module of the
model judged on its own, forward and backward, on the inputs the device gave it (checks/module_rule.py
has the rule, checks/module_replay.py the recording and replay).

    mc = ModuleCheck(model, precision, device)
    with mc.recording():          # around step 0's forward and backward, eager, on the device
        loss = ...; loss.backward()
    eager = mc.judge_eager()      # the device's own replays of each module
    comp = mc.judge_compiled("inductor")   # each module compiled alone with the run's backend

For each module the same recorded call is computed three times: on the device (eager, or the module
compiled on its own: a real region boundary; dynamo reuses the code of one class at one shape, so a
stack of identical blocks compiles once), in float64 on cpu and by the trusted run (cpu eager at the
run's precision), each from the module's parameters at the recorded step. Judged per tensor: the
module's outputs, the gradients of its floating inputs and of its own parameters (given the output
gradient the device's backward gave it). The branches are judged, not only the residual stream: an
attention, an MLP, a norm, an activation, a projection each on its own.

An error that only appears when fusing across module boundaries (a compiled whole model) is not seen
here: the whole-model rule stays for it and for what only shows over steps.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from bringup.checks.masked_rows import call_dead_rows
from bringup.checks.module_replay import (
    Call,
    ModuleRecorder,
    Replayed,
    ReplayNoise,
    copy_module,
    judged_modules,
    replay,
)
from bringup.checks.module_rule import DITHERS, TensorFacts, TensorVerdict, judge_module_tensor, module_tolerance
from bringup.checks.parity import TWIN_DITHER, exact_zeros, judged_dtype, scale_floor
from bringup.precision import Precision, default_dtype

# one fp32 rounding: the dither of a module judged at fp32 (module_rule's fp32 tolerance)
FP32_DITHER = module_tolerance(torch.float32).dither
# dynamo's per-code cache: every module compiled alone goes through one wrapper's code object, and
# its recompile limit (8) would silently run the 9th module eagerly: raised, and hitting it raises.
_DYNAMO_LIMITS: dict[str, Any] = {
    "recompile_limit": 100_000,
    "accumulated_recompile_limit": 100_000,
    "fail_on_recompile_limit_hit": True,
}


# per recorded call, what the cpu computes once: (float64 replay, trusted replay, dithered float64 replays, twin)
Refs = tuple[Replayed, Replayed, list[Replayed], Replayed]
# per recorded call, what one judgement reads: (device replay, *Refs)
Run = tuple[Replayed, Replayed, Replayed, list[Replayed], Replayed]


@dataclass
class ModuleVerdict:
    name: str
    cls: str
    tensors: list[TensorVerdict] = field(default_factory=list)
    note: str = ""  # why it was not judged (a replay that raised), or ""
    calls: int = 1  # times it ran in the step (up to module_replay.MAX_CALLS of them judged together)
    fp32: bool = False  # judged at fp32 in a low-precision run: the program computes it in fp32 (_fp32_throughout)

    @property
    def judged(self) -> bool:
        return not self.note and any(t.judged for t in self.tensors)

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tensors)

    @property
    def worst(self) -> TensorVerdict | None:
        pool = [t for t in self.tensors if t.judged]
        return max(pool, key=lambda t: t.score) if pool else None

    @property
    def score(self) -> float:
        w = self.worst
        return w.score if w is not None else 0.0

    def why(self) -> str:
        w = self.worst
        text = w.summary() if w is not None else (self.note or "?")
        return f"{text} [judged at fp32: computed in fp32 throughout]" if self.fp32 else text


@dataclass
class ModuleReport:
    label: str  # "eager" | "compiled (inductor)"
    modules: list[ModuleVerdict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def judged(self) -> list[ModuleVerdict]:
        return [m for m in self.modules if m.judged]

    @property
    def failed(self) -> list[ModuleVerdict]:
        return [m for m in self.modules if not m.ok]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def score(self) -> float:
        return max((m.score for m in self.modules), default=0.0)

    @property
    def worst(self) -> tuple[ModuleVerdict, TensorVerdict] | None:
        pool = self.failed or self.judged
        if not pool:
            return None
        m = max(pool, key=lambda v: v.score)
        w = m.worst
        return (m, w) if w is not None else None

    @property
    def first_failed(self) -> ModuleVerdict | None:
        """The first module off in the order the forwards finished (inner before outer)."""
        return next(iter(self.failed), None)

    def summary(self) -> str:
        n, bad = len(self.judged), self.failed
        if not n and not bad:
            return f"module check ({self.label}): no module judged"
        w = self.worst
        if bad:
            first = bad[0]
            head = f"module check ({self.label}): {len(bad)}/{n} modules off; first {first.name} ({first.cls})"
            return f"{head}: {first.why()}"
        tail = f"; closest {w[0].name} {w[0].why()}" if w else ""
        return f"module check ({self.label}): {n} modules ok{tail}"

    def fields(self) -> dict[str, Any]:
        """What a case keeps: counts, the failing modules and the worst scores (JSON-able)."""
        w = self.worst
        return {
            "label": self.label,
            "ok": self.ok,
            "modules": len(self.modules),
            "judged": len(self.judged),
            "failed": [{"module": m.name, "class": m.cls, "why": m.why()} for m in self.failed][:20],
            "not_judged": [{"module": m.name, "why": m.note} for m in self.modules if m.note][:20],
            "judged_fp32": sum(m.fp32 for m in self.modules),
            "score": round(self.score, 4) if math.isfinite(self.score) else None,
            "worst": None if w is None else f"{w[0].name} {w[0].why()}",
            "seconds": round(self.seconds, 3),
        }


@contextlib.contextmanager
def _seeded() -> Iterator[None]:
    """Every replay draws the same numbers (a module with a random op replays alike on cpu)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        yield


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Small tensors: cpu ops on one thread (on a loaded machine, intra-op threads spin-wait: the
    statistics of one 4096-element tensor took 160 ms on 2 busy cores, 7 ms on one thread)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _coarser(a: torch.dtype, b: torch.dtype) -> bool:
    """`a` rounds coarser than `b` (a larger machine epsilon)."""
    return torch.finfo(a).eps > torch.finfo(b).eps


def _dithered(call: Call, m64: torch.nn.Module, d: float) -> list[Replayed]:
    """DITHERS float64 replays of `call` on cpu with every input and intermediate rounded once at random
    (relative RMS `d`), each with its own seed."""
    out = []
    for k in range(DITHERS):
        with _seeded():
            out.append(
                replay(
                    call,
                    m64,
                    torch.device("cpu"),
                    contextlib.nullcontext,
                    dtype=torch.float64,
                    noise=ReplayNoise(d, k + 1),
                )
            )
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


class ModuleCheck:
    """Record one step's module calls on the device, then judge every module (module doc).
    `prepare_reference(module, dtype)`: called on each cpu copy before its replay (the zoo points MoE
    layers at their float64-capable expert loop); `modules`: which to judge (default judged_modules, with
    `blocks`: only the first blocks of each stack)."""

    def __init__(
        self,
        model: torch.nn.Module,
        precision: Precision,
        device: torch.device,
        prepare_reference: Callable[[torch.nn.Module, torch.dtype], None] | None = None,
        modules: dict[str, torch.nn.Module] | None = None,
        blocks: int | None = None,
    ) -> None:
        self.model = model
        self.prec = precision
        self.device = device
        self.prepare_reference = prepare_reference
        self.modules = judged_modules(model, blocks) if modules is None else modules
        self.calls: dict[str, Call] = {}
        self.eager: dict[str, Replayed | str] = {}
        self._refs: dict[str, Refs | str] | None = None
        self._fp32: dict[str, list[Replayed]] = {}  # calls computed in fp32 throughout: their fp32 dithers
        self._state: dict[str, torch.Tensor] = {}  # name -> its value at the recorded step
        self.record_s = 0.0
        self.reference_s = 0.0

    @property
    def recorded(self) -> bool:
        return bool(self.calls)

    @contextlib.contextmanager
    def recording(self, replay_eager: bool = True) -> Iterator[ModuleCheck]:
        """Around one step's forward and backward: the calls are recorded; on a clean exit (still inside
        whatever wraps the step) the parameters are kept and, with `replay_eager`, every call is replayed
        on the device."""
        rec = ModuleRecorder(self.model, self.modules)
        with rec:
            yield self
        t0 = time.perf_counter()
        self.calls = rec.calls
        self._state = {name: t.detach().to("cpu", copy=True) for name, t in self._named()}
        self._refs = None
        if replay_eager:
            self.eager = self._replay_device(None)
        self.record_s = time.perf_counter() - t0

    def _autocast(self, device_type: str) -> Callable[[], Any]:
        return lambda: self.prec.autocast(device_type)

    def _replay_device(self, fn_for: Callable[[torch.nn.Module], Any] | None) -> dict[str, Replayed | str]:
        out: dict[str, Replayed | str] = {}
        for name, call in self.calls.items():
            try:
                fn = None if fn_for is None else fn_for(call.module)
                with _seeded():
                    out[name] = replay(call, call.module, self.device, self._autocast(self.device.type), fn=fn)
            except Exception as e:  # a region that can't replay or compile alone: named, not judged
                out[name] = f"the device's replay raised {_first_line(e)}"
        return out

    def _named(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The model's parameters and buffers by name (a name, not the tensor object, is what the recorded state
        is kept under: a run in another dtype replaces a module's buffers by new tensors, and a freed tensor's
        id can come back on an unrelated one)."""
        yield from self.model.named_parameters()
        yield from self.model.named_buffers()

    def _snapshot(self, t: torch.Tensor, names: dict[int, str]) -> torch.Tensor | None:
        """The recorded value of the model's tensor `t` (None: not recorded, or no longer that shape)."""
        snap = self._state.get(names.get(id(t), ""))
        return snap if snap is not None and snap.shape == t.shape else None

    def _cpu_copy(self, module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
        """The module on cpu in `dtype`, with its parameters and buffers as they were at the recorded step."""
        memo: dict[int, Any] = {}
        names = {id(t): n for n, t in self._named()}
        for t in itertools.chain(module.parameters(), module.buffers()):
            snap = self._snapshot(t, names)
            if snap is not None:
                v = snap.clone()
                param = isinstance(t, torch.nn.Parameter)
                memo[id(t)] = torch.nn.Parameter(v, requires_grad=t.requires_grad) if param else v
        m = copy_module(module, memo)
        m = m.to(device="cpu", dtype=dtype)
        if self.prepare_reference is not None:
            self.prepare_reference(m, dtype)
        return m

    def references(self) -> dict[str, Refs | str]:
        """Per call: (float64 replay, trusted replay, float64 replays with everything rounded once at
        random: module_rule.DITHERS of them, the float64 twin: parity.TWIN_DITHER) on cpu, computed once."""
        if self._refs is not None:
            return self._refs
        t0 = time.perf_counter()
        refs: dict[str, Refs | str] = {}
        cpu = torch.device("cpu")
        with _one_thread():
            self._references(refs, cpu)
        self._refs = refs
        self.reference_s = time.perf_counter() - t0
        return refs

    def _references(self, refs: dict[str, Refs | str], cpu: torch.device) -> None:
        dither = module_tolerance(self.prec).dither
        low = _coarser(judged_dtype(self.prec), torch.float32)
        off = lambda: contextlib.nullcontext()
        self._fp32 = {}
        for name, call in self.calls.items():
            try:
                with _seeded():
                    base = replay(
                        call, self._cpu_copy(call.module, self.prec.param_dtype), cpu, self._autocast("cpu"), dtypes=low
                    )
                fp32 = low and not any(_coarser(d, torch.float32) for d in base.dtypes)
                with default_dtype(torch.float64):
                    m64 = self._cpu_copy(call.module, torch.float64)
                    with _seeded():
                        r64 = replay(call, m64, cpu, off, dtype=torch.float64)
                    r64d = _dithered(call, m64, dither)
                    if fp32:
                        self._fp32[name] = _dithered(call, m64, FP32_DITHER)
                    with _seeded():  # which tensors are zero in exact arithmetic (parity.exact_zeros)
                        twin = replay(
                            call,
                            m64,
                            cpu,
                            off,
                            dtype=torch.float64,
                            noise=ReplayNoise(TWIN_DITHER, DITHERS + 1, every_dtype=True),
                        )
                refs[name] = (r64, base, r64d, twin)
            except Exception as e:
                refs[name] = f"the cpu reference could not replay it: {_first_line(e)}"

    def _fp32_throughout(self, names: list[str], device: dict[str, Replayed | str]) -> bool:
        """A module the program computes in fp32 in a low-precision run, judged at fp32: the trusted run
        rounded every floating result of every op of each of its calls (forward and backward, casts
        included) to fp32 or wider, and the device gave back every output and gradient in fp32 or wider.
        Under autocast that is a norm on the fp32 residual stream, rotary angles (autocast off, on
        purpose): a correct device's error there is fp32's, and a bend of 0.3% is 30x it, where the
        run's bf16 floor (3 x eps / sqrt(12) = 0.7%) would hide it. A device whose own autocast list
        runs such a module in bf16 returns bf16 tensors, and is judged at the run's precision."""
        for n in names:
            got = device.get(n)
            if n not in self._fp32 or not isinstance(got, Replayed):
                return False
            if any(_coarser(t.dtype, torch.float32) for t in got.tensors.values() if t.is_floating_point()):
                return False
        return True

    def judge(self, label: str, device: dict[str, Replayed | str]) -> ModuleReport:
        t0 = time.perf_counter()
        refs = self.references()
        rep = ModuleReport(label)
        groups: dict[str, list[str]] = {}  # a module's recorded calls, judged together
        for name, call in self.calls.items():
            groups.setdefault(call.module_name, []).append(name)
        with _one_thread():
            for mod, names in groups.items():
                cls = type(self.calls[names[0]].module).__name__
                runs: list[Run] = []
                note = ""
                for name in names:
                    got, rb = device.get(name, "not replayed"), refs.get(name, "no reference")
                    if isinstance(got, str) or isinstance(rb, str):
                        note = rb if isinstance(rb, str) else str(got)
                        break
                    runs.append((got, rb[0], rb[1], rb[2], rb[3]))
                fp32 = not note and self._fp32_throughout(names, device)
                if fp32:
                    runs = [(g, r, b, self._fp32[n], t) for n, (g, r, b, _, t) in zip(names, runs, strict=True)]
                dead = [call_dead_rows(self.calls[n].args, self.calls[n].kwargs) for n in names]
                tensors = [] if note else judge_calls(runs, torch.float32 if fp32 else self.prec, dead)
                verdict = ModuleVerdict(mod, cls, tensors, note, fp32=fp32)
                verdict.calls = self.calls[names[0]].calls
                rep.modules.append(verdict)
        rep.seconds = time.perf_counter() - t0
        return rep

    def judge_eager(self) -> ModuleReport:
        rep = self.judge("eager", self.eager)
        rep.seconds += self.record_s
        return rep

    @contextlib.contextmanager
    def _recorded_state(self) -> Iterator[None]:
        """The model's parameters and buffers at the recorded step while the block runs (a run may have
        trained it on since), its own values back after."""
        names = {id(t): n for n, t in self._named()}
        pairs = [(t, snap) for _, t in self._named() if (snap := self._snapshot(t, names)) is not None]
        live = [t for t, _ in pairs]
        now = [t.detach().clone() for t in live]
        with torch.no_grad():
            for t, snap in pairs:
                t.copy_(snap)
        try:
            yield
        finally:
            with torch.no_grad():
                for t, v in zip(live, now, strict=True):
                    t.copy_(v)

    def judge_compiled(self, backend: Any, label: str | None = None) -> ModuleReport:
        """Each recorded module compiled on its own with `backend` (torch.compile, static shapes) and
        replayed on the device, forward and backward; judged like the eager replays."""
        import torch._dynamo  # lazy: planning imports no torch._dynamo

        t0 = time.perf_counter()
        name = backend if isinstance(backend, str) else getattr(backend, "__name__", "backend")
        torch._dynamo.reset()
        with torch._dynamo.config.patch(**_DYNAMO_LIMITS), self._recorded_state():
            device = self._replay_device(lambda m: torch.compile(m, backend=backend, dynamic=False))
        torch._dynamo.reset()
        compile_s = time.perf_counter() - t0
        rep = self.judge(label or f"compiled ({name})", device)
        rep.seconds += compile_s
        return rep


def judge_calls(runs: list[Run], precision: Any, dead: list[torch.Tensor | None] | None = None) -> list[TensorVerdict]:
    """Every tensor of one module's replays, (device, float64, trusted, dithered float64 replays, float64 twin)
    per recorded call: outputs and gradients (module_rule.judge_module_tensor), a module's calls concatenated. A
    tensor the float64 replay has and the device's lacks fails. Zero in exact arithmetic is measured against
    the twin (parity.exact_zeros); such a tensor's unit (parity.scale_floor) is taken among tensors of one kind:
    outputs among outputs, gradients among gradients (a module's output and its gradients differ in scale by
    orders of magnitude). `dead`: per call, its fully masked attention rows (batch, q) (checks/masked_rows.py):
    what an output holds there is the kernel's choice, judged finite only (`_drop_dead_rows`)."""
    out: list[TensorVerdict] = []
    parts = _call_rows(runs, dead, out)
    joined = _joined(parts, precision, out)
    return out + _judge_joined(list(runs[0][1].tensors), joined, precision)


def _call_rows(
    runs: list[Run], dead: list[torch.Tensor | None] | None, out: list[TensorVerdict]
) -> dict[str, list[list[Any]]]:
    """Per tensor, a row per call: (device, float64, trusted, dithered draws, covariate, twin); an output's fully
    masked attention rows taken out (a failing verdict on `out` where the device's are not finite there)."""
    parts: dict[str, list[list[Any]]] = {}
    for k, (got, ref, base, dith, twin) in enumerate(runs):
        for name, r in ref.tensors.items():
            g, b = got.tensors.get(name), base.tensors.get(name)
            ds = [d.tensors.get(name) for d in dith]
            x = _covariate(name, r, got.inputs)
            row = [g, r, b, ds, x, twin.tensors.get(name)]
            rows_dead = dead[k] if dead is not None and k < len(dead) else None
            if rows_dead is not None and name.startswith("out.") and g is not None and b is not None:
                row, bad = _drop_dead_rows(row, rows_dead)
                if bad:
                    out.append(TensorVerdict(name, False, math.inf, 0.0, math.nan, math.inf, "size", why=bad))
            parts.setdefault(name, []).append(row)
    return parts


def _joined(parts: dict[str, list[list[Any]]], precision: Any, out: list[TensorVerdict]) -> dict[str, list[Any]]:
    """Per tensor, its calls concatenated (each column flattened and joined; the dithered draws one joined tensor
    per draw every call has) and the calls' stacked shape. A tensor missing on the device fails, one of another
    shape is judged as it is (a size failure), both on `out`; one the trusted run lacks is left out."""
    joined: dict[str, list[Any]] = {}
    for name, rows in parts.items():
        if any(row[0] is None for row in rows):
            out.append(
                TensorVerdict(name, False, math.inf, 0.0, math.nan, math.inf, "size", why="missing on the device")
            )
            continue
        if any(row[2] is None for row in rows):  # the trusted run has no such output: nothing to size it by
            continue
        if any(row[0].shape != row[1].shape for row in rows):
            bad = next(row for row in rows if row[0].shape != row[1].shape)
            out.append(judge_module_tensor(name, bad[0], bad[1], bad[2], precision))
            continue
        cols: list[Any] = []
        for j in range(6):
            ts = [row[j] for row in rows]
            if j == 3:  # the dithered draws: one joined tensor per draw that every call has
                draws = [[row[3][k] for row in rows] for k in range(len(rows[0][3]))]
                cols.append([torch.cat([t.flatten() for t in d]) for d in draws if all(t is not None for t in d)])
            else:
                cols.append(None if any(t is None for t in ts) else torch.cat([t.flatten() for t in ts]))
        shapes = {tuple(row[1].shape) for row in rows}
        cols.append((len(rows), *shapes.pop()) if len(shapes) == 1 else None)  # the calls' shape, stacked
        joined[name] = cols
    return joined


def _judge_joined(order: list[str], joined: dict[str, list[Any]], precision: Any) -> list[TensorVerdict]:
    """The module rule on each joined tensor, in the float64 replay's order: its scale floor taken among tensors
    of its kind (outputs, gradients), zero in exact arithmetic against the twin."""
    kinds = {k: [c[1] for n, c in joined.items() if n.startswith("grad.") == (k == "grad")] for k in ("grad", "out")}
    floors = {k: scale_floor(v, precision) for k, v in kinds.items()}
    zeros = exact_zeros({n: c[1] for n, c in joined.items()}, {n: c[5] for n, c in joined.items() if c[5] is not None})
    out: list[TensorVerdict] = []
    for name in order:
        if name not in joined:
            continue
        g, r, b, d, x, _, shape = joined[name]
        floor = floors["grad" if name.startswith("grad.") else "out"]
        # check 5 (position) on activations only: a parameter's gradient sums over tokens, and a correct device's
        # per-token scales (a softmax normaliser, a norm's rsqrt, rounded elsewhere) weigh unevenly into its rows
        # and columns: upcast and sdpa_math carry 0.5-0.7% in a block of q/k/v_proj's weight gradient (bf16, bench
        # 2026-12-03), 1.3-1.8 x one whole rounding; a bug confined to a tail or a tile shows on the activations.
        param = name.startswith("grad.") and not name.startswith("grad.in.")
        facts = TensorFacts(
            covariate=x,
            scale_floor=floor,
            dithered=d,
            shape=None if param else shape,
            zero=name in zeros,
            positional=not param,
        )
        out.append(judge_module_tensor(name, g, r, b, precision, facts))
    return out


def _drop_dead_rows(row: list[Any], dead: torch.Tensor) -> tuple[list[Any], str]:
    """An output's fully masked attention rows taken out of its judgement (NaN in the device's, float64, trusted and
    dithered tensors alike: module_rule leaves a position every side has NaN out, and keeps the layout), and why it
    fails when the device's value there is not finite where float64's is (a NaN there leaks into the next layer's
    keys). An output not laid out (batch, q, ...) as the mask's rows is left as it is."""
    g, r, b, ds, x, tw = row
    if tuple(r.shape[:2]) != tuple(dead.shape) or tuple(g.shape) != tuple(r.shape):
        return row, ""
    m = dead.to(r.device)
    bad = ""
    if not bool(torch.isfinite(g[m]).all()) and bool(torch.isfinite(r[m]).all()):
        bad = f"non-finite at {int(m.sum())} fully masked attention row(s), where float64 is finite"

    def drop(t: torch.Tensor | None) -> torch.Tensor | None:
        if t is None or tuple(t.shape) != tuple(r.shape):
            return t
        return t.masked_fill(m.reshape(*m.shape, *([1] * (t.dim() - 2))), float("nan"))

    return [drop(g), drop(r), drop(b), [drop(d) for d in ds], x, drop(tw)], bad


def _covariate(name: str, ref: torch.Tensor, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """The input a tensor is elementwise aligned with: the input itself for its gradient, for an output
    the first input of its shape."""
    if name.startswith("grad.in."):
        x = inputs.get(name[len("grad.in.") :])
        return x if x is not None and x.shape == ref.shape else None
    if name.startswith("out."):
        return next((x for x in inputs.values() if x.shape == ref.shape), None)
    return None
