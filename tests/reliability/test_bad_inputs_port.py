"""`bringup port` bad input: one line on stderr, exit 2, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error


def test_missing_path(cli, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    assert_one_line_error(cli("port", "a.py", "nope.py"), "nope.py: no such file")


def test_broken_symlink(cli, tmp_path: Path) -> None:
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    assert_one_line_error(cli("port", "dangling.py"), "broken symlink")


def test_no_path(cli) -> None:
    assert_one_line_error(cli("port"), "")


@pytest.mark.parametrize("codes", ["BU999", "BU101,XYZ", ","])
def test_bad_select(cli, tmp_path: Path, codes: str) -> None:
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    p = cli("port", "a.py", "--fix", "--select", codes)
    assert_one_line_error(p, "--select")
    assert (tmp_path / "a.py").read_text() == "import torch\nx = torch.zeros(1).cuda()\n"  # nothing fixed


def test_json_into_missing_dir(cli, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    assert_one_line_error(cli("port", "a.py", "--fix", "--json", "no/such/dir/out.json"), "does not exist")
    assert ".cuda()" in (tmp_path / "a.py").read_text()  # refused before any work


def test_json_is_a_directory(cli, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "out").mkdir()
    assert_one_line_error(cli("port", "a.py", "--json", "out"), "is a directory")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can write anywhere")
def test_json_dir_not_writable(cli, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert_one_line_error(cli("port", "a.py", "--json", "ro/out.json"), "not writable")
    finally:
        ro.chmod(0o700)
