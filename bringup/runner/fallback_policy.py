"""`--fallback [SUITE=]POLICY`: what a CPU fallback means for a case, run-wide or per suite.

    gap    (default) as each suite judges it: ops, probe, train and zoo end a case that otherwise passed as
           `fallback` (a gap, named with its ops) where their own detector saw one; smoke, flex and profile
           do not look
    error  a fallback is a failure, in every case of the suite: the ops the suite's detector saw and those
           the backend's own counter saw over the whole case (`backend_fallback_ops`, recorded by the worker
           where the adapter keeps a counter: the test device's, PyTorch/XLA's metrics), compiled paths and
           suites that do not look included. A case that passed becomes `fallback` with the ops named
           ("CPU fallback not allowed (--fallback error): aten::gelu x2"); a case that failed otherwise keeps
           its status, the ops added to its reason. Always exit code 1 (any `fallback` is; --allow-unsupported
           does not cover it).

The status stays `fallback` (one vocabulary: "ran, but only through the backend's CPU fallback"), so every
report, the expectations gate and `compare` read it as they always did. Applied in the driver when a result
comes back, before it is stored. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.outcomes import NOT_FALLBACKS

POLICIES = ("gap", "error")


@dataclass(frozen=True)
class FallbackPolicy:
    default: str = "gap"
    suites: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, values: Iterable[str] | None, known: Iterable[str] | None = None) -> FallbackPolicy:
        """From `--fallback` values (repeatable, comma lists): POLICY or SUITE=POLICY. Bad values: BadInput."""
        known_set = set(known) if known is not None else None
        default, per = "gap", {}
        for value in values or ():
            for item in (s.strip() for s in str(value).split(",")):
                if not item:
                    continue
                suite, _, pol = item.rpartition("=")
                if pol not in POLICIES:
                    raise BadInput(
                        f"--fallback {item}: the policy is one of {', '.join(POLICIES)} (SUITE=POLICY for one suite)"
                    )
                if not suite:
                    default = pol
                elif known_set is not None and suite not in known_set:
                    raise BadInput(f"--fallback {item}: no suite {suite!r}; suites: {', '.join(sorted(known_set))}")
                else:
                    per[suite] = pol
        return cls(default, tuple(sorted(per.items())))

    def for_suite(self, suite: str) -> str:
        return dict(self.suites).get(suite, self.default)

    @property
    def active(self) -> bool:
        return self.default == "error" or any(p == "error" for _, p in self.suites)

    def describe(self) -> str:
        parts = [self.default] + [f"{s}={p}" for s, p in self.suites]
        return ",".join(parts)

    def apply(self, r: CaseResult) -> CaseResult:
        """The case's result under this policy (changed in place, and returned)."""
        if self.for_suite(r.suite) != "error":
            return r
        r.fields["fallback_policy"] = "error"
        ops = fallback_ops(r.fields)
        if not ops:
            return r
        msg = f"CPU fallback not allowed (--fallback error): {named(ops)}"
        if r.status in (Status.PASS, Status.FALLBACK):
            r.status, r.reason = Status.FALLBACK, f"{msg}; {r.reason}" if r.reason else msg
        else:
            r.reason = f"{r.reason}; {msg}" if r.reason else msg
        return r


def fallback_ops(fields: Mapping[str, Any]) -> dict[str, int]:
    """Every op a case's fields say ran through the CPU fallback: the suite's detector (`fallback_ops`, a list
    or {op: calls}) and the backend's counter (`backend_fallback_ops`), the larger count per op."""
    out: dict[str, int] = {}
    for key in ("fallback_ops", "backend_fallback_ops"):
        v = fields.get(key)
        items = v.items() if isinstance(v, Mapping) else ((k, 1) for k in v) if isinstance(v, (list, tuple)) else ()
        for k, n in items:
            k = str(k)
            if k.split(".")[0] in NOT_FALLBACKS:
                continue
            c = int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else 1
            out[k] = max(out.get(k, 0), c)
    return out


def named(ops: Mapping[str, int], limit: int = 5) -> str:
    top = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    more = len(ops) - len(top)
    return ", ".join(f"{k} x{v}" for k, v in top) + (f", +{more} more" if more > 0 else "")


def counter_delta(before: Mapping[str, int] | None, after: Mapping[str, int] | None) -> dict[str, int]:
    """What the backend's own fallback counter added over a case (host reads and copies left out)."""
    if before is None or after is None:
        return {}
    out = {}
    for k, v in after.items():
        d = int(v) - int(before.get(k, 0))
        if d > 0 and str(k).split(".")[0] not in NOT_FALLBACKS:
            out[str(k)] = d
    return out
