"""FlexSpec: everything one flex case needs, as plain data. The planner builds it (from a matrix entry and
the command line), validates it once, and ships `spec.params()` as the Case's params; the worker reads
it back with `FlexSpec.from_params(case.params)`. The params are the spec's own serialization
(dataclasses.asdict), with the optional fields left out at their defaults so that case ids stay those
of runs stored before this module existed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from bringup.flex.mods import AttnShape

if TYPE_CHECKING:  # torch-free at import: the planner (bringup/flex/suite.py) imports this module
    from bringup.flex.mods import AttnShape

# The precisions a flex case runs in (bringup.precision names).
DTYPES = ("fp32", "bf16", "fp16", "amp-bf16", "amp-fp16")
# Optional fields: left out of params() at these defaults (runs before them had no such key).
_OPTIONAL: dict[str, Any] = {"probe": False, "recompile_limit": None, "dynamo_reset": True}


class SpecError(ValueError):
    """A FlexSpec that cannot be a case (the planner has already turned user input into BadInput)."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class FlexSpec:
    mod: str  # a builtin mod name or a user mod "path.py:factory" / "module:factory"
    batch: int
    seq: int
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype: str  # one of DTYPES
    backward: bool
    compile_budget_s: float  # compile + first call, under ctx.phase("compile")
    backend: str = "inductor"  # the torch.compile backend
    probe: bool = False  # the extra backward probe of --backward auto on a device without flex backward
    recompile_limit: int | None = None  # hidden --recompile-limit
    dynamo_reset: bool = True  # hidden --no-dynamo-reset: False

    def __post_init__(self) -> None:
        if not isinstance(self.mod, str) or not self.mod:
            raise SpecError(f"flex case: mod must be a non-empty string, got {self.mod!r}")
        for k in ("batch", "seq", "q_heads", "kv_heads", "head_dim"):
            v = getattr(self, k)
            if not _is_int(v) or v < 1:
                raise SpecError(f"flex case: {k} must be a positive integer, got {v!r}")
        if self.dtype not in DTYPES:
            raise SpecError(f"flex case: dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        for k in ("backward", "probe", "dynamo_reset"):
            if not isinstance(getattr(self, k), bool):
                raise SpecError(f"flex case: {k} must be true or false, got {getattr(self, k)!r}")
        b = self.compile_budget_s
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not b > 0:
            raise SpecError(f"flex case: compile_budget_s must be a positive number, got {b!r}")
        if not isinstance(self.backend, str) or not self.backend:
            raise SpecError(f"flex case: backend must be a non-empty string, got {self.backend!r}")
        if self.recompile_limit is not None and (not _is_int(self.recompile_limit) or self.recompile_limit < 1):
            raise SpecError(f"flex case: recompile_limit must be an integer >= 1, got {self.recompile_limit!r}")

    @property
    def shape(self) -> AttnShape:
        return AttnShape(self.batch, self.seq, self.q_heads, self.kv_heads, self.head_dim)

    def params(self) -> dict[str, Any]:
        """The Case's params: asdict, without the optional fields at their defaults."""
        d = asdict(self)
        for k, default in _OPTIONAL.items():
            if d[k] == default:
                d.pop(k)
        return d

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> FlexSpec:
        """The spec a Case's params serialize (SpecError for a missing or bad field). Keys that are no
        field are ignored, as the worker always did."""
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in params.items() if k in known})
        except TypeError as e:  # a required field is missing
            raise SpecError(f"flex case: {e}") from None
