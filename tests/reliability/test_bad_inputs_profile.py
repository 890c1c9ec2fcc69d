"""`bringup profile` with bad input: one line on stderr, exit 2, no traceback, nothing written.

The cases run the real `bringup.cli.main` in this process (tests/conftest.py: bringup_inproc); one goes
through a real subprocess too (the process-level contract: exit code, stderr)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--steps", "0"], "--steps"),
        (["--mode", "turbo"], "unknown --mode 'turbo'"),
        (["--mode", "compile", "--untraced-steps", "0"], "--untraced-steps >= 1"),
        (["--model", "qwen3-huge"], "unknown model 'qwen3-huge'"),
        (["--model", "no_such_module_xyz:build"], "no module named"),
        (["--override", "num_hidden_layers=-1"], "num_hidden_layers must be positive"),
        (["--dtype", "fp8"], "unknown dtype"),
        (["--mode", "compile", "--compile-backend", "no_such_backend"], "unknown --compile-backend"),  # was a crash
        (["--backend", "inductor"], "--backend is no longer accepted here: use --compile-backend"),
        (["--steps", "2"], "--steps is no longer accepted here: use --traced-steps"),  # not train's --steps
        (["--warmup", "1"], "--warmup is no longer accepted here: use --untraced-steps"),
    ],
)
def test_bad_profile_options(bringup_inproc, tmp_path: Path, args: list[str], needle: str) -> None:
    assert_one_line_error(bringup_inproc("--device", "cpu", "profile", *args), needle)
    assert not (tmp_path / "bringup-results").exists()  # no run was started


def test_out_is_a_file(cli, bringup_inproc, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert_one_line_error(cli("--device", "cpu", "profile", "--out", "f", timeout=300), "not a directory")  # real
    assert_one_line_error(bringup_inproc("--device", "cpu", "profile", "--out", "f/sub"), "cannot create")
    assert (tmp_path / "f").read_text() == "x"
    assert not (tmp_path / "bringup-results").exists()


def test_out_under_proc_fails_before_any_work(bringup_inproc, tmp_path: Path) -> None:
    """Root passes os.access everywhere: only a real write shows that /proc takes no new directory."""
    assert_one_line_error(bringup_inproc("--device", "cpu", "profile", "--out", "/proc/nope"), "cannot write")
    assert not (tmp_path / "bringup-results").exists()  # no run was started


def test_out_is_not_writable(bringup_inproc, tmp_path: Path) -> None:
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        assert_one_line_error(bringup_inproc("--device", "cpu", "profile", "--out", "ro"), "cannot write")
        assert_one_line_error(bringup_inproc("--device", "cpu", "profile", "--out", "ro/new"), "cannot write")
    finally:
        ro.chmod(0o755)
