"""Compile caches a killed worker may have damaged: find the damage, prove nobody is writing it, set it aside.

Inductor writes most of its on-disk cache atomically (a temporary file, then a rename), but the compiler
writes its outputs in place: `g++ ... -o <key>.so` (the linker creates the file at its start and fills it at
its end), the objects of a two-step build, and precompiled headers (`.gch`). A worker killed there (a budget,
a crash, a SIGKILL of the run) leaves a zero-byte or truncated file under the final name, and inductor then
trusts it forever: it builds only what does not exist, so every later process that needs that kernel fails
(`ImportError: ...main.so: file too short`), and a damaged vector-ISA probe library silently demotes the ISA.

What bringup does about it (docs/reliability.md, "Compile caches after a kill"):
- `sweep(roots)` checks the compiler outputs in the caches a worker will use: where a worker starts, and
  after the driver saw a worker die. A damaged artifact is renamed aside (`<name>.bringup-damaged`, never
  loaded again; inductor rebuilds it) only when it is proven orphaned: inductor's own build lock for it is
  free (every writer holds it while the compiler runs), or, where it has no lock file, it is older than any
  build inductor waits for. A file another live process is writing is left alone.
- The sweep is cheap on a large cache: only directories modified since the last complete sweep of that cache
  (a stamp in it, `.bringup-swept`) are read; a sweep that had to leave something unsettled keeps the old stamp.
- The backstop (runner.process.settle) re-runs a case that met a damaged artifact anyway (a kill between the
  sweep and the load) in a fresh worker with `clean_env`: private, empty caches.
"""

from __future__ import annotations

import errno
import getpass
import os
import re
import struct
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ARTIFACT_SUFFIXES = (".so", ".o", ".gch")  # what a compiler writes in place; the rest inductor writes atomically
QUARANTINE_SUFFIX = ".bringup-damaged"
STAMP = ".bringup-swept"
# A damaged file with no lock file is proven orphaned only once older than this: inductor waits at most
# LOCK_TIMEOUT (600 s) for a build lock, so no build it runs takes longer and still gets used.
ORPHAN_AGE_S = 600.0
STAMP_SLACK_S = 60.0  # clocks of a network file system: a directory modified just before the stamp is re-read
# Compiler outputs lie at most this deep below a cache root: <root>/<xx>/<key>.so, <root>/precompiled_headers/
# <key>.h.gch, an AOTInductor library in <root>/<xx>/<key>/; triton's cache is a root of its own (cache_roots).
MAX_DEPTH = 2
# inductor's trees of pickles (written atomically, never a compiler's output): not walked.
PICKLE_ONLY = frozenset({"fxgraph", "aotautograd", "locks", "cache", "pgo", "dynamo"})
_ELF_MAGIC = b"\x7fELF"
_MACHO_MAGICS = tuple(bytes.fromhex(h) for h in ("cffaedfe", "cefaedfe", "feedfacf", "feedface", "cafebabe"))
_PCH_MAGICS = (b"gpch", b"CPCH")  # GCC's and clang's precompiled headers


