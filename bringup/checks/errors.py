"""Map an exception raised by device or compiler work to a status, so suites agree on verdicts."""

from __future__ import annotations

import re

from bringup.case import Status

# Messages backends use for "this op / dtype / feature is not implemented here" without raising
# NotImplementedError itself (e.g. `"addmm_impl_cpu_" not implemented for 'Half'`).
_UNSUPPORTED = re.compile(
    r"not implemented for|NotImplementedError|is not supported|not supported on|no kernel|"
    r"does not support|Could not run '.*' with arguments from the '.*' backend",
    re.IGNORECASE,
)
_OOM = re.compile(r"out of memory|OutOfMemoryError|MemoryError|cannot allocate memory", re.IGNORECASE)


def first_line(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text.splitlines() or [""])[0][:limit]


def chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def classify(exc: BaseException, compiling: bool = False) -> Status:
    """unsupported for NotImplementedError (anywhere in the cause chain) and 'not implemented'
    messages; oom for memory errors; fail_compile for anything else raised while compiling;
    otherwise error (our bug or an unknown failure, traceback kept by the caller)."""
    import torch

    excs = chain(exc)
    if any(isinstance(e, (MemoryError, torch.OutOfMemoryError)) for e in excs) or any(
        _OOM.search(str(e)) for e in excs
    ):
        return Status.OOM
    if any(isinstance(e, NotImplementedError) for e in excs) or any(
        _UNSUPPORTED.search(f"{type(e).__name__}: {e}") for e in excs
    ):
        return Status.UNSUPPORTED
    if compiling:
        return Status.FAIL_COMPILE
    return Status.ERROR
