"""Files in, findings out: walk the given paths, run the codemod on each module, write fixes safely.

Writes are atomic (temp file in the same directory + rename, mode kept), only to regular files that
are not symlinks and whose real path lies inside the real path of the PATH they were found under.
A file that doesn't parse is reported (BU000) and left byte-identical.
"""

from __future__ import annotations

import difflib
import io
import os
import stat
import tokenize
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from bringup.errors import BadInput
from bringup.files import atomic_write_bytes
from bringup.port.codemod import may_have_findings, run_module
from bringup.port.rules import CODES, PARSE_ERROR, rule

_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages"}


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    col: int
    code: str
    message: str
    fixable: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "message": self.message,
            "fixable": self.fixable,
        }

    def line_text(self) -> str:
        return (
            f"{self.file}:{self.line}:{self.col} {self.code} {self.message} [{'fixable' if self.fixable else 'manual'}]"
        )


@dataclass
class PortReport:
    """What a scan (or a fix) found. `findings` describe the files as they are when the command ends."""

    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    parse_errors: int = 0
    fixed: int = 0  # constructs rewritten (or, with --diff, that would be)
    files_changed: int = 0
    not_written: list[str] = field(default_factory=list)  # "path: why" for fixes that could not be written
    diffs: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        by_code = Counter(f.code for f in self.findings)
        fixable = sum(f.fixable for f in self.findings)
        return {
            "files": self.files,
            "findings": len(self.findings),
            "fixable": fixable,
            "manual": len(self.findings) - fixable,
            "parse_errors": self.parse_errors,
            "fixed": self.fixed,
            "files_changed": self.files_changed,
            "by_code": dict(sorted(by_code.items())),
        }

    def to_json(self) -> dict[str, Any]:
        return {"findings": [f.to_json() for f in self.findings], "summary": self.summary()}

    def summary_lines(self) -> list[str]:
        out = []
        by = Counter(f.code for f in self.findings)
        fx = Counter(f.code for f in self.findings if f.fixable)
        for code in sorted(by):
            out.append(f"  {code}  {by[code]:>4}  ({fx[code]} fixable)  {rule(code).title}")
        s = self.summary()
        tail = f"{s['files']} file(s) scanned, {s['findings']} finding(s), {s['fixable']} fixable, {s['manual']} manual"
        if self.parse_errors:
            tail += f", {self.parse_errors} unparsable"
        out.append(tail)
        return out


@dataclass(frozen=True)
class _Source:
    shown: str  # the path as displayed (as the user gave it, joined with the relative part)
    path: Path
    root: Path  # the real path of the PATH argument it was found under


def _is_venv(d: Path) -> bool:
    return (d / "pyvenv.cfg").is_file()


def collect(paths: Sequence[str]) -> list[_Source]:
    """Python files under `paths` (a file given explicitly is taken whatever its suffix). BadInput if missing."""
    if not paths:
        raise BadInput("port: no PATH given")
    out: list[_Source] = []
    seen: set[str] = set()
    for p in paths:
        if not os.path.lexists(p):
            raise BadInput(f"port: {p}: no such file or directory")
        if not os.path.exists(p):
            raise BadInput(f"port: {p}: broken symlink")
        root = Path(os.path.realpath(p))
        for shown, path in _walk(p):
            key = os.path.realpath(path)
            if key in seen:
                continue
            seen.add(key)
            out.append(_Source(shown, path, root))
    return out


def _walk(p: str) -> Iterator[tuple[str, Path]]:
    if not os.path.isdir(p):
        yield p, Path(p)
        return
    for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS and not _is_venv(Path(dirpath, d))
        )
        for f in sorted(filenames):
            if f.endswith(".py") or f.endswith(".pyi"):
                yield os.path.join(dirpath, f), Path(dirpath, f)


def _decode(data: bytes) -> tuple[str, str]:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding


