"""Which ops ran natively on a device, which only through the backend's CPU fallback, and what crossed
between host and device.

Three sources, combined:
1. A TorchDispatchMode sees every op that reaches the backend (after autograd and after
   CompositeImplicitAutograd decompositions), with the devices and sizes of its tensors: op call
   counts, and explicit transfers (`.to()`, `.cpu()`, `copy_`, `.item()`) with their bytes.
2. The profiler (CPU activity, input shapes): each op the mode sees runs inside a marker
   `record_function`; an event with an `aten::_to_cpu` child inside that marker is an op that went
   through `at::native::cpu_fallback` (the signature of PyTorch's boxed CPU fallback, used by
   PrivateUse1 backends). Its `_to_cpu` children give the bytes sent to the host, and its
   `_copy_from_and_resize` / `to` children the bytes sent back. Composite ops that decompose into
   other ops on the device are judged by what actually ran inside them.
3. The dispatcher's registrations (`torch._C._dispatch_has_kernel_for_dispatch_key`), used when the
   profiler cannot run (another profiler is active): an op with no kernel for the device's dispatch
   key (nor a structured `out=` kernel it would call) runs through the backend fallback. Bytes are
   then estimated from the op's device inputs (to host) and device outputs (to device).

On cpu nothing can fall back (cpu is the reference): only transfers are counted.

Copies and host reads (`.item()`, `.cpu()`: aten::_local_scalar_dense, _to_copy, copy_) are transfers,
never fallbacks, even where a backend runs them through its fallback machinery (PyTorch/XLA runs every
.item() as a CPU-fallback aten::_local_scalar_dense): reading a value to the host is not an op the device
lacks. They are counted as transfers, and `.item()`-style reads also as `host_reads` (on a lazy device
each one inside a step cuts the graph and runs what was recorded so far).

4. The backend's own counter, where its adapter has one (`Device.fallback_counts()`: PyTorch/XLA's
   torch_xla.debug.metrics, the test device's C++ counter): its count over the window, less the host
   reads seen in the window, is kept as `backend_fallbacks`; an op it counts that the other sources did
   not see is added to the fallbacks (`source` then ends in "+backend").
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from bringup.device import Device

_MARK = "bringup.fallbacks.op#"
# Ops that move data between devices when called at top level: (source arg, destination arg or None
# for "the output").
_COPY_OPS = {
    "aten::_to_copy": (0, None),
    "aten::copy_": (1, 0),
    "aten::_copy_from": (0, 1),
    "aten::_copy_from_and_resize": (0, 1),
}
# The profiler's C++ type names of tensor dtypes -> bytes per element.
_ITEMSIZE = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4, "short unsigned int": 2, "unsigned int": 4, "long unsigned int": 8,
}  # fmt: skip
_TRANSFER_KEYS = ("h2d_count", "h2d_bytes", "d2h_count", "d2h_bytes", "d2d_count", "d2d_bytes")
# Ops that read a device value into a host scalar (.item(), bool(t), float(t)).
HOST_READS = ("aten::_local_scalar_dense",)


@dataclass
class OpStats:
    calls: int = 0
    bytes_to_host: int = 0
    bytes_to_device: int = 0
    fallback: bool = False  # at least one call went (at least partly) through the CPU fallback


@dataclass
class FallbackReport:
    ops: dict[str, OpStats] = field(default_factory=dict)  # aten op name -> stats
    fallback_ops: dict[str, int] = field(default_factory=dict)  # op -> calls that ran via the CPU fallback
    transfers: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_TRANSFER_KEYS, 0))
    # the ops that actually went through the fallback inside the ops above (a composite op's inner
    # ops), by profiler event name; empty when only registrations were used
    fallback_kernels: dict[str, int] = field(default_factory=dict)
    source: str = "dispatch+profiler"  # how fallbacks were identified (see module doc)
    device: str = ""
    host_reads: dict[str, int] = field(default_factory=dict)  # .item()-style reads in the window, by op
    # the backend's own count over the window, host reads taken out (None: its adapter keeps no counter)
    backend_fallbacks: dict[str, int] | None = None
    backend_only: list[str] = field(default_factory=list)  # counted by the backend, not seen by the detector
    # per op that fell back: the dtypes its device inputs had (op_dtypes), and per "op[dtypes]" its first such call's
    # arguments (describe_args: shapes, dtypes, scalars; no values): what a standalone repro of the op needs
    fallback_dtypes: dict[str, list[str]] = field(default_factory=dict)
    fallback_examples: dict[str, Any] = field(default_factory=dict)

    @property
    def native_ops(self) -> list[str]:
        return sorted(n for n, s in self.ops.items() if not s.fallback)

    @property
    def fallback_calls(self) -> int:
        return sum(self.fallback_ops.values())

    def summary(self, limit: int = 5) -> str:
        if not self.fallback_ops:
            return f"no CPU fallbacks ({len(self.ops)} ops)"
        top = sorted(self.fallback_ops.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        more = len(self.fallback_ops) - len(top)
        return (
            f"{len(self.fallback_ops)} op(s) fell back to CPU: "
            + ", ".join(f"{n} x{c}" for n, c in top)
            + (f", +{more} more" if more > 0 else "")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "source": self.source,
            "ops": {k: asdict(v) for k, v in sorted(self.ops.items())},
            "fallback_ops": dict(sorted(self.fallback_ops.items())),
            "fallback_kernels": dict(sorted(self.fallback_kernels.items())),
            "transfers": dict(self.transfers),
            "host_reads": dict(sorted(self.host_reads.items())),
            "backend_fallbacks": None if self.backend_fallbacks is None else dict(self.backend_fallbacks),
            "backend_only": list(self.backend_only),
            "fallback_dtypes": dict(sorted(self.fallback_dtypes.items())),
            "fallback_examples": dict(sorted(self.fallback_examples.items())),
        }


@dataclass
class _Call:
    idx: int
    name: str
    fallback: bool = False
    bytes_to_host: int = 0
    bytes_to_device: int = 0
    est_to_host: int = 0  # registration-based estimates (inputs / outputs on the device)
    est_to_device: int = 0
    copy: tuple[str, int] | None = None  # explicit transfer: ("h2d"|"d2h"|"d2d", bytes)
    dtypes: tuple[str, ...] = ()  # the op's dtypes (op_dtypes of its device inputs)


def _nbytes(t: torch.Tensor) -> int:
    return int(t.numel()) * int(t.element_size())


def op_dtypes(tensors: list[torch.Tensor]) -> tuple[str, ...]:
    """An op's dtypes as a fallback names them: its floating inputs' dtypes, else its first input's."""
    names = sorted({str(t.dtype).replace("torch.", "") for t in tensors if t.is_floating_point() or t.is_complex()})
    return tuple(names) or tuple(str(t.dtype).replace("torch.", "") for t in tensors[:1])


