"""`bringup train` with bad input: one line on stderr, exit 2, no traceback, no run started.

The cases run the real `bringup.cli.main` in this process (tests/conftest.py: bringup_inproc); one goes
through a real subprocess too (the process-level contract: exit code, stderr)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "qwen3-huge"], "unknown model 'qwen3-huge'"),
        (["--model", "no_such_module_xyz:build"], "no module named"),
        (["--model", "missing.json"], "does not exist"),
        (["--override", "num_key_value_heads=3"], "multiple of num_key_value_heads"),
        (["--override", "hidden_size"], "expected KEY=VALUE"),
        (["--override", "num_hidden_layers=-1"], "num_hidden_layers must be positive"),
        (["--modes", "eager,turbo"], "bad --modes"),
        (["--steps", "0"], "--steps"),
        (["--steps", "2", "--warmup", "2"], "must be more than --warmup"),
        (["--nproc", "0"], "--nproc"),
        (["--dtype", "fp8"], "unknown dtype"),
        (["--cache", "lukewarm"], "--cache"),
        (["--compile-budget", "-1"], "argument --compile-budget"),
        (["--budget", "9"], "--budget is no longer accepted here: use --compile-budget"),  # the old spelling
        (["--case-budget", "0"], "argument --case-budget"),
        (["--compile-backend", "no_such_backend"], "unknown --compile-backend"),
        (["--flops-only", "--nproc", "2"], "--flops-only trains nothing: drop --nproc"),
        (["--flops-only", "--modes", "compile", "--steps", "3"], "drop --modes, --steps"),
    ],
)
def test_bad_train_options(bringup_inproc, tmp_path: Path, args: list[str], needle: str) -> None:
    assert_one_line_error(bringup_inproc("--device", "cpu", "train", *args), needle)
    assert not (tmp_path / "bringup-results").exists()  # no run was started


def test_bad_train_option_real_process(cli, tmp_path: Path) -> None:
    assert_one_line_error(cli("--device", "cpu", "train", "--model", "qwen3-huge", timeout=300), "unknown model")
    assert not (tmp_path / "bringup-results").exists()


def test_bad_config_json(bringup_inproc, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    assert_one_line_error(bringup_inproc("--device", "cpu", "train", "--model", "bad.json"), "not valid JSON")
    (tmp_path / "nomt.json").write_text('{"hidden_size": 8}')
    assert_one_line_error(bringup_inproc("--device", "cpu", "train", "--model", "nomt.json"), "model_type")
    assert not (tmp_path / "bringup-results").exists()


def test_json_output_in_missing_dir(bringup_inproc, tmp_path: Path) -> None:
    p = bringup_inproc("--device", "cpu", "train", "--flops-only", "--json", "nowhere/out.json")
    assert_one_line_error(p, "does not exist")
    assert not (tmp_path / "bringup-results").exists()
