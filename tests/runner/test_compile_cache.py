"""The damaged-artifact detector and the sweep (bringup/runner/compile_cache.py): what a compiler killed while
writing its output in place leaves is seen as damaged and set aside, a whole library is not; nothing a live
process may still be writing is touched; a sweep reads only what changed since the last complete one."""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from bringup.runner import compile_cache as cc

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ELF libraries and flock: Linux")


def _real_library() -> Path:
    import _ctypes  # an ELF shared object of the interpreter's own

    return Path(_ctypes.__file__)


def _cache_with(tmp_path: Path, data: bytes, name: str = "ckey.main.so", lock: bool = True) -> Path:
    """`data` as inductor would lay a kernel library out: <cache>/<xx>/<key>.main.so, lock <cache>/locks/<key>.lock."""
    root = tmp_path / "ind"
    path = root / name[1:3] / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if lock:
        (root / "locks").mkdir(exist_ok=True)
        (root / "locks" / f"{name.split('.')[0]}.lock").touch()
    return path


def test_damage_sees_what_a_killed_compiler_leaves_and_passes_a_whole_library(tmp_path: Path) -> None:
    whole = _real_library().read_bytes()
    cases = {
        "whole.so": (whole, None),
        "empty.so": (b"", "empty"),
        "half.so": (whole[: len(whole) // 2], "truncated"),  # the ELF header is there, its tables are not
        "head.so": (whole[:40], "truncated ELF header"),
        "zeros.so": (bytes(len(whole)), "bad magic"),  # a linker that sized the file first, killed before writing
        "blank.so": (whole[:16] + bytes(len(whole) - 16), "without program or section headers"),
        "text.o": (b"#include <x>\n", "bad magic"),
        "ok.h.gch": (b"gpch+014" + bytes(64), None),
        "clang.h.gch": (b"CPCH" + bytes(64), None),
        "empty.h.gch": (b"", "empty"),
        "bad.h.gch": (b"\0\0\0\0" + bytes(64), "bad magic"),
    }
    for name, (data, want) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        got = cc.damage(p)
        assert (got is None) if want is None else (got is not None and want in got), (name, got)
    assert cc.damage(tmp_path / "missing.so") is None  # gone is not damaged: nothing to set aside


def test_a_damaged_library_is_set_aside_only_when_no_live_process_is_writing_it(tmp_path: Path) -> None:
    path = _cache_with(tmp_path, b"")
    lock = tmp_path / "ind" / "locks" / "ckey.lock"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a build in progress holds inductor's lock (as a live g++'s caller does)
        assert cc.lock_state(path) == "held"
        assert cc.quarantine(path) is None and path.exists()
        rep = cc.sweep([tmp_path / "ind"])
        assert rep.unsettled and not rep.quarantined and path.exists()
        assert not (tmp_path / "ind" / cc.STAMP).exists()  # unsettled: the next sweep reads it again
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert cc.lock_state(path) == "free"
    rep = cc.sweep([tmp_path / "ind"])
    assert [p for p, _ in rep.quarantined] == [str(path)]
    assert not path.exists() and path.with_name(path.name + cc.QUARANTINE_SUFFIX).exists()
    assert (tmp_path / "ind" / cc.STAMP).exists()


def test_without_a_lock_file_only_an_old_damaged_file_is_proven_orphaned(tmp_path: Path) -> None:
    path = _cache_with(tmp_path, b"", lock=False)
    assert cc.lock_state(path) is None
    assert not cc.orphaned(path)  # young: a writer outside inductor's locks may still be at it
    old = time.time() - cc.ORPHAN_AGE_S - 5
    os.utime(path, (old, old))
    assert cc.orphaned(path)
    assert cc.quarantine(path) == "empty (0 bytes)"


def test_a_whole_library_is_never_touched(tmp_path: Path) -> None:
    path = _cache_with(tmp_path, _real_library().read_bytes())
    rep = cc.sweep([tmp_path / "ind"], everything=True)
    assert rep.checked == 1 and not rep.quarantined and not rep.unsettled
    assert path.read_bytes() == _real_library().read_bytes()


def test_a_sweep_reads_only_directories_changed_since_the_last_complete_one(tmp_path: Path) -> None:
    root = tmp_path / "ind"
    good = _cache_with(tmp_path, _real_library().read_bytes(), "cgood.so")
    assert cc.sweep([root]).checked == 1
    # damage planted in a directory that (by its mtime) has not changed since the stamp: not read, so cheap ...
    bad = _cache_with(tmp_path, b"", "cgxbad.so")
    past = time.time() - 3600
    os.utime(bad.parent, (past, past))
    stamp = float((root / cc.STAMP).read_text())
    (root / cc.STAMP).write_text(f"{stamp + 120}\n")  # and the stamp past the slack
    assert cc.sweep([root]).checked == 0 and bad.exists()
    # ... any write there (a compiler creating its output) changes the directory, and it is read again
    (bad.parent / "cgxnew.cpp").write_text("//")
    rep = cc.sweep([root])
    assert [p for p, _ in rep.quarantined] == [str(bad)] and good.exists()


def test_everything_reads_the_whole_cache(tmp_path: Path) -> None:
    root = tmp_path / "ind"
    bad = _cache_with(tmp_path, b"")
    (root / cc.STAMP).write_text(f"{time.time() + 3600}\n")
    past = time.time() - 3600
    os.utime(bad.parent, (past, past))
    assert cc.sweep([root]).checked == 0
    assert [p for p, _ in cc.sweep([root], everything=True).quarantined] == [str(bad)]


def test_cache_roots_follow_torchs_rules(tmp_path: Path) -> None:
    import getpass

    user = getpass.getuser()
    tmp = tmp_path / "t"
    tmp.mkdir()
    assert cc.cache_roots({"TMPDIR": str(tmp)}) == [tmp / f"torchinductor_{user}"]
    own = tmp_path / "mine"
    roots = cc.cache_roots(
        {"TMPDIR": str(tmp), "TORCHINDUCTOR_CACHE_DIR": str(own), "TRITON_CACHE_DIR": str(own / "tr")}
    )
    # the user's dir is respected; the default stays (precompiled headers live there whatever the variable says)
    assert roots == [own, tmp / f"torchinductor_{user}", own / "tr"]
    (own / "triton" / "0").mkdir(parents=True)  # triton's cache under inductor's, per device, when not moved
    assert cc.cache_roots({"TMPDIR": str(tmp), "TORCHINDUCTOR_CACHE_DIR": str(own)})[2:] == [own / "triton" / "0"]


def test_cache_roots_match_inductor_in_a_process_with_that_environment(tmp_path: Path) -> None:
    import subprocess

    code = (
        "from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir;"
        "print(cache_dir()); print(default_cache_dir())"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert [Path(line) for line in out.stdout.split()] == 2 * cc.cache_roots(env)[:1]


def test_clean_env_is_private_and_empty(tmp_path: Path) -> None:
    env = cc.clean_env(tmp_path / "scratch")
    assert set(env) == {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TMPDIR"}
    for v in env.values():
        assert Path(v).is_dir() and Path(v).is_relative_to(tmp_path / "scratch") and not any(Path(v).iterdir())
    assert cc.cache_roots(env)[0] == tmp_path / "scratch" / "inductor"


def test_drop_headers_spares_a_header_being_written(tmp_path: Path) -> None:
    d = tmp_path / "ind" / "precompiled_headers"
    (d / "locks").mkdir(parents=True)
    for key in ("ca", "cb"):
        (d / f"{key}.h.gch").write_bytes(b"gpch+014" + bytes(8))
        (d / "locks" / f"{key}.lock").touch()
    fd = os.open(d / "locks" / "cb.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        out = cc.drop_headers([tmp_path / "ind"])
    finally:
        os.close(fd)
    assert len(out) == 1 and "ca.h.gch" in out[0]
    assert not (d / "ca.h.gch").exists() and (d / "cb.h.gch").exists()


def test_a_sweep_never_raises_on_a_cache_it_cannot_write(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    path = _cache_with(tmp_path, b"")
    os.chmod(path.parent, 0o500)
    try:
        rep = cc.sweep_quietly([tmp_path / "ind"])
        assert rep is not None and not rep.quarantined and path.exists()
    finally:
        os.chmod(path.parent, 0o700)
        shutil.rmtree(tmp_path / "ind")


def test_where_compilers_write_is_walked_and_pickle_trees_are_not(tmp_path: Path) -> None:
    root = tmp_path / "ind"
    aoti = root / "ab" / "cabwrapperkey" / "cabwrapperkey.so"  # an AOTInductor library, one level deeper
    pickled = root / "fxgraph" / "ab" / "fabkey" / "odd.so"  # no compiler writes in inductor's pickle trees
    for p in (aoti, pickled):
        p.parent.mkdir(parents=True)
        p.write_bytes(b"")
        old = time.time() - cc.ORPHAN_AGE_S - 5
        os.utime(p, (old, old))
    rep = cc.sweep([root], everything=True)
    assert [p for p, _ in rep.quarantined] == [str(aoti)] and pickled.exists()


def test_a_file_a_case_met_needs_no_age_only_a_free_lock(tmp_path: Path) -> None:
    """The second object of a two-step build is written under the first one's lock (no lock file of its own):
    named in a case's error (the case took that lock before trusting the file), it is set aside at once."""
    obj = _cache_with(tmp_path, b"\x7fELF" + bytes(60), "cother.optimized.o", lock=False)
    assert cc.quarantine(obj) is None and obj.exists()  # young, no lock: a sweep may not prove it orphaned
    assert cc.quarantine(obj, met=True) is not None and not obj.exists()
    held = _cache_with(tmp_path, b"", "cheld.main.so")
    fd = os.open(tmp_path / "ind" / "locks" / "cheld.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert cc.quarantine(held, met=True) is None and held.exists()  # someone is rebuilding it right now
    finally:
        os.close(fd)