def describe_args(node: Any) -> Any:
    """An op call's arguments as JSON, without values: a tensor is its shape, dtype and device; dtypes,
    devices and lists are tagged (the form bringup/localize/repro.py reads); scalars stay as they are."""
    if isinstance(node, torch.Tensor):
        return {"tensor": list(node.shape), "dtype": str(node.dtype).replace("torch.", ""), "device": node.device.type}
    if isinstance(node, torch.dtype):
        return {"dtype": str(node).replace("torch.", "")}
    if isinstance(node, torch.device):
        return {"device": node.type}
    if isinstance(node, (list, tuple)):
        return {"list": [describe_args(x) for x in node]}
    if isinstance(node, dict):
        return {"dict": {str(k): describe_args(v) for k, v in node.items()}}
    if node is None or isinstance(node, (bool, int, float, str)):
        return node if not isinstance(node, float) or math.isfinite(node) else {"repr": repr(node)}
    return {"repr": repr(node)}


def _event_bytes(ev: Any, i: int = 0) -> int:
    shapes = getattr(ev, "input_shapes", None) or []
    dtypes = getattr(ev, "input_dtypes", None) or []
    if i >= len(shapes) or i >= len(dtypes) or not isinstance(shapes[i], list):
        return 0
    dt = str(dtypes[i])
    size = _ITEMSIZE.get(dt, 1 if "Float8" in dt or "Float4" in dt else 0)
    if not all(isinstance(s, int) for s in shapes[i]):
        return 0
    return math.prod(shapes[i]) * size


