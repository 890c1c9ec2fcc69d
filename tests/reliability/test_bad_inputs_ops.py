"""`bringup ops` / `bringup probe` with bad input: one line on stderr, exit 2, no traceback, no run.

Each case runs the real `bringup.cli.main` in this process (tests/conftest.py: bringup_inproc; ~3 s of
interpreter and torch start-up saved a case); one per command goes through a real subprocess too, to
prove the process-level contract (exit code, stderr)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["ops", "--filter", "(add"], "argument --filter: bad regex '(add'"),
        (["ops", "--filter", "^no_such_op_xyz$"], "matches no OpInfo"),
        (["ops", "--dtypes", "float33"], "unknown dtype 'float33'"),
        (["ops", "--dtypes", " , "], "--dtypes is empty"),
        (["ops", "--samples", "0"], "argument --samples: expected a positive integer"),
        (["ops", "--samples", "many"], "--samples"),
        (["ops", "--case-budget", "0"], "argument --case-budget: expected a positive number of seconds"),
        (["ops", "--budget", "0"], "--budget is no longer accepted here: use --case-budget"),  # the old spelling
        (["probe", "--filter", "[x"], "argument --filter: bad regex"),
        (["probe", "--only", "[x"], "--only is no longer accepted here: use --filter"),  # the old spelling
        (["probe", "--filter", "^warp_drive$"], "--filter '^warp_drive$' matches no feature"),
        (["probe", "--case-budget", "nan"], "argument --case-budget"),
        (["probe", "--compile-backends", "inductor,no_such_backend"], "torch.compile backend 'no_such_backend'"),
    ],
)
def test_bad_ops_and_probe_options(bringup_inproc, tmp_path: Path, args: list[str], needle: str) -> None:
    assert_one_line_error(bringup_inproc("--device", "cpu", *args), needle)
    assert not (tmp_path / "bringup-results").exists()  # no run was started


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["ops", "--dtypes", "float33"], "unknown dtype 'float33'"), (["probe", "--filter", "[x"], "bad regex")],
)
def test_bad_ops_and_probe_options_real_process(cli, tmp_path: Path, args: list[str], needle: str) -> None:
    assert_one_line_error(cli("--device", "cpu", *args, timeout=300), needle)
    assert not (tmp_path / "bringup-results").exists()


def test_testdev_index_out_of_range(cli, tmp_path: Path) -> None:
    """The plugin loads, but testdev:3 does not exist (one device unless BRINGUP_TESTDEV_DEVICES)."""
    p = cli("--import", "bringup.testdev", "--device", "testdev:3", "ops", "--filter", "^add$", timeout=900)
    assert_one_line_error(p, "does not exist")
