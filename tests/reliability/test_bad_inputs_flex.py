"""`bringup flex` with bad input: one line on stderr, exit 2, no traceback, no run started.

Most cases call the CLI's main() in this process (same code path, a second each instead of a torch
import each); two go through a real subprocess to prove the process-level contract too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_main

FILES = {
    "broken.yaml": "mods: [causal\nbatch: 1\n",
    "truncated.json": '{"mods": ["causal"], "batch": [1, 4',
    "unknown_key.yaml": "mods: causal\nsequence: 128\n",
    "bad_heads.yaml": "mods: causal\nheads: [[16, 3]]\n",
    "bad_seq.yaml": "mods: causal\nseq: [128, -1]\n",
    "scalar.yaml": "just a string\n",
    "empty.yaml": "",
    "unknown_mod.yaml": "mods: [causal, flash]\n",
    "mods.py": (
        "from bringup.flex.mods import FlexMod\n"
        "def returns_int(shape, device):\n    return 3\n"
        "def raises(shape, device):\n    raise RuntimeError('boom')\n"
        "NOT_CALLABLE = 5\n"
    ),
    "import_error.py": "import no_such_module_for_flex_tests\n",
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--matrix", "broken.yaml"], "not valid YAML"),
        (["--matrix", "truncated.json"], "not valid JSON"),
        (["--matrix", "unknown_key.yaml"], "unknown key(s) sequence"),
        (["--matrix", "bad_heads.yaml"], "not a multiple of kv_heads"),
        (["--matrix", "bad_seq.yaml"], "expected a positive integer, got -1"),
        (["--matrix", "scalar.yaml"], "expected a mapping"),
        (["--matrix", "empty.yaml"], "expected a mapping"),
        (["--matrix", "unknown_mod.yaml"], "unknown mod 'flash'"),
        (["--matrix", "no_such_file.yaml"], "no such file"),
        (["--matrix", "quick", "--mods", "causal,flash"], "unknown mod 'flash'"),
        (["--matrix", "quick", "--compile-budget", "0"], "--compile-budget: expected a positive number"),
        (["--matrix", "quick", "--compile-budget", "-1"], "--compile-budget: expected a positive number"),
        (["--matrix", "quick", "--compile-budget", "abc"], "--compile-budget: expected a positive number"),
        (["--matrix", "quick", "--budget", "9"], "--budget is no longer accepted here: use --compile-budget"),
        (["--matrix", "quick", "--dtype", "fp8"], "unknown dtype"),
        (["--matrix", "quick", "--dtype", "fp64"], "unknown dtype 'fp64'; use one of fp32, bf16, fp16, amp-bf16"),
        (["--matrix", "quick", "--backward", "sometimes"], "--backward: expected auto, on or off"),
        (["--matrix", "quick", "--compile-backend", "no_such_backend"], "--compile-backend 'no_such_backend'"),
        (["--matrix", "quick", "--backend", "inductor"], "--backend is no longer accepted here: use --compile-backend"),
        (["--matrix", "quick", "--mods", "no_such_module_xyz:fn"], "importing no_such_module_xyz failed"),
        (["--matrix", "quick", "--mods", "mods.py:missing"], "has no attribute 'missing'"),
        (["--matrix", "quick", "--mods", "mods.py:NOT_CALLABLE"], "is not callable"),
        (["--matrix", "quick", "--mods", "mods.py:returns_int"], "returned int, not"),
        (["--matrix", "quick", "--mods", "mods.py:raises"], "RuntimeError: boom"),
        (["--matrix", "quick", "--mods", "import_error.py:fn"], "no module named"),
        (["--matrix", "quick", "--mods", "nofile.py:fn"], "no such file"),
        (["--matrix", "quick", "--mods", "mods.py:"], "bad user mod"),
    ],
)
def test_bad_flex_input(files: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    p = run_main(["--device", "cpu", "flex", *args], capsys)
    assert_one_line_error(p, needle)
    assert not (files / "bringup-results").exists()  # nothing was started or written


@pytest.mark.parametrize(
    ("args", "needle"), [(["--matrix", "truncated.json"], "not valid JSON"), (["--budget", "-1"], "--budget")]
)
def test_bad_flex_input_real_process(cli, files: Path, args: list[str], needle: str) -> None:
    assert_one_line_error(cli("--device", "cpu", "flex", *args, timeout=300), needle)
    assert not (files / "bringup-results").exists()
