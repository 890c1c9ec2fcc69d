"""--baseline BUNDLE: an exported zoo run (another machine, say a CUDA box) as an index by model name, checked at
planning (a model the bundle lacks, another dtype or step count: bad input, before any work) and cut down to what
each case's worker needs (curves and logits statistics; a full-size case: its per-step series).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.bundle import load_bundle
from bringup.case import CaseResult
from bringup.errors import BadInput


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
        other = sorted(
            {
                f"{r.params.get('dtype')} x {r.params.get('steps')} steps"
                for n in names
                if (r := self.by_name.get(n)) is not None
                and (r.params.get("dtype") != dtype or r.params.get("steps") != steps)
            }
        )
        if missing:
            held = ", ".join(sorted(self.by_name)[:8]) + (" ..." if len(self.by_name) > 8 else "")
            raise BadInput(
                f"--baseline {given}: the bundle has no result for {', '.join(missing[:8])}"
                f"{' ...' if len(missing) > 8 else ''}, so nothing would be compared for it; narrow "
                f"--filter to the bundle's models ({held})"
            )
        if other:
            raise BadInput(
                f"--baseline {given}: the bundle ran {', '.join(other)}, this run {dtype} x {steps} steps: "
                "nothing would be comparable; use the bundle's --dtype and --steps"
            )

    def full_entry_for(self, name: str, params: dict[str, Any], given: str) -> dict[str, Any]:
        """A full-size case's view of the bundle: its per-step series. The bundle must hold the same id at
        full size, same seed, batch, sequence length and weights source (any precision: the tolerance
        comes from both), else BadInput before any work."""
        r = self.by_name.get(name)
        if r is None:
            held = ", ".join(sorted(self.by_name)[:8]) + (" ..." if len(self.by_name) > 8 else "")
            raise BadInput(
                f"--baseline {given}: the bundle has no result for {name}, so nothing would be compared "
                f"for it; narrow --filter to the bundle's models ({held})"
            )
        bp = r.params
        for key in ("size", "seed", "batch", "seq", "weights"):
            if bp.get(key) != params.get(key):
                raise BadInput(
                    f"--baseline {given}: {name} ran {key}={bp.get(key)!r} in the bundle, "
                    f"{params.get(key)!r} here: nothing would be comparable"
                )
        return {
            "path": self.path,
            "device": self.device,
            "found": True,
            "status": r.status.value,
            "dtype": bp.get("dtype"),
            "steps": bp.get("steps"),
            "grad_norms0": r.fields.get("grad_norms0"),
            "series": {k: [v for _, v in s] for k, s in r.series.items()},
        }

    def entry_for(self, name: str, dtype: str, steps: int) -> dict[str, Any]:
        """What the worker needs to compare a model with the bundle (small: curves and statistics)."""
        r = self.by_name.get(name)
        head = {"path": self.path, "device": self.device}
        if r is None:
            return {**head, "found": False}
        f = r.fields
        return {
            **head,
            "found": True,
            "status": r.status.value,
            "dtype": r.params.get("dtype"),
            "steps": r.params.get("steps"),
            "curves": {k: [v for _, v in s] for k, s in r.series.items() if k.startswith("loss.")},
            "logits": f.get("logits"),
        }


def load_baseline(path: str) -> BaselineIndex:

    run, results = load_bundle(path)
    zoo = [r for r in results if r.suite == "zoo"]
    if not zoo:
        raise BadInput(f"--baseline {path}: the bundle has no zoo results (run {run.run_id}: {run.command})")
    return BaselineIndex(str(Path(path).resolve()), run.device, {r.name: r for r in zoo})


def bundle_names(path: str) -> set[str]:

    _, results = load_bundle(path)
    return {r.name for r in results if r.suite == "zoo"}
