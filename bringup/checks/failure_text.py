"""What a failure's text says, normalised so that one cause reads the same everywhere: pure functions over the
strings a run stores (an exception's message, a Python traceback, dynamo's graph-break reason, a dead worker's
log tail). No torch import.

- `normalize(text)`: names and numbers stripped (paths, addresses, quoted names and values, numbered temporaries,
  shapes), aten op names and backquoted code kept (they name the cause: `aten::silu`, whatever the node or buffer
  was called; dynamo's `print`, `Tensor.item()`).
- `parse_traceback(text)`: the root exception (type and first line of its message; a wrapper such as dynamo's
  `BackendCompilerFailed: backend='x' raised:` gives way to the exception it wraps) and the frames of its block,
  innermost last, each as (relative module path, function): `torch/_inductor/lowering.py`, not the machine's
  site-packages path; no line numbers (they move between releases).
- `phase_of(frame)`: the compiler phase of a frame inside torch (dynamo trace, aot autograd, inductor lowering,
  codegen, the C++ / Triton compile, ...).
- `native_frame(text)`: the last native frame a crash log names (a C++ stack's frame #0, a glibc backtrace line),
  else the innermost Python frame faulthandler printed.

Each is stable across runs, machines and (as far as the text allows) torch releases: `tests/checks/
test_failure_text.py` holds real strings.
"""

from __future__ import annotations

import pkgutil
import re
from dataclasses import dataclass

import bringup

