"""What a bisection is, as frozen data: requirement sets, candidates, the target, the run settings.

A `BisectSpec` is built once from the options (candidates resolved against the index or a wheel
directory), stored in the run's info, and read back on `--resume`: a resumed bisection continues over the
same candidates even if the index has moved on since.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from bringup.errors import BadInput


def parse_requirement(text: str, what: str = "requirement") -> Requirement:
    """A PEP 508 requirement, or BadInput naming what was wrong."""
    try:
        req = Requirement(text.strip())
    except InvalidRequirement as e:
        raise BadInput(f"{what} {text!r} is not a requirement ({str(e).splitlines()[0]})") from None
    return req


def normalize(text: str, what: str = "requirement") -> str:
    """One spelling per requirement: canonical name, sorted extras and specifiers (`Torch == 2.9` ->
    `torch==2.9`), so that equal sets hash equal."""
    req = parse_requirement(text, what)
    name = canonicalize_name(req.name)
    extras = f"[{','.join(sorted(canonicalize_name(x) for x in req.extras))}]" if req.extras else ""
    if req.url:
        body = f" @ {req.url}"
    else:
        body = ",".join(sorted(str(s) for s in req.specifier))
    marker = f" ; {req.marker}" if req.marker else ""
    return f"{name}{extras}{body}{marker}"


def pins(requirements: tuple[str, ...]) -> dict[str, str]:
    """name -> the specifier (or file URL) each requirement pins, for checking what got installed."""
    out: dict[str, str] = {}
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        spec = req.url or str(req.specifier)
        if spec:
            out[canonicalize_name(req.name)] = spec
    return out


@dataclass(frozen=True)
class Candidate:
    """One point of the search: a label (what the answer calls it), its exact requirement set and, for a
    wheel directory, where pip finds the files."""

    label: str
    requirements: tuple[str, ...]
    version: str = ""  # the moving package's version (index releases, wheels); "" for explicit sets
    find_links: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "requirements": list(self.requirements),
            "version": self.version,
            "find_links": list(self.find_links),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Candidate:
        return cls(str(d["label"]), tuple(d["requirements"]), str(d.get("version", "")), tuple(d.get("find_links", ())))


@dataclass(frozen=True)
class Target:
    """What runs in each candidate's env: a repro script, or one case of a stored run.

    repro: `path` (absolute) and its sha256 (a resumed bisection refuses an edited script).
    case: the stored Case (JSON), the run it came from, the device and --import modules to run it with."""

    kind: str  # "repro" | "case"
    path: str = ""
    sha256: str = ""
    case: dict[str, Any] = field(default_factory=dict)
    from_run: str = ""
    device: str = "cpu"
    imports: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        if self.kind == "repro":
            return Path(self.path).name
        return f"{self.case.get('suite')}/{self.case.get('name')}"

    @property
    def compiles(self) -> bool:
        """Whether the target goes through torch.compile (what the compiler bisector can split)."""
        if self.kind == "repro":
            try:
                text = Path(self.path).read_text(errors="replace")
            except OSError:
                return False
            return "torch.compile" in text
        p = self.case.get("params", {})
        backend = str(p.get("backend") or p.get("compile_backend") or "")
        modes = str(p.get("mode") or p.get("modes") or "")
        return backend not in ("", "none", "eager") or "compile" in modes or "regional" in modes

    @property
    def zoo_model(self) -> dict[str, Any] | None:
        """The model a stored zoo case trains (what `bringup localize` takes), or None."""
        p = self.case.get("params", {})
        if self.kind != "case" or self.case.get("suite") != "zoo" or "model" not in p:
            return None
        source = str(p.get("source", "hf"))
        return {
            "model": str(p["model"]),
            "source": "hf" if source.startswith("hf") else source,
            "task": str(p.get("task") or "causal-lm"),
            "dtype": str(p.get("dtype", "float32")),
            "backend": str(p.get("backend") or ""),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "sha256": self.sha256,
            "case": self.case,
            "from_run": self.from_run,
            "device": self.device,
            "imports": list(self.imports),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Target:
        return cls(
            str(d["kind"]),
            str(d.get("path", "")),
            str(d.get("sha256", "")),
            dict(d.get("case") or {}),
            str(d.get("from_run", "")),
            str(d.get("device", "cpu")),
            tuple(d.get("imports", ())),
        )


@dataclass(frozen=True)
class Settings:
    """How every candidate runs: budgets, repeats, the env cache, what each env holds beside the candidate."""

    repeat: int
    build_budget_s: float
    run_budget_s: float
    env_cache: str
    env_cache_max_gb: float
    inherit_site: tuple[str, ...]  # this Python's site dirs each env sees (under its own), or ()
    fail_status: str
    with_reqs: tuple[str, ...] = ()
    bringup_deps: tuple[str, ...] = ()  # a stored case: bringup's own requirements (it is overlaid from a wheel)
    bringup_wheel: str = ""  # the wheel of this tree a stored case's envs get ("" with inherit_site / a repro)
    new_signature: str = ""  # a repro's failure looked for (--new-signature): its runs with it are fail_status
    python: str = field(default_factory=lambda: sys.executable)

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Settings:
        kw = dict(d)
        for k in ("inherit_site", "with_reqs", "bringup_deps"):
            kw[k] = tuple(kw.get(k) or ())
        return cls(**kw)


@dataclass(frozen=True)
class BisectSpec:
    candidates: tuple[Candidate, ...]
    target: Target
    settings: Settings
    every: bool = False
    max_envs: int | None = None
    compiler_bisect: str = "auto"
    localize: str = "auto"
    source: str = ""  # how the candidates were chosen, in words (the answer says it)
    followup_budget_s: float = 3600.0
    new_verdict: str | None = None

    def env_requirements(self, c: Candidate) -> tuple[str, ...]:
        """The exact requirement set of c's environment: the candidate's, --with, bringup's own (a stored case)."""
        reqs = {normalize(r) for r in (*c.requirements, *self.settings.with_reqs, *self.settings.bringup_deps)}
        return tuple(sorted(reqs))

    def to_json(self) -> dict[str, Any]:
        return {
            "candidates": [c.to_json() for c in self.candidates],
            "target": self.target.to_json(),
            "settings": self.settings.to_json(),
            "every": self.every,
            "max_envs": self.max_envs,
            "compiler_bisect": self.compiler_bisect,
            "localize": self.localize,
            "source": self.source,
            "followup_budget_s": self.followup_budget_s,
            "new_verdict": self.new_verdict,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BisectSpec:
        return cls(
            tuple(Candidate.from_json(c) for c in d["candidates"]),
            Target.from_json(d["target"]),
            Settings.from_json(d["settings"]),
            bool(d.get("every")),
            d.get("max_envs"),
            str(d.get("compiler_bisect", "auto")),
            str(d.get("localize", "auto")),
            str(d.get("source", "")),
            float(d.get("followup_budget_s", 3600.0)),
            d.get("new_verdict"),
        )


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]
