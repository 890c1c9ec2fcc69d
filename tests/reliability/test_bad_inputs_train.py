"""`bringup train` with bad input: one line on stderr, exit 2, no traceback, no run started."""

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
        (["--budget", "-1"], "argument --budget"),  # the old spelling
        (["--case-budget", "0"], "argument --case-budget"),
        (["--compile-backend", "no_such_backend"], "unknown --compile-backend"),
        (["--flops-only", "--nproc", "2"], "--flops-only trains nothing: drop --nproc"),
        (["--flops-only", "--modes", "compile", "--steps", "3"], "drop --modes, --steps"),
    ],
)  # fmt: skip
def test_bad_train_options(cli, tmp_path: Path, args: list[str], needle: str) -> None:
    assert_one_line_error(cli("--device", "cpu", "train", *args, timeout=300), needle)
    assert not (tmp_path / "bringup-results").exists()  # no run was started


def test_bad_config_json(cli, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    assert_one_line_error(cli("--device", "cpu", "train", "--model", "bad.json", timeout=300), "not valid JSON")
    (tmp_path / "nomt.json").write_text('{"hidden_size": 8}')
    assert_one_line_error(cli("--device", "cpu", "train", "--model", "nomt.json", timeout=300), "model_type")
    assert not (tmp_path / "bringup-results").exists()


def test_json_output_in_missing_dir(cli, tmp_path: Path) -> None:
    p = cli("--device", "cpu", "train", "--flops-only", "--json", "nowhere/out.json", timeout=300)
    assert_one_line_error(p, "does not exist")
    assert not (tmp_path / "bringup-results").exists()
