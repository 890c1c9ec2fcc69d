"""One zoo case as data: `ZooSpec`, a frozen view of a case's params (tiny or full size), read once in the worker
instead of by key across the files. The params themselves are written by planning (zoo/cases.py, zoo/plan.py,
zoo/sweep.py) exactly as before, so case ids and stored runs stay as they were; the spec reads old and new alike.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from bringup.hub import refs
from bringup.precision import Precision, parse_precision
from bringup.zoo.args import DEFAULT_STEPS, NOISE_SEEDS, TINY_BATCH, TINY_SEQ, UNIFORM_BATCH, UNIFORM_SEQ

SOURCES = ("hf-causal", "hf-all", "timm", "hub-top")


# What a zoo case measures, None until measured (a case that stops early still names every figure).
UNMEASURED: dict[str, Any] = dict.fromkeys(
    ("params", "graph_breaks", "fallback_ops", "max_rel_err", "loss_divergence", "compile_s", "peak_mem_bytes")
)


@dataclass(frozen=True)
class ZooSpec:
    """A zoo case's params. `source`: hf | timm | fn | hf-json | hub | hub-top | hub-sig (a Hub sweep's signature)
    | hub-cfg (a sweep's --full-top id); `size` tiny (judged against float64) or full (zoo/full.py)."""

    source: str
    model: str
    task: str = ""
    dtype: str = "fp32"
    steps: int = DEFAULT_STEPS
    backend: str = "none"
    seed: int = 0
    noise_seeds: int = NOISE_SEEDS
    module_check: bool | None = None  # None: auto (decided on the device, zoo/modules.py)
    baseline: dict[str, Any] | None = None  # what the worker needs of a --baseline bundle (zoo/baseline.py)
    config: dict[str, Any] | None = None  # hub-sig: the signature's tiny config
    # how a text model is fed (bringup/models/batches.py): "text" (ids by rank-frequency, padded and packed
    # microbatches) or "uniform" (the old layout: what a stored run without the key ran)
    inputs: str = "uniform"
    # --size full / --full-top; tiny: 0 is the default (TINY_BATCH rows of TINY_SEQ tokens per microbatch)
    size: str = "tiny"
    batch: int = 0
    seq: int = 0
    weights: str = "random"  # cache (the cached safetensors) | random (seeded init)
    reference: str = "cpu"  # cpu | baseline | none
    nproc: int = 1
    device_memory_gib: float | None = None
    hub_config: dict[str, Any] | None = None  # a sweep's --full-top case carries its config.json

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> ZooSpec:
        """The spec of stored params (keys it does not know are ignored; missing ones take the defaults)."""
        return cls(
            source=str(p["source"]),
            model=str(p["model"]),
            task=str(p.get("task") or ""),
            dtype=str(p.get("dtype", "fp32")),
            steps=int(p.get("steps", DEFAULT_STEPS)),
            backend=str(p.get("backend") or "none"),
            seed=int(p.get("seed", 0)),
            noise_seeds=int(p.get("noise_seeds", NOISE_SEEDS)),
            module_check=p.get("module_check"),
            baseline=p.get("baseline") or None,
            config=p.get("config"),
            inputs=str(p.get("inputs") or "uniform"),
            size=str(p.get("size") or "tiny"),
            batch=int(p.get("batch") or 0),
            seq=int(p.get("seq") or 0),
            weights=str(p.get("weights") or "random"),
            reference=str(p.get("reference") or "cpu"),
            nproc=int(p.get("nproc", 1)),
            device_memory_gib=float(p["device_memory_gib"]) if p.get("device_memory_gib") else None,
            hub_config=p["hub_config"] if isinstance(p.get("hub_config"), dict) else None,
        )

    @classmethod
    def of(cls, p: ZooSpec | dict[str, Any]) -> ZooSpec:
        return p if isinstance(p, ZooSpec) else cls.from_params(p)

    @property
    def prec(self) -> Precision:
        return parse_precision(self.dtype)

    @property
    def rows(self) -> int:
        """Rows per (micro)batch of a tiny case (the old uniform layout ran 2)."""
        return self.batch or (TINY_BATCH if self.inputs == "text" else UNIFORM_BATCH)

    @property
    def tokens(self) -> int:
        """Tokens per row of a tiny case (the old uniform layout ran 16)."""
        return self.seq or (TINY_SEQ if self.inputs == "text" else UNIFORM_SEQ)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def config_data(spec: ZooSpec | dict[str, Any]) -> dict[str, Any]:
    """The config.json of a Hub case: carried in the params (a sweep's --full-top case), the catalogue's, or the
    cache's (resolved now)."""

    s = ZooSpec.of(spec)
    if s.hub_config is not None:
        return dict(s.hub_config)
    if s.source == "hub-top":
        return refs.catalogue_config(s.model)
    ref = refs.parse_ref(s.model, "hub")
    return refs.read_config(refs.resolve(ref), ref.name)


def weights_for(spec: ZooSpec | dict[str, Any]) -> list[str] | None:
    """The cached safetensors of a full-size case that planned `weights: cache` (else None: seeded init)."""

    s = ZooSpec.of(spec)
    if s.weights != "cache":
        return None
    files = refs.weight_files(refs.parse_ref(s.model, "hub"))
    if not files:
        raise RuntimeError(f"{s.model}: the cached safetensors are gone since planning")
    return files