def _key_for(device: Device) -> str:
    try:
        return str(torch._C._dispatch_key_for_device(device.type))
    except Exception:
        return "PrivateUse1"


def _has_kernel(name: str, key: str) -> bool:
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))
    except Exception:
        return False


def native_by_registration(name: str, key: str) -> bool:
    """True when the dispatcher would run `name` without the backend fallback (best effort: a
    CompositeExplicitAutograd op counts as native, since what it decomposes into is not inspected)."""
    if _has_kernel(name, key):
        return True
    if _has_kernel(name, "CompositeExplicitAutogradNonFunctional"):
        # a structured op's functional / in-place wrapper: it calls the `out=` overload's kernel
        base = name.split(".")[0]
        return _has_kernel(f"{base}.out", key)
    return _has_kernel(name, "CompositeExplicitAutograd")


class _OpMode(TorchDispatchMode):
    def __init__(self, det: FallbackDetector) -> None:
        super().__init__()
        self.det = det

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        det = self.det
        flat_in, _ = tree_flatten((args, kwargs))
        ins = [a for a in flat_in if isinstance(a, torch.Tensor)]
        on_dev = [t for t in ins if t.device.type == det.device.type]
        name = func.name() if hasattr(func, "name") else str(func)
        idx = next(det._counter)
        marker: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        if det._profiling and on_dev:
            marker = torch.autograd.profiler.record_function(f"{_MARK}{idx}")
        with marker:
            out = func(*args, **kwargs)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        outs_dev = [t for t in outs if t.device.type == det.device.type]
        if not on_dev and not outs_dev:
            return out  # never touched the device
        call = _Call(idx, name, dtypes=op_dtypes(on_dev or outs_dev))
        if (name, call.dtypes) not in det._examples:  # the first call of each op and dtype: its arguments
            det._examples[(name, call.dtypes)] = {"args": describe_args(list(args)), "kwargs": describe_args(kwargs)}
        call.copy = det._classify_copy(name, args, outs)
        if call.copy is None and name == "aten::_local_scalar_dense" and on_dev and not det.device.is_cpu:
            call.copy = ("d2h", int(on_dev[0].element_size()))
        if call.copy is None and on_dev and not det.device.is_cpu and not native_by_registration(name, det.key):
            call.fallback = True
            call.est_to_host = sum(_nbytes(t) for t in on_dev)
            call.est_to_device = sum(_nbytes(t) for t in outs_dev)
        det._calls.append(call)
        return out