# aten op references in any spelling: aten.silu.default, aten::silu, torch.ops.aten.add.Tensor, aten._softmax
_ATEN = re.compile(r"\b(?:torch\.ops\.)?aten(?:::|\.)([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?|(?:\.{1,2}/)[\w./@+-]+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_QUOTED = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"")  # values and user names; `code` (dynamo's) is kept
_NUMBER = re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_DIGITS_IN_NAME = re.compile(r"(?<=[A-Za-z_])\d+")
_SUFFIX = re.compile(r"(?<=[A-Za-z])_N\b")
_SPACES = re.compile(r"\s+")
_OP_MARK = "\ue000{}\ue001"  # private-use marks around a letter index: no digit, no quote, no path


def _mark(i: int) -> str:
    return _OP_MARK.format("".join(chr(ord("a") + int(d)) for d in str(i)))


def _keep_ops(text: str) -> tuple[str, list[str]]:
    ops: list[str] = []

    def sub(m: re.Match[str]) -> str:
        over = m.group(2)
        name = f"aten::{m.group(1)}" + (f".{over}" if over and over != "default" else "")
        ops.append(name)
        return _mark(len(ops) - 1)

    return _ATEN.sub(sub, text), ops


_QUOTED_LIST = re.compile(r"\[(?:\s*(?:'[^'\n]*'|\"[^\"\n]*\")\s*,?)+\]")
_CODE_NAME = re.compile(r"[A-Za-z_][A-Za-z_:.]{0,39}")


def _quoted(m: re.Match[str]) -> str:
    """A quoted word that names code is kept ('histogram_cpu', 'Int', an op); a value, a path, a generated or a
    numbered name ('tmp5', 'primals_1', 'L_x_', '[2, 16]') becomes <name>."""
    inner = m.group(0)[1:-1]
    keep = "\ue000" in inner or (_CODE_NAME.fullmatch(inner) is not None and not inner.startswith(("L_", "l_")))
    return m.group(0) if keep else "<name>"


def normalize(text: str, limit: int = 200) -> str:
    """`text`'s first line with names and numbers stripped, aten op names kept:
    "no lowering for aten.silu.default on testdev (node silu_3)" -> "no lowering for aten::silu on testdev (node silu)";
    "'tmp5' was not declared in this scope" -> "<name> was not declared in this scope"."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line, ops = _keep_ops(line)
    line = _PATH.sub("<path>", line)
    line = _HEX.sub("<addr>", line)
    line = _QUOTED_LIST.sub("[<names>]", line)  # argument types, key lists: values, whatever their words
    line = _QUOTED.sub(_quoted, line)
    line = _DIGITS_IN_NAME.sub("N", line)
    line = _NUMBER.sub("N", line)
    line = _SUFFIX.sub("", line)
    line = re.sub(r"\[(?:N,\s*)*N\]", "[N]", line)  # shapes and index lists: [2, 16, 128] -> [N]
    line = re.sub(r"\((?:N,\s*)+N?\)", "(N)", line)
    for i, op in enumerate(ops):
        line = line.replace(_mark(i), op)
    return _SPACES.sub(" ", line).strip()[:limit]


def normalize_break(reason: str, limit: int = 200) -> str:
    """A graph-break reason (bringup/checks/graphs.py keeps dynamo's headline and its Explanation line), normalised:
    the user's names, values and line numbers stripped, dynamo's words kept."""
    return normalize(reason, limit)


@dataclass(frozen=True)
class Frame:
    path: str  # "torch/_inductor/lowering.py", or the file's name outside a package we know ("lowering_gap.py")
    function: str

    @property
    def in_torch(self) -> bool:
        return self.path.startswith(("torch/", "functorch/", "torchgen/"))

    def __str__(self) -> str:
        return f"{self.path}:{self.function}"


@dataclass(frozen=True)
class ParsedTraceback:
    exc_type: str  # the root exception's class name, without its module ("LoweringError")
    message: str  # its message's first line, as written
    frames: tuple[Frame, ...]  # the root block's frames, innermost last

    @property
    def torch_frame(self) -> Frame | None:
        """The innermost frame inside torch."""
        return next((f for f in reversed(self.frames) if f.in_torch), None)

    @property
    def raised_outside_torch(self) -> Frame | None:
        """The raising frame when it lies outside torch and bringup (a plugin's compiler), else None."""
        last = self.frames[-1] if self.frames else None
        if last is None or last.in_torch or last.path.startswith("bringup/"):
            return None
        return last


_FILE_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+, in (?P<fn>\S+)')
_EXC_LINE = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s?(?P<msg>.*))?$")
_WRAPPERS = ("BackendCompilerFailed", "InternalTorchDynamoError", "InductorError", "TorchRuntimeError")
_BLOCK = "Traceback (most recent call last):"


_ROOTS = ("torch", "functorch", "torchgen", "transformers", "timm", "torch_xla")


def _bringup_modules() -> frozenset[str]:

    return frozenset(m.name for m in pkgutil.iter_modules(bringup.__path__))


def relative_path(file: str) -> str:
    """A source file as a module path that is the same on every machine: the part after the last site-packages/,
    else from a package root we know (`torch/`, `transformers/`, ...; `bringup/` followed by one of its own
    modules: a checkout folder that happens to be called bringup is not the package), else the file's name."""
    file = file.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in file:
            return file.rsplit(marker, 1)[1]
    for root in _ROOTS:
        m = re.search(rf"(?:^|/)({root}/.*)$", file)
        if m:
            return m.group(1)
    mods = _bringup_modules()
    parts = file.split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "bringup" and parts[i + 1].removesuffix(".py") in mods:
            return "/".join(parts[i:])
    return parts[-1]


def _blocks(text: str) -> list[list[str]]:
    """The traceback blocks of `text` (a chained exception prints the cause first), each as its lines."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.strip() == _BLOCK]
    return [lines[a : (starts[k + 1] if k + 1 < len(starts) else len(lines))] for k, a in enumerate(starts)]


def _exception(lines: list[str]) -> tuple[str, str] | None:
    """The exception a block ends with: (type, message first line), a wrapper unwrapped."""
    after = [ln for ln in lines if ln and not ln.startswith((" ", "\t"))]
    for i, ln in enumerate(after):
        m = _EXC_LINE.match(ln.strip())
        if m is None or ln.strip() == _BLOCK:
            continue
        etype, msg = m.group("type").rsplit(".", 1)[-1], (m.group("msg") or "").strip()
        if etype in _WRAPPERS:
            inner = msg.partition(" raised:")[2].strip() if " raised:" in msg else msg
            if not inner and i + 1 < len(after):
                inner = after[i + 1].strip()
            wrapped = _EXC_LINE.match(inner) if inner else None
            if wrapped is not None and wrapped.group("msg") is not None:
                return wrapped.group("type").rsplit(".", 1)[-1], (wrapped.group("msg") or "").strip()
        return etype, msg
    return None


def parse_traceback(text: str) -> ParsedTraceback | None:
    """The root cause of a formatted traceback (`traceback.format_exc()`), None when `text` holds none."""
    blocks = _blocks(text)
    if not blocks:
        return None
    root = blocks[0]
    frames = []
    for ln in root:
        m = _FILE_LINE.match(ln)
        if m:
            frames.append(Frame(relative_path(m.group("file")), m.group("fn")))
    exc = _exception(root[1:]) or _exception(blocks[-1][1:])
    if exc is None:
        return None
    return ParsedTraceback(exc[0], exc[1], tuple(frames))


# (path prefix inside torch, phase): the first that matches the innermost torch frame names the phase
PHASES: tuple[tuple[str, str], ...] = (
    ("torch/_dynamo/output_graph.py", "backend compile (called by dynamo)"),
    ("torch/_dynamo/backends/", "backend compile (called by dynamo)"),
    ("torch/_dynamo/repro/", "backend compile (called by dynamo)"),
    ("torch/__init__.py", "backend compile (called by dynamo)"),
    ("torch/_dynamo/", "dynamo trace"),
    ("torch/_functorch/", "aot autograd"),
    ("torch/_subclasses/", "fake tensor propagation"),
    ("torch/_meta_registrations.py", "fake tensor propagation"),
    ("torch/_prims", "decompositions"),
    ("torch/_refs/", "decompositions"),
    ("torch/_decomp/", "decompositions"),
    ("torch/_inductor/fx_passes/", "inductor graph passes"),
    ("torch/_inductor/pattern_matcher.py", "inductor graph passes"),
    ("torch/_inductor/lowering.py", "inductor lowering"),
    ("torch/_inductor/graph.py", "inductor lowering"),
    ("torch/_inductor/ir.py", "inductor lowering"),
    ("torch/_inductor/codegen/", "inductor codegen"),
    ("torch/_inductor/scheduler.py", "inductor codegen"),
    ("torch/_inductor/codecache.py", "inductor kernel compile"),
    ("torch/_inductor/cpp_builder.py", "inductor kernel compile"),
    ("torch/_inductor/async_compile.py", "inductor kernel compile"),
    ("torch/_inductor/runtime/", "inductor kernel compile"),
    ("torch/_inductor/", "inductor"),
    ("torch/fx/", "fx"),
    ("torch/autograd/", "eager (autograd)"),
    ("torch/nn/", "eager (nn)"),
    ("torch/", "eager"),
)


def phase_of(frame: Frame | None) -> str:
    """The compiler phase a frame inside torch belongs to ("" for none)."""
    if frame is None:
        return ""
    return next((phase for prefix, phase in PHASES if frame.path.startswith(prefix)), "")


_CPP_FRAME = re.compile(r"^\s*frame #0:\s*(?P<what>.+?)(?:\s+\+\s+0x[0-9a-f]+)?(?:\s+\(.*\))?\s*$")
_GLIBC_FRAME = re.compile(
    r"^\s*(?:\d+\s+)?(?:[^\s(]*/)?(?P<lib>[\w.+-]+\.so[\w.]*)\((?P<sym>[^)+]*)(?:\+0x[0-9a-f]+)?\)"
)
_PY_FAULT = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+ in (?P<fn>\S+)')


def native_frame(text: str) -> str:
    """The last native frame a dead worker's log names: a C++ stack's `frame #0`, else the innermost entry of a
    glibc backtrace, else the innermost Python frame of faulthandler's dump (prefixed `python:`); "" if none."""
    lines = text.splitlines()
    for ln in reversed(lines):
        m = _CPP_FRAME.match(ln)
        if m and ln.lstrip().startswith("frame #0:"):
            return _HEX.sub("<addr>", m.group("what")).strip()[:160]
    for ln in lines:
        m = _GLIBC_FRAME.match(ln)
        if m and m.group("sym"):
            return f"{m.group('lib')}:{m.group('sym')[:120]}"
    for ln in lines:  # faulthandler prints the innermost frame first ("most recent call first")
        m = _PY_FAULT.match(ln)
        if m:
            return f"python: {relative_path(m.group('file'))}:{m.group('fn')}"
    return ""


_SIGNAL = re.compile(r"\b(SIG[A-Z]+|signal \d+)\b")


def signal_of(reason: str) -> str:
    """The signal a crash reason names ("worker killed by SIGSEGV" -> "SIGSEGV"), else the exit it names."""
    m = _SIGNAL.search(reason)
    if m:
        return m.group(1)
    m = re.search(r"exited with code (-?\d+)", reason)
    return f"exit {m.group(1)}" if m else normalize(reason, 80)


_LABEL = re.compile(r"^(?:eager|compiled|baseline|reference|config|budget|start-up)[^:]{0,40}:\s*")


def after_label(reason: str) -> str:
    """A case's reason without the label a suite puts first ("compiled: ", "eager: ")."""
    return _LABEL.sub("", reason.strip(), count=1)


def exception_parts(error: str, reason: str = "") -> dict[str, str]:
    """The root exception's type, its message (normalised), the frame that raised it (the plugin's own when the
    raise is outside torch, else the innermost inside torch), the innermost torch frame and its compiler phase,
    from a traceback (`error`), else from a one-line reason ("Type: message")."""
    tb = parse_traceback(error or "")
    if tb is not None:
        tf = tb.torch_frame
        frame = tb.raised_outside_torch or tf
        return {
            "exception": tb.exc_type,
            "phase": phase_of(tf),
            "frame": str(frame) if frame else "",
            "torch_frame": str(tf) if tf else "",
            "message": normalize(tb.message),
        }
    text = after_label(reason)
    head, sep, msg = text.partition(": ")
    is_type = bool(sep) and re.fullmatch(r"[A-Za-z_][\w.]*", head) is not None
    return {
        "exception": head.rsplit(".", 1)[-1] if is_type else "",
        "phase": "",
        "frame": "",
        "torch_frame": "",
        "message": normalize(msg if is_type else text),
    }


def exception_key(parts: dict[str, str]) -> str:
    """The identity of an exception: "LoweringError | aot autograd | lowering_gap.py:lower | no lowering for ..."."""
    return " | ".join(parts.get(k, "") for k in ("exception", "phase", "frame", "message"))


_SIGNATURE_LINE = re.compile(r"^signature:\s*(.+?)\s*$")


def output_signature(out: str) -> str:
    """What a repro's output says its failure is: the last `signature: TEXT` line it printed, else the exception
    key of the traceback it printed, else ""."""
    for line in reversed(out.splitlines()):
        m = _SIGNATURE_LINE.match(line)
        if m:
            return m.group(1)
    if parse_traceback(out) is None:
        return ""
    return exception_key(exception_parts(out))
