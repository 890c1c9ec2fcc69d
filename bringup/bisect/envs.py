"""The environment cache: one virtual environment per exact requirement set, built once, reused by every
bisection that needs the same set, removed least-recently-used first when the cache passes its size.

.ci/compat.py's venv logic, made general: a fresh venv, the candidate's whole requirement set installed
in ONE pip call (so nothing pinned is moved by what comes after), then the installed versions checked
against every pin (pip's resolver may not move a pinned package; this catches an index that serves
something else), then the pinned packages imported. bringup itself, when a stored case must run there,
goes in last from a wheel built once from this tree, with --no-deps (its dependencies are part of the
requirement set). A new env holds what `python -m venv` gives (setuptools, from this Python's own bundled
wheel, on Python <= 3.11) but no pip of its own: the driver's pip installs into it (`pip --python`).

Layout under the cache root: `<key>/` the venv (complete once `<key>/bringup-env.json` exists), `<key>.lock`
(exclusive while building, shared while a candidate runs in it: pruning never removes an env in use).
The key is a hash of the normalized, sorted requirement list, the Python that makes the env and the site
directories it inherits. A build killed half-way leaves no metadata: the next one starts it again.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bringup.bisect.spec import digest, file_sha256, pins

META = "bringup-env.json"

# Run inside an env: the installed version, project URLs and top-level modules of each named distribution.
_INSPECT = r"""
import importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        out[name] = None
        continue
    tops = (d.read_text("top_level.txt") or "").split()
    if not tops:
        files = [str(f) for f in (d.files or []) if str(f).endswith(".py")]
        tops = sorted({f.split("/")[0] for f in files if "/" in f} | {f[:-3] for f in files if "/" not in f})
    urls = dict(u.split(", ", 1) for u in (d.metadata.get_all("Project-URL") or []) if ", " in u)
    if d.metadata.get("Home-page"):
        urls.setdefault("Home-page", d.metadata["Home-page"])
    out[name] = {"version": d.version, "tops": tops, "urls": urls}