def damage(path: Path) -> str | None:
    """Why this compiler output cannot be what the compiler meant to write, or None when it may be.

    Empty; not an object file; an ELF file whose program or section header table lies past its end
    (a truncated write: the linker writes those tables last, at the end of the file); a precompiled
    header without its magic. A truncated precompiled header with its magic intact is not seen here
    (the compiler then fails with "while reading precompiled header"; the backstop handles that)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(64)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if size == 0:
        return "empty (0 bytes)"
    if path.suffix == ".gch":
        return None if head[:4] in _PCH_MAGICS else "not a precompiled header (bad magic)"
    if head[:4] in _MACHO_MAGICS:
        return None
    if head[:4] != _ELF_MAGIC:
        return "not an object file (bad magic)"
    return _elf_damage(head, size)


def _elf_damage(head: bytes, size: int) -> str | None:
    if len(head) < 52:
        return f"truncated ELF header ({size} bytes)"
    is64, little = head[4] == 2, head[5] == 1
    end = "<" if little else ">"
    if is64:
        if len(head) < 64:
            return f"truncated ELF header ({size} bytes)"
        phoff, shoff = struct.unpack_from(end + "QQ", head, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 54)
    else:
        phoff, shoff = struct.unpack_from(end + "II", head, 28)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 42)
    if not phnum and not shnum:  # an object has sections, a library program headers: a header and nothing else
        return "an ELF header without program or section headers"
    for what, off, n, ent in (("program", phoff, phnum, phentsize), ("section", shoff, shnum, shentsize)):
        if n and off + n * ent > size:
            return f"truncated: its {what} header table ends at byte {off + n * ent}, the file has {size}"
    return None


# ---- where a worker's compile caches are -------------------------------------------------------------------
def _temp_root(env: Mapping[str, str]) -> str:
    """tempfile.gettempdir() as a process with this environment would choose it."""
    for var in ("TMPDIR", "TEMP", "TMP"):
        d = env.get(var)
        if d and os.path.isdir(d):
            return os.path.abspath(d)
    return tempfile.gettempdir()


def _user() -> str:
    try:
        name = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        name = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return re.sub(r'[\\/:*?"<>|]', "_", name)


def cache_roots(env: Mapping[str, str]) -> list[Path]:
    """The compile cache directories a worker with this environment writes (torch's own rules, without
    importing inductor): TORCHINDUCTOR_CACHE_DIR or inductor's default under the temp dir, the default too
    (inductor keeps precompiled headers there whatever TORCHINDUCTOR_CACHE_DIR says), and triton's:
    TRITON_CACHE_DIR when set, else inductor's `triton/<device>` directories."""
    default = Path(_temp_root(env)) / f"torchinductor_{_user()}"
    chosen = Path(os.path.abspath(env["TORCHINDUCTOR_CACHE_DIR"])) if env.get("TORCHINDUCTOR_CACHE_DIR") else default
    roots = [chosen, default]
    if env.get("TRITON_CACHE_DIR"):
        roots.append(Path(os.path.abspath(env["TRITON_CACHE_DIR"])))
    else:
        roots += sorted(d for d in (chosen / "triton").glob("*") if d.is_dir())
    return list(dict.fromkeys(roots))


def clean_env(scratch: Path) -> dict[str, str]:
    """Private, empty compile caches under `scratch` (for a case re-run clean): inductor's, triton's, and the
    temp dir (precompiled headers and autotuning caches live under the default cache dir, i.e. the temp dir)."""
    dirs = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "TMPDIR": "tmp"}
    for sub in dirs.values():
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    return {var: str(scratch / sub) for var, sub in dirs.items()}


# ---- proof that nobody is writing it -------------------------------------------------------------------------
def _lock_files(path: Path) -> list[Path]:
    """Inductor's build lock for this output: `<cache>/locks/<key>.lock` for `<cache>/<xx>/<key>[.main].so`,
    `<dir>/locks/<key>.lock` for a precompiled header `<dir>/<key>.h.gch`."""
    key = path.name.split(".")[0]
    return [d / "locks" / f"{key}.lock" for d in (path.parent.parent, path.parent)]


def lock_state(path: Path) -> str | None:
    """ "held" (a live process is building `path`), "free", or None (no lock file, or no flock here)."""
    try:
        import fcntl  # lazy: optional
    except ImportError:  # Windows: the age rule decides
        return None
    for lock in _lock_files(path):
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return "free"
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return "held"
        finally:
            os.close(fd)
    return None


def orphaned(path: Path, now: float | None = None) -> bool:
    """True when no live process can be writing `path`: its build lock is free (taken and released here,
    without waiting; a writer holds it while the compiler runs), or it has no lock file and is older than
    any build inductor would wait for."""
    state = lock_state(path)
    if state is not None:
        return state == "free"
    try:
        return (now or time.time()) - path.stat().st_mtime > ORPHAN_AGE_S
    except OSError:
        return False


def quarantine(path: Path, met: bool = False) -> str | None:
    """Set `path` aside when it is damaged and orphaned. Returns why it was damaged, or None (left alone).

    `met`: a case's own error names it, so the case already met it through inductor's protocol, which takes the
    build lock before it trusts an existing file (and never writes one that exists): its writer was gone then,
    and only a lock held now (a process that set it aside and is rebuilding it) stops it. Without this, an object
    built under another key's lock (the second file of a two-step build) would wait out the age rule."""
    why = damage(path)
    if why is None or not (lock_state(path) != "held" if met else orphaned(path)):
        return None
    try:
        os.replace(path, path.with_name(path.name + QUARANTINE_SUFFIX))
    except OSError:
        return None
    return why


