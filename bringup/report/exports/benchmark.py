"""`bringup export --format benchmark-records`: the run's figures as PyTorch's benchmark database records (the
`oss_ci_benchmark_v3` record that HUD's dashboards read and alert on; the format: the PyTorch wiki page
"How to integrate with PyTorch OSS benchmark database", the table: pytorch/test-infra
clickhouse_db_schema/oss_ci_benchmark_v3/schema.sql).

One record per figure (a JSON list), each:

    benchmark  {name: "bringup train" | "bringup zoo" | "bringup flex", mode: "training" | "inference",
                dtype: the case's precision, extra_info: {device, arch, use_compile, compile_backend, ...}}
    model      {name, type: "bringup <suite>", backend: eager | the compile backend, origins: ["bringup"],
                extra_info: {case, case_id, status, run_id}}
    metric     {name, benchmark_values: [value], extra_info: {unit, higher_is_better}}
    runners    [{name: device type, type: the device's name, gpu_info | cpu_info, gpu_count, cpu_count,
                 extra_info: {device, host, torch, torch_git, bringup, bringup_git, python, plugins, <library>}}]
    dependencies {torch: {repo: pytorch/pytorch, sha, version}, bringup: {version, sha}}

Metrics: tokens_per_second, mfu_percent, time_to_first_step_s (in the worker) and job_time_to_first_step_s (as a
new job), step_time_s, compilation_latency_s, peak_memory_gb, tflops, fwd_latency_ms. Only cases that ran and
were measured (`pass`, `fallback`): a failed case's figures describe no working configuration. Every extra_info
is a string map (the table's Map(String, String)). The upload fields (timestamp, repo, head_sha, workflow_id,
...) are the uploader's, not in the records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from bringup.case import CaseResult, Status
from bringup.errors import BadInput
from bringup.store import RunInfo

MEASURED = (Status.PASS, Status.FALLBACK)
# (record metric name, the case's metric names in order of preference, factor, unit, higher is better)
METRICS: tuple[tuple[str, tuple[str, ...], float, str, bool], ...] = (
    ("tokens_per_second", ("tokens_per_s",), 1.0, "tok/s", True),
    ("mfu_percent", ("mfu",), 100.0, "%", True),
    ("time_to_first_step_s", ("ttfs_s",), 1.0, "s", False),
    ("job_time_to_first_step_s", ("job_ttfs_s",), 1.0, "s", False),
    ("step_time_s", ("step_s",), 1.0, "s", False),
    ("compilation_latency_s", ("compile_s",), 1.0, "s", False),
    ("peak_memory_gb", ("peak_mem_bytes",), 1e-9, "GB", False),
    ("tflops", ("tflops",), 1.0, "TFLOP/s", True),
    ("fwd_latency_ms", ("fwd_ms",), 1.0, "ms", False),
)
INFERENCE_SUITES = ("flex",)  # a forward (and, with --backward, backward) of one op: not a training step


def _value(r: CaseResult, names: Sequence[str]) -> float | None:
    for n in names:
        v = r.value(n)
        if v is not None and not isinstance(v, bool) and math.isfinite(float(v)):
            return float(v)
    if "compile_s" in names:  # train records its compile as phases (compile_dynamo_s, compile_aot_s, ...)
        phases = [
            m.value
            for k, m in r.metrics.items()
            if k.startswith("compile_")
            and k.endswith("_s")
            and "total" not in k
            and "after" not in k
            and m.value is not None
        ]
        if phases:
            return float(sum(phases))
    return None


def _s(v: Any) -> str:
    return "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def runner(run: RunInfo) -> dict[str, Any]:
    """The machine, as the table's runners tuple: the device, the torch and backend versions in extra_info."""
    info = run.info or {}
    build, versions = info.get("build") or {}, info.get("versions") or {}
    kind = run.device.split(":")[0]
    extra = {
        "device": run.device,
        "host": run.host,
        "torch": run.torch_version,
        "torch_git": build.get("torch_git"),
        "bringup": run.bringup_version,
        "bringup_git": build.get("bringup_git"),
        "python": build.get("python"),
        "plugins": ",".join(str(m) for m in info.get("imports") or []),
        **{str(k): v for k, v in versions.items()},
    }
    out: dict[str, Any] = {"name": kind, "type": run.device_name or kind}
    if kind == "cpu":
        out |= {"cpu_info": run.device_name, "cpu_count": 1}
    else:
        out |= {"gpu_info": run.device_name or kind, "gpu_count": 1}
    out["extra_info"] = {k: _s(v) for k, v in extra.items() if v not in (None, "")}
    return out


def _dependencies(run: RunInfo) -> dict[str, Any]:
    build = (run.info or {}).get("build") or {}
    return {
        "torch": {
            "repo": "pytorch/pytorch",
            "branch": "",
            "sha": _s(build.get("torch_git")),
            "version": run.torch_version,
            "extra_info": {},
        },
        "bringup": {
            "repo": "",
            "branch": "",
            "sha": _s(build.get("bringup_git")),
            "version": run.bringup_version,
            "extra_info": {},
        },
    }


def records(run: RunInfo, results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """Every figure of the run's measured cases as one record each (BadInput: the run measured none)."""
    machine, deps = runner(run), _dependencies(run)
    out: list[dict[str, Any]] = []
    for r in results:
        if r.status not in MEASURED:
            continue
        p = {**r.fields, **r.params}
        mode = p.get("mode")
        compiled = mode not in (None, "eager") if r.suite == "train" else bool(p.get("backend"))
        backend = str(p.get("backend") or "") if compiled else "eager"
        bench_extra = {
            "device": run.device,
            "arch": run.device_name,
            "use_compile": compiled,
            "compile_backend": backend if compiled else "",
            "compile_mode": mode,
            "cache": p.get("cache"),
            "batch": p.get("batch"),
            "seq": p.get("seq"),
            "steps": p.get("steps"),
            "run_id": run.run_id,
            "command": run.command,
        }
        evidence = {"case": r.name, "case_id": r.case_id, "status": r.status.value, "run_id": run.run_id}
        model = {
            "name": str(p.get("model") or p.get("mod") or r.name),
            "type": f"bringup {r.suite}",
            "backend": backend,
            "origins": ["bringup"],
            "extra_info": evidence,
        }
        bench = {
            "name": f"bringup {r.suite}",
            "mode": "inference" if r.suite in INFERENCE_SUITES else "training",
            "dtype": str(p.get("dtype") or ""),
            "extra_info": {k: _s(v) for k, v in bench_extra.items() if v not in (None, "")},
        }
        for name, keys, factor, unit, higher in METRICS:
            v = _value(r, keys)
            if v is None:
                continue
            metric = {
                "name": name,
                "benchmark_values": [v * factor],
                "extra_info": {"unit": unit, "higher_is_better": _s(higher)},
            }
            out.append(
                {"benchmark": bench, "model": model, "metric": metric, "runners": [machine], "dependencies": deps}
            )
    if not out:
        raise BadInput(f"run {run.run_id} has no measured figure to export (no passing train, zoo or flex case)")
    return out