def _writable(src: _Source) -> str | None:
    """Why `src` must not be written, or None."""
    if src.path.is_symlink():
        return "is a symlink (not followed for writing)"
    real = Path(os.path.realpath(src.path))
    if real != src.root and src.root not in real.parents:
        return f"resolves outside {src.root}"
    if not stat.S_ISREG(os.stat(real).st_mode):
        return "not a regular file"
    return None


def check_select(select: set[str] | None) -> None:
    if select is not None:
        bad = sorted(set(select) - CODES)
        if bad:
            raise BadInput(f"port: unknown rule code(s): {', '.join(bad)}")


def scan(paths: list[str], select: set[str] | None = None) -> PortReport:
    """Findings for every Python file under `paths`; nothing is written. BadInput for a missing path."""
    return port(paths, select, fix=False, write=False)


def port(paths: Sequence[str], select: set[str] | None = None, fix: bool = False, write: bool = True) -> PortReport:
    """Scan `paths`; with `fix`, rewrite what can be rewritten. `write=False` computes the fixes (and
    their diffs) without writing them: the findings then describe the files as they are."""
    check_select(select)
    sources = collect(paths)
    rep = PortReport(files=len(sources))
    for src in sources:
        _one(src, select, fix, write, rep)
    return rep


def _one(src: _Source, select: set[str] | None, fix: bool, write: bool, rep: PortReport) -> None:
    """One file: read, scan (and fix), its diff, write it back when asked and allowed; its findings."""

    def add(hits: Sequence[Any]) -> None:
        rep.findings.extend(Finding(src.shown, h.line, h.col, h.code, h.message, h.fixable) for h in hits)

    try:
        data = src.path.read_bytes()
    except OSError as e:
        rep.parse_errors += 1
        rep.findings.append(Finding(src.shown, 1, 1, PARSE_ERROR, f"cannot read: {e.strerror or e}", False))
        return
    if not may_have_findings(data):
        return
    scanned = _scan(src, data, select, fix, rep)
    if scanned is None:
        return
    text, encoding, res = scanned
    if not fix or res.code == text:
        add(res.hits)
        return
    new_data = res.code.encode(encoding)
    rep.diffs.append(_diff(src, text, res.code))
    rep.fixed += res.fixed
    if not write:
        add(res.hits)
        return
    why = _writable(src)
    if why is None:
        try:
            atomic_write_bytes(Path(os.path.realpath(src.path)), new_data)
        except OSError as e:
            why = f"cannot write: {e.strerror or e}"
    if why is not None:
        rep.fixed -= res.fixed
        rep.not_written.append(f"{src.shown}: {why}")
        add(res.hits)
        return
    rep.files_changed += 1
    add(run_module(res.code, select, fix=False).hits)  # what remains: the manual findings


def _scan(
    src: _Source, data: bytes, select: set[str] | None, fix: bool, rep: PortReport
) -> tuple[str, str, Any] | None:
    """(text, encoding, the codemod's result); None when the file cannot be parsed (or our codemod failed
    on it): a PARSE_ERROR finding, the file left as it is."""
    try:
        text, encoding = _decode(data)
        return text, encoding, run_module(text, select, fix)
    except (cst.ParserSyntaxError, SyntaxError, UnicodeDecodeError, LookupError, RecursionError) as e:
        line = getattr(e, "editor_line", None) or getattr(e, "lineno", None) or 1
        col = getattr(e, "editor_column", None) or getattr(e, "offset", None) or 1
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        where, why = (int(line), int(col)), f"cannot parse, left untouched: {msg}"
    except Exception as e:  # our bug: say so, keep the file as it is, go on with the others
        msg = f"{type(e).__name__}: {e}".splitlines()[0]
        where, why = (1, 1), f"internal error in bringup port, file left untouched (please report): {msg}"
    rep.parse_errors += 1
    rep.findings.append(Finding(src.shown, where[0], where[1], PARSE_ERROR, why, False))
    return None


def _diff(src: _Source, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{src.shown.lstrip('/')}",
            tofile=f"b/{src.shown.lstrip('/')}",
        )
    )