def drop_headers(roots: list[Path]) -> list[str]:
    """Set aside the precompiled headers no live process is writing, in `roots`' header dirs: for a compiler
    that failed "while reading precompiled header" (it names no file, and a truncated header keeps its magic).
    Safe for anyone who uses one meanwhile: without its `.gch` the compiler parses the header itself."""
    out = []
    for root in roots:
        d = root / "precompiled_headers"
        for path in sorted(d.glob("*.gch")) if d.is_dir() else []:
            if lock_state(path) == "held":
                continue
            try:
                os.replace(path, path.with_name(path.name + QUARANTINE_SUFFIX))
                out.append(f"{path} (precompiled header the compiler could not read)")
            except OSError:
                pass
    return out


# ---- the sweep -----------------------------------------------------------------------------------------------
@dataclass
class SweepReport:
    checked: int = 0  # compiler outputs read
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    unsettled: list[tuple[str, str]] = field(default_factory=list)  # damaged, but maybe still being written
    seconds: float = 0.0

    def line(self) -> str:
        parts = [f"compile caches: {self.checked} artifact(s) checked in {self.seconds:.2f} s"]
        parts += [f"set aside {p} ({why})" for p, why in self.quarantined]
        left = [(p, why) for p, why in self.unsettled if why != "being written"]
        parts += [f"left {p} ({why}; a live process may be writing it)" for p, why in left]
        return "; ".join(parts)


def _read_stamp(root: Path) -> float:
    try:
        return float((root / STAMP).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0.0


def _write_stamp(root: Path, t: float) -> None:
    tmp = root / f"{STAMP}.{os.getpid()}.tmp"
    try:
        tmp.write_text(f"{t:.3f}\n")
        os.replace(tmp, root / STAMP)
    except OSError:
        tmp.unlink(missing_ok=True)


def _changed_dirs(root: Path, since: float) -> Iterator[Path]:
    """The directories under root (root included, MAX_DEPTH levels down) modified at or after `since`: an entry
    added, removed or renamed there (a compiler creating its output changes its directory). An unchanged one is
    listed only to find its subdirectories, and not at all where its link count says it has none (2 on Linux's
    file systems; btrfs says 1 for every directory, and then it is listed); inductor's pickle-only trees (written
    atomically, and the bulk of a big cache's directories) are not walked."""
    stack = [(root, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            st = d.stat()
            changed = st.st_mtime >= since
            if changed:
                yield d
            if depth == MAX_DEPTH or (not changed and st.st_nlink == 2):
                continue
            with os.scandir(d) as it:
                subs = [e.name for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        stack += [(d / n, depth + 1) for n in subs if not (depth == 0 and n in PICKLE_ONLY)]


def sweep(roots: list[Path], everything: bool = False) -> SweepReport:
    """Check the compiler outputs in `roots` written since each root's last complete sweep (`everything`:
    all of them), set aside the damaged ones no live process is writing, and move the stamp of each root
    whose damage is all settled."""
    rep = SweepReport()
    t0 = time.time()
    for root in roots:
        if not root.is_dir():
            continue
        since = 0.0 if everything else _read_stamp(root) - STAMP_SLACK_S
        before = len(rep.unsettled)
        for d in _changed_dirs(root, since):
            try:
                names = [e.name for e in os.scandir(d) if e.name.endswith(ARTIFACT_SUFFIXES)]
            except OSError:
                continue
            for name in names:
                rep.checked += 1
                path = d / name
                why = damage(path)
                if why is None:
                    if lock_state(path) == "held":  # being written: looks whole now, may not be at the end
                        rep.unsettled.append((str(path), "being written"))
                    continue
                if quarantine(path) is not None:
                    rep.quarantined.append((str(path), why))
                elif path.exists():
                    rep.unsettled.append((str(path), why))
        if len(rep.unsettled) == before:
            _write_stamp(root, t0)
    rep.seconds = time.time() - t0
    return rep


def sweep_quietly(roots: list[Path], everything: bool = False) -> SweepReport | None:
    """sweep(), but never an exception: a cache we cannot read or write is left as it is."""
    try:
        return sweep(roots, everything)
    except Exception:
        return None
