"""TrainSpec: everything one train case needs, as plain data (Case.params round-trips through it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from bringup.case import make_case_id

CACHE_NONE, CACHE_COLD, CACHE_WARM, CACHE_ARTIFACT = "none", "cold", "warm", "artifact"
# Fields that say where caches come from or go, not what is compiled: left out of every key.
_WHERE = ("artifact", "save_artifact")
# torch.compile(dynamic=...) per --dynamic setting: auto = torch's default (static first, then automatic
# dynamic shapes on the first recompile for a new size), on = symbolic shapes from the start, off = a
# graph per shape.
DYNAMIC = {"auto": None, "on": True, "off": False}
# Fields added after runs were stored: left out of params() at their default, so those case ids stay.
_LATER: dict[str, Any] = {"dynamic": "auto", "seqs": []}


@dataclass(frozen=True)
class TrainSpec:
    model: str = "qwen3-tiny"
    overrides: tuple[str, ...] = ()
    mode: str = "eager"  # eager | compile | regional (bringup.models.lm.MODES) | nested | aot (train/arms.py)
    cache: str = CACHE_NONE  # none (eager) | cold | warm | artifact
    steps: int = 10  # measured steps, step 1 included
    warmup: int = 2  # steps left out of the steady median (step 1 always is)
    batch: int = 4  # per rank
    seq: int = 256
    dtype: str = "fp32"
    backend: str = "inductor"
    nproc: int = 1
    lr: float = 1e-3
    seed: int = 0
    compile_budget_s: float | None = None  # budget of the first step (compile) phase
    loss_rtol: float | None = None  # overrides the loss band of numerics.LOSS_BANDS
    artifact: str = ""  # cache artifact: a user's file to load (--load-cache-artifact)
    save_artifact: str = ""  # where the cold case also writes its artifact (--save-cache-artifact)
    dynamic: str = "auto"  # compiled modes: auto | on | off (DYNAMIC)
    seqs: tuple[int, ...] = ()  # sequence lengths cycled over the steps (seq = their max); (): seq every step

    @property
    def compiled(self) -> bool:
        return self.mode != "eager"

    @property
    def name(self) -> str:
        """The arm: mode-cache, and the dynamic-shape setting when it is not torch's default."""
        return (self.mode if self.cache == CACHE_NONE else f"{self.mode}-{self.cache}") + self.dynamic_suffix

    @property
    def dynamic_suffix(self) -> str:
        """'-dynamic-on' / '-dynamic-off' for a compiled case off torch's default, else ''."""
        return f"-dynamic-{self.dynamic}" if self.compiled and self.dynamic != "auto" else ""

    @property
    def compile_dynamic(self) -> bool | None:
        """`torch.compile(dynamic=...)` for this case."""
        return DYNAMIC[self.dynamic]

    def seq_at(self, step: int) -> int:
        """The sequence length of step `step` (1-based): the schedule's, cycled, else `seq`."""
        return self.seqs[(step - 1) % len(self.seqs)] if self.seqs else self.seq

    @property
    def tokens_per_step(self) -> int:
        """Tokens of one optimizer step over all ranks (the longest step with a schedule: see tokens_at)."""
        return self.batch * self.seq * self.nproc

    def tokens_at(self, step: int) -> int:
        """Tokens of optimizer step `step` (1-based) over all ranks."""
        return self.batch * self.seq_at(step) * self.nproc

    def params(self) -> dict[str, Any]:
        d = asdict(self)
        d["overrides"] = list(self.overrides)
        d["seqs"] = list(self.seqs)
        for k in _WHERE:  # unset: left out, so case ids stay those of runs before these fields
            if not d[k]:
                d.pop(k)
        for k, default in _LATER.items():
            if d[k] == default:
                d.pop(k)
        return d

    @classmethod
    def from_params(cls, d: dict[str, Any]) -> TrainSpec:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["overrides"] = tuple(kw.get("overrides", ()))
        kw["seqs"] = tuple(kw.get("seqs", ()))
        return cls(**kw)

    def with_(self, **kw: Any) -> TrainSpec:
        return replace(self, **kw)

    def key(self, *drop: str) -> str:
        """A stable hash of the spec without the named fields: the eager reference of a compiled case
        is `key("mode", "cache", "backend", ...)`, its cache directory `key("cache", ...)`."""
        p = self.params()
        for k in drop:
            p.pop(k, None)
        return make_case_id("train", p)

    @property
    def reference_key(self) -> str:
        """Cases that must produce the same loss curve (same model, data, optimizer) share this."""
        return self.key("mode", "cache", "backend", "compile_budget_s", "loss_rtol", "warmup", "dynamic", *_WHERE)

    @property
    def cache_key(self) -> str:
        """A cold case and its warm rerun share this (same graphs to compile)."""
        return self.key("cache", "compile_budget_s", "loss_rtol", "warmup", "steps", *_WHERE)
