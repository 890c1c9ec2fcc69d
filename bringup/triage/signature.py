"""A root-cause signature for every case that did not pass, from what the run already measured. Pure: a
CaseResult (and, for a numeric failure, its localization when one was run) in, a `Signature` out.

- fallback: the set of aten ops that ran through the CPU fallback, each with its dtypes (`aten::embedding[float32]`).
- silent_eager: dynamo's graph-break reasons, normalised (the user's names and numbers stripped).
- fail_compile: the root exception's type, the compiler phase, the frame that raised (the innermost inside torch,
  or the plugin's own when the raise is outside torch), the message with names and numbers stripped; unsupported
  and error (bringup's own bug) the same, under their own kind.
- fail_numeric: the localized first divergence: the aten op with its dtype, forward or backward, eager or compiled
  (with which backend) when localize ran for the case; else the module check's first module off, by its kind (the
  class with the model's own prefix taken off: `LlamaRMSNorm` and `Qwen3RMSNorm` are one `RMSNorm`); else the
  whole-model comparison alone.
- crash: the signal and the last native frame of the worker's log. budget, oom: the phase that ran out.

`Signature.key` is the identity: two cases with one cause get one key, on any machine, in any run (no paths, line
numbers, addresses, shapes or temporaries' names in it). A numeric signature at op resolution keeps its module-level
key as `coarse`, so a run that was localized and one that was not still meet (`matches`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bringup.case import CaseResult, Status
from bringup.checks.failure_text import (
    after_label,
    exception_key,
    exception_parts,
    native_frame,
    normalize,
    normalize_break,
    signal_of,
)
from bringup.options import TORCH_DTYPE_NAMES
from bringup.outcomes import NOT_FALLBACKS, same_cause

NOT_SIGNED = frozenset({Status.PASS, Status.REF_FAIL})
KINDS = ("numeric", "compile", "fallback", "break", "crash", "budget", "oom", "unsupported", "error")


@dataclass(frozen=True)
class Signature:
    kind: str  # one of KINDS
    key: str  # the identity: "numeric: aten::silu | float32 | forward | eager"
    title: str  # one line for a heading
    parts: dict[str, Any] = field(default_factory=dict, compare=False)  # what the key was made of
    coarse: str = ""  # numeric at op resolution: the module-level key it refines
    resolution: str = ""  # numeric: op | module | model

    @property
    def id(self) -> str:
        """A short stable name of the key (file names, anchors)."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:10]

    def matches(self, other_key: str, other_coarse: str = "") -> bool:
        """One cause: the same key, or (a numeric signature localized on one side only) the same module-level key."""
        return same_cause(self.key, self.coarse, other_key, other_coarse)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "key": self.key,
            "title": self.title,
            "parts": self.parts,
            "coarse": self.coarse,
            "resolution": self.resolution,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Signature:
        return cls(
            str(d["kind"]),
            str(d["key"]),
            str(d.get("title") or d["key"]),
            dict(d.get("parts") or {}),
            str(d.get("coarse") or ""),
            str(d.get("resolution") or ""),
        )


def _join(kind: str, parts: Iterable[str]) -> str:
    return f"{kind}: " + " | ".join(p for p in parts)


# ---- fallback -------------------------------------------------------------------------------------
def _base(op: str) -> str:
    return op.split(".", 1)[0]


def fallback_ops(fields: Mapping[str, Any]) -> dict[str, list[str]]:
    """op -> its dtypes, from what the case recorded: the detector's ops (a dict or a list), the backend's own
    counter for ops the detector did not name (the counter names the kernel that ran, `aten::gelu.out` under the
    detector's `aten::gelu`: one op, named once), and the dtypes the detector saw (`fallback_dtypes`; unknown: [])."""
    out: dict[str, list[str]] = {}
    for op in fields.get("fallback_ops") or []:
        if op not in NOT_FALLBACKS:
            out.setdefault(str(op), [])
    named = {_base(op) for op in out}
    for op in fields.get("backend_fallback_ops") or []:
        if op not in NOT_FALLBACKS and _base(str(op)) not in named:
            out.setdefault(str(op), [])
    for op, kinds in (fields.get("fallback_dtypes") or {}).items():
        if op in out:
            out[op] = sorted(set(out[op]) | {str(k) for k in kinds})
    return out


