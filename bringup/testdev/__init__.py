"""testdev: a real out-of-tree PyTorch device (PrivateUse1, renamed "testdev") for CI and demos.

`import bringup.testdev` builds the C++ extension in `csrc/` once (cached under
~/.cache/bringup/testdev, or $BRINGUP_CACHE_DIR/testdev) and registers the device, so

    bringup --import bringup.testdev --device testdev run --quick

runs every suite on a device that is neither cpu nor cuda. It behaves like a young backend: host
memory behind its own allocator (with statistics), a device guard with events (torch.Event,
torch.accelerator), native kernels for empty/copy/views and a few compute ops (add, sub, mul, div,
mm, bmm, addmm, fill_, zero_), a fused attention kernel (SDPA's overrideable backend, on cpu's flash
kernels), and a global CPU fallback for every other op. With
BRINGUP_TESTDEV_FALLBACK=0 those other ops raise NotImplementedError instead.

Numeric faults, off by default, make it a *wrong* device on demand (CI proves each suite catches them):
BRINGUP_TESTDEV_FAULTS="scale:gelu=1.01,bf16_matmul,drop_scale" (read at load, so workers inherit it)
or set_faults(...) in-process; see FAULTS_HELP. Some only real inputs expose (repeated ids, explicit masks,
ignored targets, packed rows): lastwrite:OP, sdpa_mask_as_causal, count_ignored:nll_loss, blockscan:cumsum=N.

Lazy mode, off by default, makes it execute like PyTorch/XLA (BRINGUP_TESTDEV_LAZY=1 at load, or
set_lazy(True)): the native compute kernels queue until synchronize, an event, or a read (a copy, .item(),
an op on the CPU fallback), and a queued op whose outputs were all freed by then is never computed. It
proves that no timer or calibration of bringup's can be fooled by work a device skips (csrc/lazy.h).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from bringup.compat import drain_autograd_threads_at_exit
from bringup.testdev import runtime
from bringup.testdev.build import load_extension

NAME = "testdev"
FAULTS_ENV = "BRINGUP_TESTDEV_FAULTS"
LAZY_ENV = "BRINGUP_TESTDEV_LAZY"
FAULTS_HELP = (
    "comma list of: scale:OP=FACTOR (OP's floating-point results x FACTOR; OP a dispatcher op, 'gelu' or "
    "'aten::gelu' for every overload incl. in-place and the out= kernel the CPU fallback runs, "
    "'aten::add.Tensor' for one overload; native kernels and fallback-routed ops alike), arg:OP=FACTOR "
    "(a fallback-routed OP's self/input argument x FACTOR before its kernel: a wrong constant inside the "
    "function, e.g. arg:_softmax=1.01 a softmax temperature, arg:silu_backward=1.02 silu's gradient taken "
    "at 1.02x), shift:OP=B (that argument + B: shift:rsqrt=1e-5 a norm's epsilon off), approx:OP (OP's "
    "approximate='none' computed as 'tanh': approx:gelu the tanh form where the exact one was asked), "
    "bf16_matmul (mm/bmm/addmm: inputs and every partial sum rounded to bf16), drop_scale (scale "
    "arguments ignored: _scaled_mm scale_a/scale_b, the sdpa kernels' scale, addmm alpha/beta); faults only real "
    "inputs expose: lastwrite:OP (a repeated index keeps only its last write instead of accumulating; OP one of "
    "embedding_dense_backward, index_put (= _index_put_impl_, accumulate=True), index_add, scatter_add), "
    "sdpa_mask_as_causal (the fused attention kernel serves an explicit attn_mask with its causal kernel), "
    "count_ignored:OP (OP nll_loss or nll_loss2d: the mean divides by every target, ignore_index ones too), "
    "blockscan:cumsum=N (cumsum restarts every N elements along its dim: the carry between blocks dropped)"
)
# The ops each fault of that family acts on (the base names the CPU fallback sees; index_put_'s accumulating path
# runs as _index_put_impl_ on testdev).
LASTWRITE_OPS = ("embedding_dense_backward", "_index_put_impl_", "index_add", "scatter_add")
COUNT_IGNORED_OPS = ("nll_loss", "nll_loss2d")
BLOCKSCAN_OPS = ("cumsum",)
FLAGS = ("bf16_matmul", "drop_scale", "sdpa_mask_as_causal")

# The ops with a native testdev kernel besides memory/copy/view plumbing (documentation and tests;
# the dispatcher's registrations are the source of truth).
NATIVE_COMPUTE_OPS = (
    "aten::add.Tensor",
    "aten::add_.Tensor",
    "aten::sub.Tensor",
    "aten::sub_.Tensor",
    "aten::mul.Tensor",
    "aten::mul_.Tensor",
    "aten::div.Tensor",
    "aten::div_.Tensor",
    "aten::mm",
    "aten::bmm",
    "aten::addmm",
    "aten::fill_.Scalar",
    "aten::zero_",
)


def register() -> None:
    """Build/load the extension and register PrivateUse1 as 'testdev' (idempotent)."""
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", NAME):
        raise RuntimeError(f"PrivateUse1 is already registered as {current!r}; testdev cannot also be loaded")
    load_extension()
    if current == NAME and getattr(torch, NAME, None) is runtime:
        return
    if current != NAME:
        torch.utils.rename_privateuse1_backend(NAME)
    torch._register_device_module(NAME, runtime)  # type: ignore[no-untyped-call]  # torch leaves it untyped
    for index in range(runtime.device_count()):  # every process that runs a backward here exits cleanly
        drain_autograd_threads_at_exit(NAME, index)
    if not hasattr(torch.Tensor, f"is_{NAME}"):
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


@dataclass(frozen=True)
class Faults:
    """The numeric faults switched on (all off: a correct device)."""

    scales: dict[str, float] = field(default_factory=dict)  # "aten::gelu" -> 1.01
    bf16_matmul: bool = False
    drop_scale: bool = False
    args: dict[str, float] = field(default_factory=dict)  # "aten::_softmax" -> 1.01: its input x 1.01
    shifts: dict[str, float] = field(default_factory=dict)  # "aten::rsqrt" -> 1e-5: its input + 1e-5
    approx: tuple[str, ...] = ()  # "aten::gelu": approximate="none" computed as "tanh"
    lastwrite: tuple[str, ...] = ()  # "aten::embedding_dense_backward": a repeated index keeps its last write only
    sdpa_mask_as_causal: bool = False  # the fused attention kernel: an explicit mask served by the causal kernel
    count_ignored: tuple[str, ...] = ()  # "aten::nll_loss": the mean divides by every target, ignored ones too
    blockscan: dict[str, int] = field(default_factory=dict)  # "aten::cumsum" -> 8: the scan restarts every 8

    def __bool__(self) -> bool:
        return bool(self.spec())

    def spec(self) -> str:
        parts = [f"scale:{op}={f:g}" for op, f in sorted(self.scales.items())]
        parts += [f"arg:{op}={f:g}" for op, f in sorted(self.args.items())]
        parts += [f"shift:{op}={b:g}" for op, b in sorted(self.shifts.items())]
        parts += [f"approx:{op}" for op in sorted(self.approx)]
        parts += [f"lastwrite:{op}" for op in sorted(self.lastwrite)]
        parts += [f"count_ignored:{op}" for op in sorted(self.count_ignored)]
        parts += [f"blockscan:{op}={n}" for op, n in sorted(self.blockscan.items())]
        parts += [n for n in FLAGS if getattr(self, n)]
        return ",".join(parts)


def _base(op: str) -> str:
    """'aten::index_add_.out' -> 'index_add' (an op's name without namespace, overload and in-place mark)."""
    return op.rpartition("::")[2].partition(".")[0].rstrip("_")


def _one_of(item: str, op: str, allowed: tuple[str, ...], aliases: dict[str, str] | None = None) -> str:
    """The dispatcher name ("aten::...") of `op` if its base is one of `allowed` (or an alias of one)."""
    base = _base(op)
    base = (aliases or {}).get(base, base)
    for name in allowed:
        if _base(name) == base:
            return f"aten::{name}"
    raise ValueError(
        f"testdev fault {item!r}: {op!r} is not one of {', '.join(allowed)}; {FAULTS_ENV} is a {FAULTS_HELP}"
    )


def parse_faults(spec: str) -> Faults:
    """'scale:gelu=1.01,arg:silu=1.02,shift:rsqrt=1e-5,approx:gelu,lastwrite:embedding_dense_backward,
    count_ignored:nll_loss,blockscan:cumsum=8,bf16_matmul,drop_scale,sdpa_mask_as_causal' -> Faults;
    ValueError (one line) on anything else."""
    maps: dict[str, dict[str, float]] = {"scale": {}, "arg": {}, "shift": {}}
    approx: list[str] = []
    lastwrite: list[str] = []
    count_ignored: list[str] = []
    blockscan: dict[str, int] = {}
    flags = dict.fromkeys(FLAGS, False)
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        if item in flags:
            flags[item] = True
            continue
        kind, _, rest = item.partition(":")
        op, eq, factor = rest.partition("=")
        op = op.strip()
        name = op if "::" in op else f"aten::{op}"
        if kind == "approx" and op and not eq:
            approx.append(name)
            continue
        if kind == "lastwrite" and op and not eq:
            lastwrite.append(_one_of(item, op, LASTWRITE_OPS, {"index_put": "_index_put_impl"}))
            continue
        if kind == "count_ignored" and op and not eq:
            count_ignored.append(_one_of(item, op, COUNT_IGNORED_OPS))
            continue
        if kind == "blockscan" and op and eq:
            block = int(factor) if factor.strip().isdigit() else 0
            if block < 1:
                raise ValueError(
                    f"testdev fault {item!r}: the block must be a positive integer; {FAULTS_ENV} is a {FAULTS_HELP}"
                )
            blockscan[_one_of(item, op, BLOCKSCAN_OPS)] = block
            continue
        try:
            value = float(factor)
        except ValueError:
            value = float("nan")
        if kind not in maps or not eq or not op or not value == value:
            raise ValueError(f"testdev fault {item!r} not understood; {FAULTS_ENV} is a {FAULTS_HELP}")
        maps[kind][name] = value
    return Faults(
        maps["scale"],
        flags["bf16_matmul"],
        flags["drop_scale"],
        args=maps["arg"],
        shifts=maps["shift"],
        approx=tuple(sorted(set(approx))),
        lastwrite=tuple(sorted(set(lastwrite))),
        sdpa_mask_as_causal=flags["sdpa_mask_as_causal"],
        count_ignored=tuple(sorted(set(count_ignored))),
        blockscan=blockscan,
    )


def set_faults(faults: Faults | str | None) -> None:
    """Switch numeric faults on in this process (None / "" / Faults(): all off)."""
    f = parse_faults(faults) if isinstance(faults, str) else (faults or Faults())
    load_extension().set_faults(
        dict(f.scales),
        f.bf16_matmul,
        f.drop_scale,
        dict(f.args),
        dict(f.shifts),
        list(f.approx),
        list(f.lastwrite),
        f.sdpa_mask_as_causal,
        list(f.count_ignored),
        dict(f.blockscan),
    )


def faults() -> Faults:
    scales, bf16_matmul, drop_scale, args, shifts, approx, lastwrite, causal, ignored, blockscan = (
        load_extension().faults()
    )
    return Faults(
        dict(scales),
        bool(bf16_matmul),
        bool(drop_scale),
        dict(args),
        dict(shifts),
        tuple(sorted(approx)),
        tuple(sorted(lastwrite)),
        bool(causal),
        tuple(sorted(ignored)),
        {str(k): int(v) for k, v in blockscan.items()},
    )


def fallback_enabled() -> bool:
    return bool(load_extension().fallback_enabled())


def set_fallback_enabled(enabled: bool) -> None:
    """Turn the CPU fallback on/off in this process (BRINGUP_TESTDEV_FALLBACK=0 sets it off at load)."""
    load_extension().set_fallback_enabled(bool(enabled))


def fallback_stats() -> dict[str, tuple[int, int, int]]:
    """(calls, bytes to host, bytes back to device) per dispatcher op name (with overload) that went
    through testdev's CPU fallback since the last reset: the backend's own ground truth, which the
    tests hold bringup's fallback detector against."""
    return {str(k): (int(v[0]), int(v[1]), int(v[2])) for k, v in load_extension().fallback_stats().items()}


def fallback_counts() -> dict[str, int]:
    """Calls per op that went through the CPU fallback since the last reset."""
    return {k: v[0] for k, v in fallback_stats().items()}


def reset_fallback_counts() -> None:
    load_extension().reset_fallback_counts()


def lazy() -> bool:
    return bool(load_extension().lazy())


def set_lazy(enabled: bool) -> None:
    """Lazy mode on/off in this process (off runs what is queued first)."""
    load_extension().set_lazy(bool(enabled))


def flush() -> None:
    """Run what lazy mode queued (synchronize does the same)."""
    load_extension().flush()


def lazy_stats() -> dict[str, int]:
    """Since the last reset: ops queued (deferred), run (executed), dropped unread (skipped), queue runs."""
    d, e, s, f = load_extension().lazy_stats()
    return {"deferred": int(d), "executed": int(e), "skipped": int(s), "flushes": int(f)}


def reset_lazy_stats() -> None:
    load_extension().reset_lazy_stats()


register()
set_faults(os.environ.get(FAULTS_ENV, ""))
