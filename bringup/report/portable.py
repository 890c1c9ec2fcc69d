"""A page that travels: no absolute path of the machine that ran (or rendered) it in the HTML or its JSON.

Absolute paths stay in the store (artifacts, cache_dir, the summary file, tracebacks); the page shows
them relative or under a named root:

    the run's folder, the results folder   relative to the page (`.`, `trace.json.gz`, `../<run>/...`)
    the run's working directory             `.`
    the home directory                      `~`
    the temp directory                      `$TMPDIR`
    the Python environment (a venv)         `$PYTHON`
    the bringup checkout (editable install) `$BRINGUP`
    any `.../site-packages/`                `site-packages/`
    `/home/<user>`, `/Users/<user>`, `/root`, `/tmp`, `/var/folders/../T` of any machine: as above

The run's own roots come from `run.info["paths"]` (recorded by `bringup.provenance.run_paths` when the
run started), the rendering machine's from `here()`. A run recorded before that, on another machine,
keeps absolute paths outside those roots and the generic patterns (its working directory, if it was
not under a home or temp directory): they are shown as recorded.

`Portable.text` rewrites one string; `Portable.page` rewrites a whole rendered page (HTML with its
embedded JSON), so every section, a plugin's included, is covered. A root is only replaced where a path
starts (not inside `../tmp/x`), and the tokens hold no character HTML or JSON would have to escape.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.provenance import run_paths

# Where a path may start: not after a word character, a dot, a slash or a token's own characters.
_START = r"(?<![\w.~$/\-])"
_END = r"(?=[/\\\s\"'<>&),;:\]}]|$)"
GENERIC: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(_START + r"/(?:[^\s\"'<>&/]+/)*?((?:site|dist)-packages)/"), r"\1/"),
    (re.compile(_START + r"(?:/private)?/var/folders/[^\s\"'<>&/]+/[^\s\"'<>&/]+/T" + _END), "$TMPDIR"),
    (re.compile(_START + r"/(?:var/)?tmp" + _END), "$TMPDIR"),
    (re.compile(_START + r"/(?:home|Users)/[^\s\"'<>&/]+" + _END), "~"),
    (re.compile(_START + r"/root" + _END), "~"),
)


def here() -> dict[str, Any]:
    """This machine's roots, in the shape `run.info["paths"]` records."""
    return run_paths()


@dataclass(frozen=True)
class Portable:
    """(absolute prefix, replacement) pairs, longest prefix first, then the generic patterns."""

    roots: tuple[tuple[str, str], ...]

    def text(self, s: str) -> str:
        if "/" not in s and "\\" not in s:
            return s
        for prefix, token in self.roots:
            if prefix in s:
                s = re.sub(_START + re.escape(prefix) + _END, token.replace("\\", "\\\\"), s)
        for pat, token in GENERIC:
            s = pat.sub(token, s)
        return s

    def page(self, html: str) -> str:
        return self.text(html)

    def data(self, value: Any) -> Any:
        """Every string in a JSON-like value (keys included) rewritten."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


def _rel(target: str | os.PathLike[str], start: Path | None) -> str:
    if start is None:
        return "."
    try:
        return os.path.relpath(os.path.abspath(target), start) or "."
    except ValueError:  # another drive (Windows)
        return "."


def portable(
    recorded: Mapping[str, Any] | None = None,
    out_dir: Path | None = None,
    run_dirs: Iterable[str | os.PathLike[str]] = (),
    also: Iterable[Mapping[str, Any]] = (),
) -> Portable:
    """The rewriting for one page written to `out_dir`: the run's folders (as recorded and where they are
    now) relative to the page; the recorded roots of the run (`recorded`: run.info["paths"]), then those
    of `also` (default: this machine's) as named roots."""
    pairs: dict[str, str] = {}

    def add(prefix: Any, token: str) -> None:
        if isinstance(prefix, str) and os.path.isabs(prefix) and len(Path(prefix).parts) > 1:
            pairs.setdefault(os.path.normpath(prefix), token)

    for d in run_dirs:
        add(str(d), _rel(d, out_dir))
        add(str(Path(d).parent), _rel(Path(d).parent, out_dir))
    sets = [recorded or {}, *(list(also) or [here()])]
    for s in sets:
        add(s.get("python"), "$PYTHON")
    for s in sets:
        add(s.get("bringup"), "$BRINGUP")
    for s in sets:
        add(s.get("tmp"), "$TMPDIR")
    for s in sets:
        add(s.get("cwd"), ".")
    for s in sets:
        add(s.get("home"), "~")
    roots = tuple(sorted(pairs.items(), key=lambda kv: -len(kv[0])))
    return Portable(roots)


def recorded_run_dir(info: Mapping[str, Any]) -> str | None:
    """The run's folder as it was when the run wrote its summary (`info["summary"]` is a file in it)."""
    s = info.get("summary")
    return str(Path(s).parent) if isinstance(s, str) and os.path.isabs(s) else None


def travelling(value: Any, info: Mapping[str, Any], run_dir: str | os.PathLike[str]) -> Any:
    """`value` (summary.json's data, a bundle) with no path of the machine that ran it: the run's folder (where
    it is now, and where it was when it wrote its summary) relative to that folder (`./artifacts/...`, its
    parent `..`), then the run's recorded roots and this machine's named ($PYTHON, $BRINGUP, $TMPDIR, `.`, `~`),
    then any other machine's home / temp / site-packages. The store keeps the absolute paths."""
    rd = Path(os.path.abspath(run_dir))
    dirs: list[str | os.PathLike[str]] = [rd]
    if (was := recorded_run_dir(info)) is not None and os.path.normpath(was) != str(rd):
        dirs.append(was)
    recorded = info.get("paths")
    return portable(recorded if isinstance(recorded, Mapping) else {}, out_dir=rd, run_dirs=dirs).data(value)