def fallback_signature(r: CaseResult) -> Signature:
    ops = fallback_ops(r.fields)
    items = sorted(f"{op}[{','.join(k)}]" if k else op for op, k in ops.items())
    if not items:  # a fallback status with no op named (a policy's verdict on a counter): its reason
        items = [normalize(r.reason)]
    shown = ", ".join(items[:3]) + (f", ... ({len(items)} ops)" if len(items) > 3 else "")
    return Signature("fallback", "fallback: " + " ".join(items), f"CPU fallback: {shown}", {"ops": items})


# ---- graph breaks ---------------------------------------------------------------------------------
def break_signature(r: CaseResult) -> Signature:
    reasons = sorted({normalize_break(str(k)) for k in (r.fields.get("break_reasons") or {})})
    if not reasons:
        recompiles = r.fields.get("recompile_reasons") or []
        reasons = sorted({f"recompile: {normalize(str(x))}" for x in recompiles}) or [normalize(after_label(r.reason))]
    title = f"compiled path ran eager: {reasons[0]}" + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")
    return Signature("break", "break: " + " ; ".join(reasons), title, {"reasons": reasons})


# ---- exceptions: compile failures, unsupported, harness errors -------------------------------------
def exception_signature(kind: str, r: CaseResult) -> Signature:
    p = exception_parts(r.error, r.reason)
    key = f"{kind}: {exception_key(p)}"
    word = {"compile": "compile failure", "unsupported": "unsupported", "error": "harness error"}[kind]
    where = f" in {p['phase']}" if p["phase"] else ""
    title = f"{word}{where}: {p['exception'] + ': ' if p['exception'] else ''}{p['message']}"
    return Signature(kind, key, title[:160], p)


# ---- numeric ---------------------------------------------------------------------------------------
def module_kind(cls: str, model: str) -> str:
    """A module's class with the model's own prefix taken off: ("Qwen3RMSNorm", "qwen3") -> "RMSNorm"."""
    prefix = re.sub(r"[^a-z0-9]", "", model.lower())
    if prefix and cls.lower().startswith(prefix) and len(cls) > len(prefix):
        rest = cls[len(prefix) :]
        if rest[:1].isupper():
            return rest
    return cls


def _dtype(r: CaseResult) -> str:
    d = str(r.params.get("dtype") or "")
    d = d.removeprefix("amp-")
    return TORCH_DTYPE_NAMES.get(d, d) or "float32"


def _mode(r: CaseResult, compiled: bool) -> str:
    backend = str(r.params.get("backend") or r.fields.get("backend") or "")
    return f"compiled ({backend})" if compiled and backend else ("compiled" if compiled else "eager")


def _model(r: CaseResult) -> str:
    return str(r.params.get("model") or r.name)


def _module_failure(r: CaseResult) -> tuple[dict[str, Any], bool] | None:
    """The module check's first module off, eager before compiled: ({"module", "class", "why"}, compiled)."""
    for label, compiled in (("eager_modules", False), ("compiled_modules", True)):
        block = r.fields.get(label) or {}
        failed = block.get("failed") if isinstance(block, dict) else None
        if failed:
            return dict(failed[0]), compiled
    return None


def _direction(why: str) -> str:
    """forward for an output ("out.0: ..."), backward for a gradient ("grad.x: ...")."""
    return "backward" if why.strip().startswith("grad") else "forward"


def module_key(r: CaseResult) -> tuple[str, dict[str, Any]] | None:
    found = _module_failure(r)
    if found is None:
        return None
    failed, compiled = found
    kind = module_kind(str(failed.get("class") or "?"), _model(r))
    parts: dict[str, Any] = {
        "module_kind": kind,
        "module": failed.get("module"),
        "dtype": _dtype(r),
        "direction": _direction(str(failed.get("why") or "")),
        "mode": _mode(r, compiled),
    }
    return _join("numeric-module", (kind, parts["dtype"], parts["direction"], parts["mode"])), parts


