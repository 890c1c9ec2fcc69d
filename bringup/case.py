"""Case / CaseResult / Status: the one vocabulary every suite, executor, store and report uses."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bringup.metrics import metric_spec, stored_name


class Status(str, Enum):
    """Outcome of one case. See design.md for the meaning of each."""

    PASS = "pass"
    FAIL_NUMERIC = "fail_numeric"  # parity or loss curve out of tolerance
    FAIL_COMPILE = "fail_compile"  # compile raised
    BUDGET = "budget"  # compile or run exceeded its budget
    UNSUPPORTED = "unsupported"  # the device/backend said NotImplementedError: a gap, not a crash
    CRASH = "crash"  # worker died (signal named in reason)
    OOM = "oom"
    SILENT_EAGER = "silent_eager"  # compiled path silently ran eager
    FALLBACK = "fallback"  # ran, but only through the backend's CPU fallback
    REF_FAIL = "ref_fail"  # the CPU reference failed: says nothing about the device
    ERROR = "error"  # our own bug; traceback kept

    def __str__(self) -> str:  # so f-strings print "pass", not "Status.PASS"
        return self.value


# Statuses that do not make a run "failed". unsupported is a failure unless --allow-unsupported.
NON_FAILING = frozenset({Status.PASS, Status.REF_FAIL})


def is_failure(status: Status | str, allow_unsupported: bool = False) -> bool:
    s = Status(status)
    if s in NON_FAILING:
        return False
    return not (allow_unsupported and s is Status.UNSUPPORTED)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def make_case_id(suite: str, params: dict[str, Any]) -> str:
    """Stable id: a hash of the suite name and its parameters (order-insensitive)."""
    return hashlib.sha256(f"{suite}\0{canonical_json(params)}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Case:
    """One unit of device work. Pure data: JSON round-trips through `to_json` / `from_json`.

    `entry` is "module:function" called in the worker as `fn(case, ctx) -> CaseResult`.
    `budget_s` is the wall-time budget of the whole case (the worker's process group is killed past
    it). `isolated` asks for a fresh worker process that is discarded after the case (caches and
    memory can't leak into it or out of it). `env` is applied to that fresh process only.
    Only `suite` and `params` go into `case_id`, so a resumed run recognises its cases.
    """

    suite: str
    name: str
    params: dict[str, Any]
    entry: str
    budget_s: float = 600.0
    isolated: bool = False
    env: dict[str, str] = field(default_factory=dict)
    cost: float = 0.0
    after: tuple[str, ...] = ()

    @property
    def case_id(self) -> str:
        return make_case_id(self.suite, self.params)

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "name": self.name,
            "params": self.params,
            "entry": self.entry,
            "budget_s": self.budget_s,
            "isolated": self.isolated,
            "env": self.env,
            "cost": self.cost,
            "after": list(self.after),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Case:
        return cls(
            suite=d["suite"],
            name=d["name"],
            params=dict(d["params"]),
            entry=d["entry"],
            budget_s=float(d.get("budget_s", 600.0)),
            isolated=bool(d.get("isolated", False)),
            env=dict(d.get("env", {})),
            cost=float(d.get("cost", 0.0)),
            after=tuple(d.get("after", ())),
        )


@dataclass(frozen=True)
class Metric:
    value: float
    unit: str = ""


@dataclass
class CaseResult:
    """What a case produced. `fields` are the suite's own flat JSON fields (lists, strings, numbers)."""

    case_id: str
    suite: str
    name: str
    status: Status
    reason: str = ""
    metrics: dict[str, Metric] = field(default_factory=dict)
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    wall_s: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_case(cls, case: Case, status: Status | str, reason: str = "", **kw: Any) -> CaseResult:
        return cls(
            case_id=case.case_id,
            suite=case.suite,
            name=case.name,
            status=Status(status),
            reason=reason,
            params=dict(case.params),
            **kw,
        )

    def metric(self, name: str, value: float | int | None, unit: str = "") -> None:
        """Record a numeric metric; None (not measured) is simply not recorded. A metric in the catalogue
        (`bringup.metrics`) is recorded under its catalogue name and unit, whatever `unit` says."""
        if value is not None:
            spec = metric_spec(name)
            if spec is not None:
                name, unit = spec.name, spec.unit
            self.metrics[name] = Metric(float(value), unit)

    def value(self, name: str) -> float | None:
        """A recorded metric's value by its catalogue name (also found under an older alias); None if absent."""
        m = self.metrics.get(name)
        if m is None:
            spec = metric_spec(name)
            for n in (spec.name, *spec.aliases) if spec is not None else ():
                if n in self.metrics:
                    m = self.metrics[n]
                    break
        return None if m is None else m.value

    def to_json(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "suite": self.suite,
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "metrics": {k: [m.value, m.unit] for k, m in self.metrics.items()},
            "series": {k: [list(p) for p in v] for k, v in self.series.items()},
            "artifacts": self.artifacts,
            "fields": self.fields,
            "error": self.error,
            "wall_s": self.wall_s,
            "params": self.params,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CaseResult:
        return cls(
            case_id=d["case_id"],
            suite=d["suite"],
            name=d["name"],
            status=Status(d["status"]),
            reason=d.get("reason", ""),
            metrics={stored_name(d["suite"], k): Metric(float(v[0]), v[1]) for k, v in d.get("metrics", {}).items()},
            series={k: [(int(s), float(x)) for s, x in v] for k, v in d.get("series", {}).items()},
            artifacts=dict(d.get("artifacts", {})),
            fields=dict(d.get("fields", {})),
            error=d.get("error", ""),
            wall_s=float(d.get("wall_s", 0.0)),
            params=dict(d.get("params", {})),
        )

    def flat(self) -> dict[str, Any]:
        """The common --json contract row: fixed keys, then params, metrics and fields, flat."""
        row: dict[str, Any] = {
            "case_id": self.case_id,
            "suite": self.suite,
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "wall_s": round(self.wall_s, 4),
        }
        for src in (self.params, {k: m.value for k, m in self.metrics.items()}, self.fields):
            for k, v in src.items():
                row.setdefault(k, v)
        return row


class CaseStopped(Exception):
    """A step of a case's driver ended the case early (flex, profile): `result` is the case's."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.reason)
        self.result = result