class FallbackDetector:
    """`with FallbackDetector(device) as det: ...; det.report()`: ops, CPU fallbacks, transfers."""

    def __init__(self, device: Device, use_profiler: bool = True) -> None:
        self.device = device
        self.key = _key_for(device)
        self.use_profiler = use_profiler
        self._calls: list[_Call] = []
        self._examples: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
        self._counter: Iterator[int] = itertools.count()
        self._profiling = False
        self._prof: Any = None
        self._mode: _OpMode | None = None
        self._report: FallbackReport | None = None
        self._backend0: dict[str, int] | None = None

    def __enter__(self) -> FallbackDetector:
        self._calls, self._counter, self._report, self._examples = [], itertools.count(), None, {}
        self._backend0 = _backend_counts(self.device)
        self._profiling = bool(self.use_profiler and not self.device.is_cpu and not _profiler_active())
        if self._profiling:
            self._prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
            try:
                self._prof.__enter__()
            except Exception:
                self._prof, self._profiling = None, False
        self._mode = _OpMode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._mode is not None
        self._mode.__exit__(*exc)
        self._mode = None
        events = None
        if self._prof is not None:
            self._prof.__exit__(None, None, None)
            try:
                events = self._prof.events()
            except Exception:
                events = None
            self._prof = None
        self._report = self._build(events)
        self._cross_check(self._report, _backend_counts(self.device))

    def _cross_check(self, rep: FallbackReport, after: dict[str, int] | None) -> None:
        """The backend's own count over the window (less the host reads seen in it) next to what the
        detector found; an op only the backend counted is a fallback too."""
        if self._backend0 is None or after is None:
            return
        diff = {k: v - self._backend0.get(k, 0) for k, v in after.items()}
        for name, n in rep.host_reads.items():
            if name in diff:
                diff[name] -= n
        rep.backend_fallbacks = {k: v for k, v in sorted(diff.items()) if v > 0}
        seen = set(rep.fallback_ops) | set(rep.fallback_kernels)
        seen_base = {k.split(".")[0] for k in seen}
        for name, n in rep.backend_fallbacks.items():
            if name in seen or name.split(".")[0] in seen_base or name in HOST_READS:
                continue
            rep.backend_only.append(name)
            rep.fallback_ops[name] = rep.fallback_ops.get(name, 0) + n
        if rep.backend_only:
            rep.source += "+backend"

    def _classify_copy(self, name: str, args: tuple, outs: list[torch.Tensor]) -> tuple[str, int] | None:
        spec = _COPY_OPS.get(name)
        if spec is None:
            return None
        src_i, dst_i = spec
        try:
            src = args[src_i]
            dst = outs[0] if dst_i is None else args[dst_i]
        except (IndexError, TypeError):
            return None
        if not (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)):
            return None
        s_dev, d_dev = src.device.type == self.device.type, dst.device.type == self.device.type
        if self.device.is_cpu:
            return None  # host to host: no transfer on cpu
        if s_dev and d_dev:
            return ("d2d", _nbytes(src))
        if d_dev and src.device.type == "cpu":
            return ("h2d", _nbytes(src))
        if s_dev and dst.device.type == "cpu":
            return ("d2h", _nbytes(src))
        return None

    def _build(self, events: Any) -> FallbackReport:
        seen: dict[int, _Seen] = _fallbacks_from_profile(events) if events is not None else {}
        if events is not None:
            source = "dispatch+profiler"
        else:
            source = "dispatch" if self.device.is_cpu else "dispatch+registrations"
        rep = FallbackReport(device=self.device.name, source=source)
        tr = rep.transfers
        for c in self._calls:
            if events is not None and c.copy is None:  # a copy / read: never a fallback (module doc)
                s = seen.get(c.idx, _Seen())
                c.fallback, c.bytes_to_host, c.bytes_to_device = s.fallback, s.to_host, s.to_device
                n_host, n_dev = s.n_to_host, s.n_to_device
                for k in s.kernels:
                    rep.fallback_kernels[k] = rep.fallback_kernels.get(k, 0) + 1
            elif c.copy is None:
                c.bytes_to_host, c.bytes_to_device = (c.est_to_host, c.est_to_device) if c.fallback else (0, 0)
                n_host, n_dev = int(c.est_to_host > 0), int(c.est_to_device > 0)
            else:
                c.fallback, c.bytes_to_host, c.bytes_to_device, n_host, n_dev = False, 0, 0, 0, 0
            if c.copy is not None:
                kind, nb = c.copy
                tr[f"{kind}_count"] += 1
                tr[f"{kind}_bytes"] += nb
                if kind == "h2d":
                    c.bytes_to_device += nb
                elif kind == "d2h":
                    c.bytes_to_host += nb
            elif c.fallback:
                tr["d2h_count"] += n_host
                tr["d2h_bytes"] += c.bytes_to_host
                tr["h2d_count"] += n_dev
                tr["h2d_bytes"] += c.bytes_to_device
            st = rep.ops.setdefault(c.name, OpStats())
            st.calls += 1
            st.bytes_to_host += c.bytes_to_host
            st.bytes_to_device += c.bytes_to_device
            if c.name in HOST_READS and c.copy is not None:
                rep.host_reads[c.name] = rep.host_reads.get(c.name, 0) + 1
            if c.fallback:
                st.fallback = True
                rep.fallback_ops[c.name] = rep.fallback_ops.get(c.name, 0) + 1
                kinds = rep.fallback_dtypes.setdefault(c.name, [])
                if (kind := "/".join(c.dtypes)) not in kinds:
                    kinds.append(kind)
                    if ex := self._examples.get((c.name, c.dtypes)):
                        rep.fallback_examples[f"{c.name}[{kind}]"] = ex
        return rep

    def report(self) -> FallbackReport:
        if self._report is None:
            raise RuntimeError("FallbackDetector.report() is available after the with-block ends")
        return self._report


