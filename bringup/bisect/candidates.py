"""Candidates: the releases of a package the index lists between two versions, a directory of wheels, or
explicit requirement sets. Nothing is hard-coded: the index is the one pip is configured with (its
index-url, extra-index-urls and find-links, from pip.conf or PIP_* variables), asked with
`pip index versions`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from bringup.bisect.spec import Candidate, file_sha256, normalize, parse_requirement
from bringup.errors import BadInput

INDEX_TIMEOUT_S = 300.0


def endpoint(text: str, what: str) -> tuple[str, Version | None]:
    """`torch==2.9.0` -> ("torch", 2.9.0); a bare `torch` -> ("torch", None): the newest listed."""
    req = parse_requirement(text, what)
    if req.url or req.marker or req.extras:
        raise BadInput(f"{what} {text!r}: give NAME==VERSION (or a bare NAME for the newest)")
    specs = list(req.specifier)
    if not specs:
        return canonicalize_name(req.name), None
    if len(specs) != 1 or specs[0].operator not in ("==", "==="):
        raise BadInput(f"{what} {text!r}: give NAME==VERSION (or a bare NAME for the newest)")
    try:
        return canonicalize_name(req.name), Version(specs[0].version)
    except InvalidVersion:
        raise BadInput(f"{what} {text!r}: {specs[0].version!r} is not a version") from None


def index_versions(name: str, pre: bool, python: str = sys.executable) -> list[Version]:
    """The versions of `name` the configured index lists (`pip index versions`), oldest first."""
    cmd = [python, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"]
    if pre:
        cmd.append("--pre")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=INDEX_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BadInput(f"pip index versions {name}: no answer in {INDEX_TIMEOUT_S:g} s") from None
    m = re.search(r"^Available versions:\s*(.+)$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        why = _pip_error(p.stdout + p.stderr) or f"exit {p.returncode}"
        raise BadInput(f"pip index versions {name}: {why}")
    out: set[Version] = set()
    for v in m.group(1).split(","):
        try:
            out.add(Version(v.strip()))
        except InvalidVersion:
            continue
    return sorted(out)


def _pip_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("ERROR:")]
    return lines[0].removeprefix("ERROR:").strip() if lines else ""


def from_index(old: str, new: str, pre: bool) -> tuple[list[Candidate], str]:
    """The releases between OLD and NEW (both included) the index lists. Local builds of a release
    (2.13.0+cpu beside 2.13.0) are one candidate: `==2.13.0` lets pip pick, and the answer records what it
    installed. Pre-releases only with `pre`."""
    name, lo = endpoint(old, "--between OLD")
    name2, hi = endpoint(new, "--between NEW")
    if name != name2:
        raise BadInput(f"--between names two packages ({name}, {name2}); explicit sets: --set")
    if lo is None:
        raise BadInput(f"--between OLD {old!r}: give NAME==VERSION")
    listed = index_versions(name, pre or lo.is_prerelease or (hi is not None and hi.is_prerelease))
    publics = sorted({Version(v.public) for v in listed})
    if hi is None:
        if not publics:
            raise BadInput(f"the index lists no release of {name}")
        hi = publics[-1]
    if lo == hi:
        raise BadInput(f"--between: OLD and NEW are the same release ({name}=={lo})")
    lo, hi = min(lo, hi), max(lo, hi)
    for v in (lo, hi):
        if Version(v.public) not in publics:
            i = sum(x < v for x in publics)
            near = ", ".join(str(x) for x in publics[max(0, i - 3) : i + 3])
            raise BadInput(f"{name}=={v} is not a release the index lists (near it: {near or 'none'})")
    keep = [v for v in publics if lo <= v <= hi and (pre or not v.is_prerelease or v in (lo, hi))]
    cands = [Candidate(f"{name}=={v}", (normalize(f"{name}=={v}"),), str(v)) for v in keep]
    return cands, f"{name}: the {len(cands)} releases from {lo} to {hi} the index lists"


def from_wheels(directory: str, between: Sequence[str] | None) -> tuple[list[Candidate], str]:
    """Each version of the one package whose wheels lie in `directory` (one compatible wheel per version,
    pinned by file and sha256), oldest first; `between` limits the range."""
    d = Path(directory).expanduser()
    if not d.is_dir():
        raise BadInput(f"--wheels {directory}: not a directory")
    tags = {str(t): i for i, t in enumerate(sys_tags())}
    found: dict[str, dict[Version, tuple[int, Path]]] = {}
    for f in sorted(d.glob("*.whl")):
        try:
            wheel_name, version, _build, ftags = parse_wheel_filename(f.name)
        except InvalidWheelFilename:
            continue
        rank = min((tags[str(t)] for t in ftags if str(t) in tags), default=None)
        if rank is None:
            continue
        have = found.setdefault(str(wheel_name), {})
        if version not in have or rank < have[version][0]:
            have[version] = (rank, f)
    if not found:
        raise BadInput(f"--wheels {directory}: no wheel for this Python in it")
    if len(found) > 1:
        raise BadInput(
            f"--wheels {directory}: wheels of {len(found)} packages ({', '.join(sorted(found))}); "
            "one package per directory"
        )
    name, by_version = next(iter(found.items()))
    versions = sorted(by_version)
    if between:
        n1, lo = endpoint(between[0], "--between OLD")
        n2, hi = endpoint(between[1], "--between NEW")
        if {n1, n2} != {name}:
            raise BadInput(f"--between names {n1}/{n2}, the wheels are {name}")
        hi = hi or versions[-1]
        if lo is None or lo == hi:
            raise BadInput("--between: give two different versions")
        lo, hi = min(lo, hi), max(lo, hi)
        missing = [str(v) for v in (lo, hi) if v not in by_version]
        if missing:
            raise BadInput(f"--wheels {directory}: no wheel of {name} {', '.join(missing)}")
        versions = [v for v in versions if lo <= v <= hi]
    out = []
    for v in versions:
        path = by_version[v][1].absolute()
        req = f"{name} @ {path.as_uri()}#sha256={file_sha256(path)}"
        out.append(Candidate(f"{name}=={v}", (normalize(req),), str(v), (str(d.absolute()),)))
    return out, f"{name}: the {len(out)} builds in {d}"


def split_set(line: str) -> list[str]:
    """'torch==2.9.0 torchvision==0.24.0' -> two requirements; spaces around operators and commas stay inside
    one ('torch >= 2.9, < 3' is one)."""
    out: list[str] = []
    for tok in line.split():
        if out and (tok[0] in "=<>!~,;@" or out[-1][-1] in "=<>!~,;@"):
            out[-1] += tok
        else:
            out.append(tok)
    return out


def from_sets(sets: Sequence[str], sets_file: str | None) -> tuple[list[Candidate], str]:
    """Explicit requirement sets (`--set` in order, then the lines of `--sets FILE`)."""
    lines = list(sets)
    if sets_file:
        try:
            text = Path(sets_file).read_text()
        except OSError as e:
            raise BadInput(f"--sets {sets_file}: {e.strerror or e}") from None
        lines += [re.split(r"(?:^|\s)#", ln, maxsplit=1)[0].strip() for ln in text.splitlines()]
    out: list[Candidate] = []
    for line in (ln for ln in lines if ln.strip()):
        words = split_set(line)
        reqs = tuple(sorted(normalize(r, "--set") for r in words))
        out.append(Candidate(" ".join(words), reqs))
    keys = [c.requirements for c in out]
    if len(set(keys)) != len(keys):
        raise BadInput("--set: the same requirement set is given twice")
    return out, f"{len(out)} explicit requirement sets"


def resolve(
    between: Sequence[str] | None, wheels: str | None, sets: Sequence[str], sets_file: str | None, pre: bool
) -> tuple[list[Candidate], str]:
    """The candidates the options name, oldest first (BadInput for a bad or empty choice)."""
    chosen = sum(bool(x) for x in (wheels, sets or sets_file)) + bool(between and not wheels)
    if chosen != 1:
        raise BadInput("give the candidates one way: --between OLD NEW, --wheels DIR, or --set/--sets")
    if wheels:
        cands, source = from_wheels(wheels, between)
    elif between:
        cands, source = from_index(between[0], between[1], pre)
    else:
        cands, source = from_sets(sets, sets_file)
    if len(cands) < 2:
        raise BadInput(f"{len(cands)} candidate(s): a bisection needs two or more ({source})")
    return cands, source


def pip_env() -> dict[str, str]:
    """The environment every pip call of a bisection sees: this one, minus a virtualenv's own variables."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
