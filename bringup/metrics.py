"""The metric catalogue: one definition per metric (name, unit, higher-is-better, what it means).

`CaseResult.metric(name, value)` records a catalogued metric under its catalogue name and unit (an
older name in `aliases` is recorded under the new one), so CSV, HTML and `compare` read one name per
concept and format by the catalogue's unit instead of guessing. Units: "s", "ms", "B", "tok/s", "FLOP",
"FLOP/s", "TFLOP/s", "%" (0..100), "fraction" (0..1, shown as a percentage), "x" (a ratio), "count", ""
(a dimensionless number such as a relative error).

A suite or an `--import` plugin adds its own metrics with `register_metric` (or through its `Suite`'s
`metrics`, see `bringup.api`). Metrics not in the catalogue are still recorded (with the unit given).
This module sits below `bringup.case` and imports nothing of bringup.
"""

from __future__ import annotations

from dataclasses import dataclass

# Display scale of each unit for the HTML/CSV readers: value * scale, then the suffix.
UNITS: dict[str, tuple[float, str]] = {
    "s": (1.0, "s"), "ms": (1.0, "ms"), "B": (1.0, "B"), "tok/s": (1.0, "tok/s"), "FLOP": (1.0, "FLOP"),
    "FLOP/s": (1.0, "FLOP/s"), "TFLOP/s": (1.0, "TFLOP/s"), "%": (1.0, "%"), "fraction": (100.0, "%"),
    "x": (1.0, "x"), "count": (1.0, ""), "": (1.0, ""),
}  # fmt: skip
# How a recorded unit converts to seconds (durations recorded in other units by older versions).
SECONDS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}


@dataclass(frozen=True)
class MetricSpec:
    """One metric. `higher_is_better`: True / False, or None where neither (a size, a count for the record)."""

    name: str
    unit: str
    higher_is_better: bool | None
    description: str
    aliases: tuple[str, ...] = ()  # names this metric was recorded under before (read, never written)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"metric {self.name!r}: unknown unit {self.unit!r}; units: {', '.join(UNITS)}")

    def display(self, value: float) -> float:
        """The value in the unit it is shown in (a fraction as a percentage)."""
        return value * UNITS[self.unit][0]

    @property
    def display_unit(self) -> str:
        return UNITS[self.unit][1]


def _m(name: str, unit: str, better: bool | None, description: str, aliases: tuple[str, ...] = ()) -> MetricSpec:
    return MetricSpec(name, unit, better, description, aliases)


