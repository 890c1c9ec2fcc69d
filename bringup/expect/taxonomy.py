"""The fixed reason taxonomy of an expected failure, and the default reason a status maps to.

A team files each known failure under one of these, so a CI dashboard can count them (Intel's
torch-xpu-ops and Ascend's torch_npu keep such fixed lists too). The list is closed: a file with any
other reason is refused (exit 2).
"""

from __future__ import annotations

import re

from bringup.case import CaseResult, Status

REASONS: tuple[str, ...] = (
    "numeric",  # parity / loss curve out of tolerance
    "compile",  # the compiler raised, or the compiled path ran eager
    "budget",  # compile or run over its time budget
    "fallback",  # ran only through the backend's CPU fallback
    "unsupported-feature",  # the backend said NotImplementedError
    "dtype",  # a dtype the device lacks (bf16, fp8, ...)
    "memory",  # out of memory
    "distributed",  # process groups, collectives, FSDP
    "config",  # the model / case could not be built (not the device's fault)
    "other",  # anything else: crashes, bringup's own bugs
)

_BY_STATUS: dict[Status, str] = {
    Status.FAIL_NUMERIC: "numeric",
    Status.FAIL_COMPILE: "compile",
    Status.SILENT_EAGER: "compile",
    Status.BUDGET: "budget",
    Status.FALLBACK: "fallback",
    Status.UNSUPPORTED: "unsupported-feature",
    Status.OOM: "memory",
    Status.CRASH: "other",
    Status.ERROR: "other",
    Status.REF_FAIL: "other",
}
_DTYPE = re.compile(r"\b(bfloat16|bf16|float16|fp16|half|float8\w*|fp8|mxfp8|dtype)\b", re.I)
_DIST = re.compile(r"\b(distributed|process group|nccl|gloo|xccl|hccl|fsdp\w*|all_reduce|collective)\b", re.I)


def default_reason(r: CaseResult) -> str:
    """The category a fresh entry gets from a result (`expect init`, `--update-expect`): the reason
    text names a dtype / distributed problem or a config failure first, else the status decides."""
    if r.status is Status.PASS:
        return ""
    text = f"{r.reason} {r.suite} {r.name}"
    if r.status is Status.REF_FAIL and r.reason.startswith("config"):
        return "config"
    nproc = r.params.get("nproc", 1)
    if r.status is not Status.FAIL_NUMERIC and (_DIST.search(text) or (isinstance(nproc, int) and nproc > 1)):
        return "distributed"
    if r.status in (Status.UNSUPPORTED, Status.FAIL_COMPILE, Status.ERROR) and _DTYPE.search(r.reason):
        return "dtype"
    return _BY_STATUS.get(r.status, "other")