print(json.dumps(out))
"""


def _pip_install(req: EnvRequest, py: str, *args: str) -> list[str]:
    """`pip install` into the env whose python is `py`, run by the pip of the python that builds it."""
    return [
        req.python,
        "-m",
        "pip",
        "--python",
        py,
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--no-cache-dir",
        *args,
    ]


class EnvFailed(Exception):
    """The candidate's environment could not be made (pip refused, a pin moved, it does not import):
    a skip, never a verdict. The message is one line."""

    def __init__(self, reason: str, build_s: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.build_s = build_s


@dataclass(frozen=True)
class EnvRequest:
    requirements: tuple[str, ...]  # normalized, sorted: the key
    python: str = field(default_factory=lambda: sys.executable)
    inherit: tuple[str, ...] = ()  # site directories the env sees under its own (part of the key)
    find_links: tuple[str, ...] = ()  # where pip also looks (a wheel directory)
    overlay: str = ""  # a bringup wheel installed last, --no-deps ("" none)
    imports: tuple[str, ...] = ()  # modules that must import besides the pinned packages

    @property
    def key(self) -> str:
        impl = f"{platform.python_implementation()}-{platform.python_version()}-{sysconfig.get_platform()}"
        seeds = [Path(w).name for w in venv_seeds()]
        return digest(
            {"requirements": sorted(self.requirements), "python": impl, "inherit": list(self.inherit), "seeds": seeds}
        )


def venv_seeds() -> list[str]:
    """What `python -m venv` puts in a new env besides pip, from the wheels this Python bundles (ensurepip):
    setuptools up to Python 3.11 (torch 2.9's inductor imports it to build its C++). Installed from the
    file, offline, before the candidate (whose requirements may then upgrade it, as in a fresh venv)."""
    import ensurepip

    if sys.version_info >= (3, 12):
        return []
    return sorted(str(w) for w in (Path(ensurepip.__file__).parent / "_bundled").glob("setuptools-*.whl"))[:1]


@dataclass
class Env:
    key: str
    path: Path
    reused: bool
    build_s: float
    size_bytes: int
    installed: dict[str, str]
    urls: dict[str, dict[str, str]]

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def disk_bytes(path: Path) -> int:
    """Bytes a tree takes on disk (each inode once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def pip_reason(text: str) -> str:
    """pip's own one-line reason for a failed install (its first ERROR line, and the constraint that
    refused the version when there is one)."""
    lines = [ln.strip() for ln in text.splitlines()]
    errors = [ln.removeprefix("ERROR:").strip() for ln in lines if ln.startswith("ERROR:")]
    why = errors[0] if errors else (next((ln for ln in reversed(lines) if ln), "") or "pip failed")
    con = next((ln for ln in lines if "(constraint)" in ln), "")
    return f"{why} ({con})" if con and con not in why else why


def kill_tree(pid: int) -> None:
    """SIGKILL a process and everything it started. Children stay in the caller's process group (the
    worker's): when the worker dies with its driver, or past its case budget, its group kill takes them."""
    import psutil

    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.Error:
        return
    for p in reversed(procs):
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass


def _run(cmd: Sequence[str], log: IO[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run cmd, output to log; (rc, output). rc 124: over `timeout` (it and its children killed)."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    p = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out, _ = p.communicate(timeout=max(1.0, timeout))
        rc = p.returncode
    except subprocess.TimeoutExpired:
        kill_tree(p.pid)
        out, _ = p.communicate()
        rc = 124
    log.write(out + f"[exit {rc}]\n")
    log.flush()
    return rc, out


class EnvCache:
    def __init__(self, root: str | Path, max_gb: float) -> None:
        self.root = Path(root)
        self.max_bytes = int(max_gb * 1e9)
        self.root.mkdir(parents=True, exist_ok=True)

    def meta(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.root / key / META).read_text())
        except (OSError, ValueError):
            return None

    def _write_meta(self, key: str, data: dict[str, Any]) -> None:
        path = self.root / key / META
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)

    @contextmanager
    def _lock(self, key: str, mode: int, timeout: float) -> Iterator[IO[str]]:
        f = open(self.root / f"{key}.lock", "a+")
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    fcntl.flock(f, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise EnvFailed(f"environment {key} stayed locked by another build for {timeout:g} s") from None
                    time.sleep(0.5)
            yield f
        finally:
            f.close()  # releases the lock

    @contextmanager
    def env(self, req: EnvRequest, budget_s: float, log: IO[str], pip_env: dict[str, str]) -> Iterator[Env]:
        """The env for `req`, built if needed, held (shared lock) while the caller runs in it."""
        key = req.key
        with self._lock(key, fcntl.LOCK_EX, budget_s) as f:
            env = self._ready(req, key, budget_s, log, pip_env)
            fcntl.flock(f, fcntl.LOCK_SH)  # others may run in it too now; pruning may not remove it
            yield env

    def _ready(self, req: EnvRequest, key: str, budget_s: float, log: IO[str], pip_env: dict[str, str]) -> Env:
        t0 = time.monotonic()
        meta = self.meta(key)
        reused = meta is not None
        if meta is None:
            meta = self._build(req, key, budget_s, log, pip_env)
        overlay = file_sha256(req.overlay) if req.overlay else ""
        if overlay and meta.get("overlay") != overlay:
            self._overlay(req, key, budget_s - (time.monotonic() - t0), log, pip_env)
            meta["overlay"] = overlay
        meta["last_used"] = time.time()
        meta["uses"] = int(meta.get("uses", 0)) + 1
        self._write_meta(key, meta)
        if not reused:
            self.prune(keep={key})
        return Env(
            key,
            self.root / key,
            reused,
            0.0 if reused else float(meta["build_s"]),
            int(meta["size_bytes"]),
            dict(meta["installed"]),
            dict(meta.get("urls", {})),
        )

    def _build(
        self, req: EnvRequest, key: str, budget_s: float, log: IO[str], pip_env: dict[str, str]
    ) -> dict[str, Any]:
        t0 = time.monotonic()
        path = self.root / key
        shutil.rmtree(path, ignore_errors=True)  # a build killed half-way
        left = lambda: budget_s - (time.monotonic() - t0)
        try:
            rc, out = _run([req.python, "-m", "venv", "--without-pip", str(path)], log, left())
            if rc != 0:
                raise EnvFailed(f"python -m venv failed: {out.strip().splitlines()[-1:] or rc}")
            py = str(path / "bin" / "python")
            if req.inherit:
                rc, site = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], log, 60)
                # `import` lines of a .pth run at start-up: each inherited directory is a site directory of
                # its own (its .pth files, e.g. an editable install's, are processed), after the env's own
                lines = [f"import site; site.addsitedir({d!r})" for d in req.inherit]
                Path(site.strip().splitlines()[-1], "_bringup_inherit.pth").write_text("\n".join(lines) + "\n")
            pip = _pip_install(req, py, "--progress-bar", "off")
            for d in req.find_links:
                pip += ["--find-links", d]
            seeds = venv_seeds()
            if seeds:  # as `python -m venv` would have them, then free to move (a requirement may need newer)
                rc, out = _run([*pip, "--no-deps", "--no-index", *seeds], log, left(), pip_env)
                if rc != 0:
                    raise EnvFailed(f"pip: seeding the env failed: {pip_reason(out)}")
            rc, out = _run([*pip, *req.requirements], log, left(), pip_env)
            if rc == 124:
                raise EnvFailed(f"install over its budget ({budget_s:g} s)")
            if rc != 0:
                raise EnvFailed(f"pip: {pip_reason(out)}")
            found = self._inspect(py, req, log, max(30.0, left()))
            installed = {n: (d or {}).get("version", "") for n, d in found.items()}
            for name, want in pins(req.requirements).items():
                self._check_pin(name, want, found.get(name), req)
            self._import_check(py, req, found, log, max(30.0, left()))
        except EnvFailed as e:
            shutil.rmtree(path, ignore_errors=True)
            raise EnvFailed(e.reason, time.monotonic() - t0) from None
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        build_s = time.monotonic() - t0
        meta = {
            "key": key,
            "requirements": list(req.requirements),
            "inherit": list(req.inherit),
            "python": platform.python_version(),
            "created": time.time(),
            "build_s": build_s,
            "size_bytes": disk_bytes(path),
            "installed": installed,
            "urls": {n: (d or {}).get("urls", {}) for n, d in found.items()},
        }
        self._write_meta(key, meta)
        return meta

    def _inspect(self, py: str, req: EnvRequest, log: IO[str], timeout: float) -> dict[str, Any]:
        names = sorted(pins(req.requirements)) or [r.split("=")[0] for r in req.requirements]
        rc, out = _run([py, "-c", _INSPECT, *names], log, timeout)
        if rc != 0:
            raise EnvFailed(f"reading the installed versions failed: {out.strip().splitlines()[-1:]}")
        return json.loads(out.strip().splitlines()[-1])

    @staticmethod
    def _check_pin(name: str, want: str, got: dict[str, Any] | None, req: EnvRequest) -> None:
        from packaging.specifiers import SpecifierSet
        from packaging.utils import parse_wheel_filename

        if got is None:
            raise EnvFailed(f"{name} is not installed after pip said it was")
        have = str(got["version"])
        if "://" in want:  # a wheel file: its version
            expect = str(parse_wheel_filename(want.split("#")[0].rsplit("/", 1)[-1])[1])
            ok = have == expect
        else:
            ok = SpecifierSet(want).contains(have, prereleases=True)
            expect = want
        if not ok:
            raise EnvFailed(f"pip moved a pinned package: {name} {expect} asked, {have} installed")

    def _import_check(self, py: str, req: EnvRequest, found: dict[str, Any], log: IO[str], timeout: float) -> None:
        mods: list[str] = []
        for name, d in found.items():
            tops = [t for t in (d or {}).get("tops", []) if t.isidentifier() and not t.startswith("_")]
            own = name.replace("-", "_")
            mods += [own] if own in tops else tops
        code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
        for group, what in ((mods, "does not import"), (list(req.imports), "lacks bringup's dependencies")):
            if not group:
                continue
            rc, out = _run([py, "-c", code, *group], log, timeout)
            if rc != 0:
                last = [ln for ln in out.strip().splitlines() if ln.strip()]
                why = "over its budget" if rc == 124 else (last[-1] if last else f"exit {rc}")
                raise EnvFailed(f"{what}: {why}")

    def _overlay(self, req: EnvRequest, key: str, budget_s: float, log: IO[str], pip_env: dict[str, str]) -> None:
        py = str(self.root / key / "bin" / "python")
        cmd = _pip_install(req, py, "--no-deps", "--no-index", "--force-reinstall", req.overlay)
        rc, out = _run(cmd, log, max(30.0, budget_s), pip_env)
        if rc != 0:
            raise EnvFailed(f"installing bringup into the env failed: {pip_reason(out)}")
        rc, out = _run([py, "-c", "import bringup.bisect.child"], log, max(30.0, budget_s))
        if rc != 0:
            last = [ln for ln in out.strip().splitlines() if ln.strip()]
            raise EnvFailed(f"lacks bringup's dependencies: {last[-1] if last else rc}")

    # ---- size ---------------------------------------------------------------------------------------
    def complete(self) -> list[dict[str, Any]]:
        out = []
        for d in self.root.iterdir():
            m = self.meta(d.name) if d.is_dir() else None
            if m is not None:
                out.append(m)
        return out

    def total_bytes(self) -> int:
        return sum(int(m.get("size_bytes", 0)) for m in self.complete())

    def prune(self, keep: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]  # an immutable default, only read
        """Remove least recently used envs (not in `keep`, not in use) until the cache fits its size."""
        envs = sorted(self.complete(), key=lambda m: float(m.get("last_used", m.get("created", 0))))
        total = sum(int(m.get("size_bytes", 0)) for m in envs)
        removed: list[str] = []
        for m in envs:
            if total <= self.max_bytes:
                break
            key = str(m["key"])
            if key in keep:
                continue
            with open(self.root / f"{key}.lock", "a+") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # in use
                (self.root / key / META).unlink(missing_ok=True)  # incomplete from here on
                shutil.rmtree(self.root / key, ignore_errors=True)
            total -= int(m.get("size_bytes", 0))
            removed.append(key)
        return removed
