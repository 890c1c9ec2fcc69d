"""`bringup port` end to end: the real CLI, real files, real writes. `port` touches no device: most calls run
in process (bringup_inproc, the same `bringup.cli.main`); the first of the first two tests is a real subprocess."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.errors import BadInput
from bringup.port import PortReport, scan

FIXTURES = Path(__file__).parent / "fixtures"
LINE = re.compile(
    r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+) (?P<code>BU\d{3}) (?P<msg>.+) \[(?P<kind>fixable|manual)\]$"
)
CUDA_SNIPPET = "import torch\n\nx = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\ntorch.cuda.manual_seed(0)\n"


def _finding_lines(out: str) -> list[re.Match[str]]:
    return [m for m in map(LINE.match, out.splitlines()) if m]


def test_training_script_runs_on_cpu_after_fix(cli, bringup_inproc, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    shutil.copytree(FIXTURES / "train", proj)
    script = proj / "train_cuda.py"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    run = lambda: subprocess.run(
        [sys.executable, str(script), "--steps", "3"], capture_output=True, text=True, env=env, timeout=600
    )
    before = run()  # the test can fail: unported, the script does not run without CUDA
    assert before.returncode != 0 and "TRAINING DONE" not in before.stdout

    p = cli("port", "proj", "--fix", "--json", "port.json")
    assert p.returncode == 1, p.stdout + p.stderr  # manual findings remain
    data = json.loads((tmp_path / "port.json").read_text())
    assert set(data) == {"findings", "summary"}
    remaining = {f["code"] for f in data["findings"]}
    assert remaining == {"BU113", "BU114", "BU130"}, data["findings"]
    assert not any(f["fixable"] for f in data["findings"])
    assert data["summary"]["fixed"] >= 12 and data["summary"]["files_changed"] == 1
    assert "fixed" in p.stdout

    after = run()
    assert after.returncode == 0, after.stdout[-2000:] + after.stderr[-3000:]
    assert "TRAINING DONE" in after.stdout and "step 2 loss" in after.stdout

    # A CUDA build of torch with no GPU (the default wheel on a GPU-less Linux box): `current_accelerator()`
    # names cuda there, so the ported code must ask whether it is available (check_available=True).
    fake = [
        sys.executable,
        "-c",
        "import sys, runpy, fake_cuda_build; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
        str(script),
        "--steps",
        "3",
    ]
    plugin_dir = str(Path(__file__).parents[1] / "spine")  # tests/spine/fake_cuda_build.py
    fake_env = {**env, "PYTHONPATH": os.pathsep.join([plugin_dir, env.get("PYTHONPATH", "")])}
    cuda_build = subprocess.run(fake, capture_output=True, text=True, env=fake_env, timeout=600)
    assert cuda_build.returncode == 0, cuda_build.stdout[-2000:] + cuda_build.stderr[-3000:]
    assert "TRAINING DONE" in cuda_build.stdout

    fixed = script.read_bytes()
    again = bringup_inproc("port", "proj", "--fix")
    assert again.returncode == 1 and "fixed 0 construct(s) in 0 file(s)" in again.stdout
    assert script.read_bytes() == fixed  # idempotent on disk


def test_output_format_summary_and_exit_codes(cli, bringup_inproc, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(CUDA_SNIPPET)
    (tmp_path / "clean.py").write_text("import torch\nx = torch.zeros(2)\n")
    p = cli("port", "a.py")
    assert p.returncode == 1
    found = _finding_lines(p.stdout)
    assert [(m["file"], m["line"], m["col"], m["code"], m["kind"]) for m in found] == [
        ("a.py", "3", "20", "BU101", "fixable"),
        ("a.py", "4", "1", "BU110", "fixable"),
        ("a.py", "5", "1", "BU113", "manual"),
    ]
    assert "summary by rule:" in p.stdout and re.search(r"BU101\s+1\s+\(1 fixable\)", p.stdout)
    assert "1 file(s) scanned, 3 finding(s), 2 fixable, 1 manual" in p.stdout
    clean = bringup_inproc("port", "clean.py")
    assert clean.returncode == 0 and not _finding_lines(clean.stdout)
    sel = bringup_inproc("port", "a.py", "--select", "bu11")
    assert sel.returncode == 1 and {m["code"] for m in _finding_lines(sel.stdout)} == {"BU110", "BU113"}


def test_diff_writes_nothing(bringup_inproc, tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text(CUDA_SNIPPET)
    before = f.stat().st_mtime_ns
    p = bringup_inproc("port", "a.py", "--diff")
    assert p.returncode == 1
    assert "--- a/a.py" in p.stdout and "+++ b/a.py" in p.stdout
    assert "-x = torch.zeros(2).cuda()" in p.stdout and "+x = torch.zeros(2).to(DEVICE)" in p.stdout
    assert f.read_text() == CUDA_SNIPPET and f.stat().st_mtime_ns == before
    assert sorted(x.name for x in tmp_path.iterdir() if x.name != "bringup-results") == ["a.py"]


def test_unparsable_file_left_byte_identical(bringup_inproc, tmp_path: Path) -> None:
    bad = tmp_path / "src" / "bad.py"
    bad.parent.mkdir()
    raw = b"import torch\r\nx = torch.zeros(1).cuda(\n  # unclosed, and \xff not utf-8\n"
    bad.write_bytes(raw)
    (tmp_path / "src" / "good.py").write_text(CUDA_SNIPPET)
    p = bringup_inproc("port", "src", "--fix", "--json", "out.json")
    assert p.returncode == 1
    assert bad.read_bytes() == raw
    data = json.loads((tmp_path / "out.json").read_text())
    errs = [f for f in data["findings"] if f["code"] == "BU000"]
    assert len(errs) == 1 and errs[0]["file"] == "src/bad.py" and not errs[0]["fixable"]
    assert data["summary"]["parse_errors"] == 1
    assert ".to(DEVICE)" in (tmp_path / "src" / "good.py").read_text()


def test_writes_stay_inside_the_given_paths(bringup_inproc, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "lib.py"
    target.write_text(CUDA_SNIPPET)
    (outside / "deep.py").write_text(CUDA_SNIPPET)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "link.py").symlink_to(target)  # a file symlink pointing outside
    (proj / "linkdir").symlink_to(outside, target_is_directory=True)  # not followed at all
    own = proj / "own.py"
    own.write_text(CUDA_SNIPPET)
    os.chmod(own, 0o640)
    p = bringup_inproc("port", "proj", "--fix")
    assert target.read_text() == CUDA_SNIPPET and (outside / "deep.py").read_text() == CUDA_SNIPPET
    assert (proj / "link.py").is_symlink()
    assert "not fixed: proj/link.py: is a symlink" in p.stderr
    assert "proj/linkdir" not in p.stdout
    assert ".to(DEVICE)" in own.read_text() and stat.S_IMODE(own.stat().st_mode) == 0o640
    assert not [x for x in proj.iterdir() if x.name.endswith(".tmp")]  # atomic write left no temp file


def test_scan_api(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(CUDA_SNIPPET)
    rep = scan([str(tmp_path)])
    assert isinstance(rep, PortReport)
    js = rep.to_json()
    assert set(js) == {"findings", "summary"}
    assert set(js["findings"][0]) == {"file", "line", "col", "code", "message", "fixable"}
    assert js["summary"]["findings"] == 3 and js["summary"]["by_code"] == {"BU101": 1, "BU110": 1, "BU113": 1}
    assert (tmp_path / "a.py").read_text() == CUDA_SNIPPET  # scan never writes
    assert [f.code for f in scan([str(tmp_path)], select={"BU113"}).findings] == ["BU113"]
    with pytest.raises(BadInput):
        scan([str(tmp_path / "missing")])
    with pytest.raises(BadInput):
        scan([str(tmp_path)], select={"BU999"})


def test_bringup_itself_is_clean() -> None:
    """The charter: bringup/ passes its own port lint, every rule included: no torch.cuda.*, no .cuda(),
    no "cuda" device logic (deliberate exceptions, like Ray's CUDA-only GPU resource, say `# cuda-ok`)."""
    rep = scan([str(Path(__file__).resolve().parents[2] / "bringup")])
    assert rep.findings == [], [f.line_text() for f in rep.findings]