CORE: tuple[MetricSpec, ...] = (
    # parity (smoke, probe, flex, zoo, ops, train)
    _m("max_abs_err", "", False, "largest absolute error against the float64 reference"),
    _m(
        "max_rel_err",
        "",
        False,
        "largest relative RMS error (RMSE / RMS of the reference) over the compared tensors, against float64",
    ),
    _m(
        "max_abs_over_peak",
        "",
        False,
        "flex: largest absolute error over the reference's largest magnitude (max |err| / max |ref|)",
    ),
    _m("rel_rmse", "", False, "relative RMS error against the float64 reference"),
    _m("rel_rmse_vs_float64", "", False, "probe: relative RMS error of a low-precision path against float64"),
    _m("eager_max_rel_err", "", False, "train: eager on the device against the cpu reference, max rel error"),
    _m(
        "loss_divergence",
        "",
        False,
        "max relative difference of the loss curve from its reference curve "
        "(zoo: device vs cpu; train: compiled vs eager)",
        aliases=("loss_max_rel_dev",),
    ),
    _m("loss", "", False, "final training loss"),
    _m("broken_ties", "count", False, "argmax ties the device broke differently from the reference"),
    # speed (train, flex, profile)
    _m("tokens_per_s", "tok/s", True, "training throughput, all ranks"),
    _m("tokens_per_s_per_device", "tok/s", True, "training throughput per device"),
    _m("mfu", "fraction", True, "model FLOPs utilisation: achieved FLOP/s over the device's peak (0..1)"),
    _m("step_s", "s", False, "steady-state step time (median)"),
    _m("ttfs_s", "s", False, "time to first step, compile included"),
    _m("job_ttfs_s", "s", False, "a new job's time to first step: artifact load + build + mode + step 1"),
    _m("rank_compile_skew_s", "s", False, "slowest minus fastest rank's compile time (--nproc)"),
    _m("first_over_steady", "x", False, "first step time over steady step time"),
    _m("setup_s", "s", False, "model build and placement before the first step"),
    _m("compile_s", "s", False, "compile time (first call)"),
    _m("compile_after_first_s", "s", False, "compile time spent after the first step (recompiles)"),
    _m("fwd_ms", "ms", False, "forward time (median)"),
    _m("bwd_ms", "ms", False, "backward time (median)"),
    _m("tflops", "TFLOP/s", True, "achieved forward TFLOP/s"),
    _m("bwd_tflops", "TFLOP/s", True, "achieved backward TFLOP/s"),
    _m("mask_s", "s", False, "flex: block mask build time"),
    _m("localize_s", "s", False, "localize: wall time to find the first divergent module"),
    _m("busy_s", "s", None, "profile: device busy time per step"),
    _m("idle_s", "s", False, "profile: device idle time per step"),
    _m("host_s", "s", False, "profile: host overhead per step"),
    _m("ops_s", "s", None, "profile: time in ops per step"),
    _m("compiled_s", "s", None, "profile: time in compiled regions per step"),
    _m("unprofiled_step_s", "s", False, "profile: one training step without the profiler (its overhead's baseline)"),
    # size and graph facts
    _m("params", "count", None, "model parameters"),
    _m("embedding_params", "count", None, "embedding parameters"),
    _m("flops_per_token", "FLOP", None, "training FLOPs per token (6N + attention)"),
    _m("peak_flops", "FLOP/s", None, "the device's peak FLOP/s used for MFU"),
    _m("peak_mem_bytes", "B", False, "peak device memory"),
    _m("cache_bytes", "B", None, "compile cache size on disk"),
    _m("graph_breaks", "count", False, "torch.compile graph breaks"),
    _m("recompiles", "count", False, "torch.compile recompilations"),
    _m("graphs", "count", None, "compiled graphs"),
    _m("sparsity", "%", None, "flex: share of attention blocks the mask skips"),
    _m("samples", "count", None, "ops: OpInfo samples checked"),
    _m("fallback_calls", "count", False, "calls that ran through the CPU fallback"),
)


# A suite's metric an older version recorded under a name that means something else in the catalogue:
# (suite, name it was recorded under) -> its catalogue name. Applied where stored results are read
# (bundles, the store), so old results render and compare under the right name; never written.
SUITE_RENAMES: dict[tuple[str, str], str] = {
    # flex recorded max |err| / max |ref| as max_rel_err (a rel_rmse everywhere else) before 2026-12
    ("flex", "max_rel_err"): "max_abs_over_peak",
}


def stored_name(suite: str, name: str) -> str:
    """The catalogue name of a metric `suite` stored as `name` (usually `name` itself)."""
    return SUITE_RENAMES.get((suite, name), name)


def _catalogue() -> dict[str, MetricSpec]:
    return {s.name: s for s in CORE}


# The registry itself (TorchTitan's registered-spec pattern): CORE at import, plugins add to it.
_SPECS: dict[str, MetricSpec] = _catalogue()
_ALIASES: dict[str, str] = {a: s.name for s in CORE for a in s.aliases}


def register_metric(spec: MetricSpec) -> MetricSpec:
    """Add `spec` to the catalogue. The same definition twice is fine; a different one under a taken
    name (or alias) is a ValueError: one definition per metric."""
    old = _SPECS.get(spec.name) or _SPECS.get(_ALIASES.get(spec.name, ""))
    if old is not None and old != spec:
        raise ValueError(f"metric {spec.name!r} is already defined as {old}")
    for a in spec.aliases:
        if a in _SPECS or _ALIASES.get(a, spec.name) != spec.name:
            raise ValueError(f"metric alias {a!r} of {spec.name!r} is already taken")
    _SPECS[spec.name] = spec
    _ALIASES.update({a: spec.name for a in spec.aliases})
    return spec


def metric_spec(name: str) -> MetricSpec | None:
    """The catalogue entry of `name` (or of the metric `name` is an old alias of); None if not catalogued."""
    return _SPECS.get(name) or _SPECS.get(_ALIASES.get(name, ""))


def metric_specs() -> tuple[MetricSpec, ...]:
    return tuple(_SPECS.values())


def specs(*names: str) -> tuple[MetricSpec, ...]:
    """Catalogue entries by name (a KeyError names a metric that isn't catalogued)."""
    out = []
    for n in names:
        s = metric_spec(n)
        if s is None:
            raise KeyError(f"metric {n!r} is not in the catalogue")
        out.append(s)
    return tuple(out)
