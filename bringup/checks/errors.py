"""Map an exception raised by device or compiler work to a status, so suites agree on verdicts.

`unsupported` means the device / backend / build said "this is not implemented or not supported here":
a gap to report, not a crash. Only messages that say that count (tests/checks/test_errors.py holds real
error strings both ways); a generic "needs ...", "is only supported ...", "is not supported" (a bad
argument, a wrong shape) stays an error, so a real bug is never hidden as a gap.
"""

from __future__ import annotations

import re

from bringup.case import Status

# Device words a "not supported on/for <device>" message names. The PrivateUse1 backend's own name is
# added at call time (it is whatever a plugin renamed it to).
_DEVICE_WORDS = (
    "cpu",
    "cuda",
    "xpu",
    "mps",
    "hpu",
    "mtia",
    "meta",
    "xla",
    "lazy",
    "ipu",
    "privateuseone",
    "neuron",
    "npu",
    "device",
    "devices",
    "backend",
    "backends",
    "platform",
    "hardware",
    "gpu",
    "gpus",
)


def _unsupported_re(extra_devices: tuple[str, ...] = ()) -> re.Pattern[str]:
    dev = "|".join(re.escape(w) for w in (*_DEVICE_WORDS, *extra_devices) if w)
    where = rf"(?:the |this |your |a )?(?:[\w.:'\"-]+ )?(?:{dev})\b"
    return re.compile(
        "|".join(
            (
                # ATen dtype dispatch: "addmm_impl_cpu_" not implemented for 'Half'
                r"\bnot implemented for\b",
                # "... is not (yet) implemented / supported on|for (the) (testdev) device|backend|cuda ..."
                rf"\bnot (?:yet |currently )?(?:implemented|supported|available) (?:on|for|with|by) {where}",
                rf"\b(?:does not|doesn't|do not|don't|cannot|can't) (?:yet )?support "
                rf".{{0,120}}?\b(?:on|for|with) {where}",
                # "... only supports per-tensor scaling for CPU backend" (a limit named for a device)
                rf"\bonly supports? .{{0,120}}?\b(?:on|for|with) {where}",
                rf"\b(?:{dev}) (?:type )?(?:[\w'\"]+ )?(?:is |are )?not (?:yet )?supported\b",
                r"\bunsupported (?:device|backend|platform)\b",
                # the dispatcher: no kernel for this backend
                r"Could not run '[^']*' with arguments from the '[^']*' backend",
                r"\bno kernel (?:registered|found|available)\b",
                r"\bNo available kernel\b",  # sdpa: the forced backend has no kernel here
                r"\bNo viable backend\b",
                # the build lacks the feature: "Torch not compiled with CUDA enabled"
                r"\bnot compiled with \w+",
                # a hardware requirement the device does not meet
                r"\brequires (?:a )?(?:CUDA|ROCm|triton|sm_?\d+|(?:CUDA )?compute capability)\b",
            )
        ),
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


def _backend_name() -> str:
    try:
        import torch  # lazy: torch-free for the runner's parent

        return str(torch._C._get_privateuse1_backend_name())
    except Exception:
        return ""


def says_unsupported(text: str) -> bool:
    """True when an error message says "not implemented / not supported on this device / backend"."""
    return bool(_unsupported_re((_backend_name(),)).search(text))


def is_unsupported(exc: BaseException) -> bool:
    """NotImplementedError anywhere in the cause chain, or a message that says not implemented / not
    supported for a device, backend or dtype kernel."""
    excs = chain(exc)
    return any(isinstance(e, NotImplementedError) for e in excs) or any(
        says_unsupported(f"{type(e).__name__}: {e}") for e in excs
    )


def is_oom(exc: BaseException) -> bool:
    import torch  # lazy: torch-free for the runner's parent

    excs = chain(exc)
    return any(isinstance(e, (MemoryError, torch.OutOfMemoryError)) for e in excs) or any(
        _OOM.search(str(e)) for e in excs
    )


def classify(exc: BaseException, compiling: bool = False) -> Status:
    """oom for memory errors; unsupported for NotImplementedError (anywhere in the cause chain) and
    messages that say not implemented / not supported here (module doc); fail_compile for anything
    else raised while compiling; otherwise error (our bug or an unknown failure, traceback kept by
    the caller)."""
    if is_oom(exc):
        return Status.OOM
    if is_unsupported(exc):
        return Status.UNSUPPORTED
    if compiling:
        return Status.FAIL_COMPILE
    return Status.ERROR


# A compile artifact damaged on disk (a compiler killed while writing it in place, then trusted from the
# cache): what the dynamic loader, the linker or the compiler says when it meets one. Such a failure says
# nothing about the device: the runner re-runs the case clean (bringup/runner/compile_cache.py).
_DAMAGED_ARTIFACT = re.compile(
    r"file too short"  # dlopen of an empty or cut-off library; ld on a cut-off object
    r"|cannot read file data"  # dlopen of a library cut off inside its headers
    r"|invalid ELF header"
    r"|ELF load command past end of file"
    r"|ELF load command address/offset not (?:properly |page-)aligned"
    r"|ELF file's phentsize not the expected size"
    r"|file truncated"  # ld: "x.o: file not recognized: file truncated"
    r"|\.o: file not recognized"  # ld on an object of zeros (a writer that sized the file, then was killed)
    r"|too short to be a PCH file|while reading precompiled header",
    re.IGNORECASE,
)
# A cut-off pickle counts only where a compile cache read it (anywhere else it is some other bug).
_TRUNCATED_PICKLE = re.compile(r"pickle data was truncated|EOFError: Ran out of input", re.IGNORECASE)
_CACHE_CODE = re.compile(r"codecache|autograd_cache|_inductor[/\\]runtime[/\\]|triton[/\\]runtime[/\\]cache")
_ARTIFACT_PATH = re.compile(r"(/[^\s'\":;,()]+?\.(?:so|o|gch))(?!\w|\.\w)")


def damaged_artifact(text: str) -> str | None:
    """The phrase in an error (first line, traceback or log tail) that shows a damaged compile artifact
    (an empty or truncated kernel library, object file or precompiled header; a cut-off pickle read by a
    compile cache), or None."""
    if m := _DAMAGED_ARTIFACT.search(text):
        return m.group(0)
    if (m := _TRUNCATED_PICKLE.search(text)) and _CACHE_CODE.search(text):
        return m.group(0)
    return None


def artifact_paths(text: str) -> list[str]:
    """Absolute paths of compiler outputs (.so, .o, .gch) an error names, in order, each once."""
    return list(dict.fromkeys(_ARTIFACT_PATH.findall(text)))