def _backend_counts(device: Device) -> dict[str, int] | None:
    try:
        return device.fallback_counts()
    except Exception:
        return None


def _profiler_active() -> bool:
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except Exception:
        return False


@dataclass
class _Seen:
    """What the profiler saw inside one op call's marker."""

    fallback: bool = False
    to_host: int = 0
    to_device: int = 0
    n_to_host: int = 0
    n_to_device: int = 0
    kernels: list[str] = field(default_factory=list)


def _fallbacks_from_profile(events: Any) -> dict[int, _Seen]:
    """marker index -> what fell back inside it, from the profiler's event tree."""
    out: dict[int, _Seen] = {}
    for ev in events:
        if not ev.name.startswith(_MARK):
            continue
        try:
            seen = out.setdefault(int(ev.name[len(_MARK) :]), _Seen())
        except ValueError:
            continue
        stack = list(ev.cpu_children)
        while stack:
            e = stack.pop()
            kids = list(e.cpu_children)
            if not any(k.name == "aten::_to_cpu" for k in kids):
                stack.extend(kids)
                continue
            seen.fallback = True
            overload = getattr(e, "overload_name", "") or ""
            seen.kernels.append(f"{e.name}.{overload}" if overload and overload != "default" else e.name)
            for k in kids:
                if k.name == "aten::_to_cpu":
                    for t in k.cpu_children:
                        if t.name in ("aten::to", "aten::_to_copy"):
                            seen.to_host += _event_bytes(t)
                            seen.n_to_host += 1
                elif k.name in ("aten::_copy_from_and_resize", "aten::to", "aten::_to_copy"):
                    seen.to_device += _event_bytes(k)
                    seen.n_to_device += 1
            # what runs inside the fallback runs on CPU tensors: not descended into
    return out


def detect(fn: Callable[[], Any], device: Device) -> FallbackReport:
    """Run `fn()` under a FallbackDetector and return its report (fn's result is discarded)."""
    with FallbackDetector(device) as det:
        fn()
    return det.report()


def profiled_fallbacks(fn: Callable[[], Any], device: Device) -> dict[str, int] | None:
    """Run `fn()` under the profiler alone (no dispatch mode: a compiled function can run under it as it
    is, where a TorchDispatchMode makes dynamo skip the frame) and return op name -> calls that went
    through the backend's CPU fallback (an event with an `aten::_to_cpu` child). {} on cpu; None when
    another profiler is already running (nothing could be observed)."""
    if device.is_cpu:
        fn()
        return {}
    if _profiler_active():
        return None

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    out: dict[str, int] = {}
    for ev in prof.events():
        if ev.name in HOST_READS or ev.name in _COPY_OPS or ev.name in ("aten::to", "aten::_to_cpu"):
            continue  # transfers and host reads: never fallbacks (module doc)
        if any(k.name == "aten::_to_cpu" for k in ev.cpu_children):
            out[ev.name] = out.get(ev.name, 0) + 1
    return out