def numeric_signature(r: CaseResult, localized: Mapping[str, Any] | None = None) -> Signature:
    """The localized first divergence when `localized` (the fields of the case's localize result) names an op,
    else the module check's first module off, else the whole-model comparison's failing run (eager, compiled)."""
    mod = module_key(r)
    loc = localized or {}
    if loc.get("first_op"):
        dtypes = [d for d in loc.get("op_dtypes") or [] if "float" in d or "complex" in d] or [_dtype(r)]
        compiled = bool(loc.get("compiled_region"))
        parts = {
            "op": loc["first_op"],
            "dtype": ",".join(sorted(set(dtypes))),
            "direction": "backward" if loc.get("op_backward") else "forward",
            "mode": _mode(r, compiled),
            "module": loc.get("first_module"),
            "module_kind": (mod[1]["module_kind"] if mod else ""),
            "localize": loc.get("reason", ""),
        }
        key = _join("numeric", (parts["op"], parts["dtype"], parts["direction"], parts["mode"]))
        title = f"wrong numbers: {parts['op']} ({parts['dtype']}, {parts['direction']}, {parts['mode']})"
        return Signature("numeric", key, title, parts, coarse=mod[0] if mod else "", resolution="op")
    if mod is not None:
        key, parts = mod
        how = f"{parts['dtype']}, {parts['direction']}, {parts['mode']}"
        title = f"wrong numbers: first module off is a {parts['module_kind']} ({how})"
        return Signature("numeric", key, title, parts, resolution="module")
    compiled = r.reason.startswith("compiled")
    parts = {"dtype": _dtype(r), "mode": _mode(r, compiled), "label": r.reason.split(":", 1)[0]}
    key = _join("numeric-model", (parts["label"], parts["dtype"], parts["mode"]))
    title = f"wrong numbers (whole model, not localized: {parts['label']}, {parts['dtype']}, {parts['mode']})"
    return Signature("numeric", key, title, parts, resolution="model")


# ---- crash, budget, oom ---------------------------------------------------------------------------
def crash_signature(r: CaseResult) -> Signature:
    sig, frame = signal_of(r.reason), native_frame(r.error)
    key = _join("crash", (sig, frame or "no native frame in the log"))
    title = f"crash: {sig}" + (f" in {frame}" if frame else "")
    return Signature("crash", key, title, {"signal": sig, "frame": frame})


def _phase_of_reason(r: CaseResult) -> str:
    phase = r.fields.get("budget_phase")
    if phase:
        return str(phase)
    m = re.match(r"^(eager|compiled|baseline|reference|budget: (\w+))", r.reason)
    if m:
        return m.group(2) or m.group(1)
    return "run" if "RSS" in r.reason else "case"


def budget_signature(r: CaseResult, kind: str) -> Signature:
    phase = _phase_of_reason(r)
    word = "over its budget" if kind == "budget" else "out of memory"
    return Signature(kind, _join(kind, (phase,)), f"{word} in {phase}", {"phase": phase})


def signature(r: CaseResult, localized: Mapping[str, Any] | None = None) -> Signature | None:
    """The case's root-cause signature; None for a pass and for ref_fail (the reference failed: nothing was judged)."""
    s = r.status
    if s in NOT_SIGNED:
        return None
    if s is Status.FALLBACK:
        return fallback_signature(r)
    if s is Status.SILENT_EAGER:
        return break_signature(r)
    if s is Status.FAIL_NUMERIC:
        return numeric_signature(r, localized)
    if s is Status.CRASH:
        return crash_signature(r)
    if s in (Status.BUDGET, Status.OOM):
        return budget_signature(r, s.value)
    kind = {Status.FAIL_COMPILE: "compile", Status.UNSUPPORTED: "unsupported"}.get(s, "error")
    return exception_signature(kind, r)
