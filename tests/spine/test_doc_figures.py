"""No hand-written timing in README.md or docs/: every time and speed-up comes from a committed bench row
(bench/results/figures/*.jsonl) through a marker that docs/figures/render.py fills (`make docs`).

The repository's docs agree with their rows; a changed row makes its markers stale (named by file and line);
a time or a speed-up written outside a marker is caught, and the few allowed phrases (bounds, settings, factors)
each still allow something in the docs; a row measured on a loaded or another machine must say so where it is
shown; a malformed row is refused; bench/time_command.py appends a row the renderer takes.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fr() -> ModuleType:
    return _module("doc_figures_render", REPO / "docs" / "figures" / "render.py")


def _row(**kw: Any) -> dict[str, Any]:
    row = {
        "id": "demo.x",
        "what": "a demo",
        "values": {"wall": [207, "s"], "ratio": [10.2, "x"]},
        "text": "{wall} s, **{ratio}x**",
        "date": "2026-11-29",
        "machine": "this project's 2-core cpu machine",
        "conditions": "quiet",
        "label": None,
        "command": "make demo",
        "commit": None,
        "raw": None,
        "source": "a test",
    }
    return {**row, **kw}


def _repo(tmp: Path, readme: str, rows: list[dict[str, Any]], docs: dict[str, str] | None = None) -> Path:
    (tmp / "docs").mkdir(parents=True, exist_ok=True)
    (tmp / "bench" / "results" / "figures").mkdir(parents=True, exist_ok=True)
    (tmp / "README.md").write_text(readme)
    for name, text in (docs or {}).items():
        (tmp / "docs" / name).write_text(text)
    lines = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp / "bench" / "results" / "figures" / "demo.jsonl").write_text(lines)
    return tmp


def test_the_docs_agree_with_their_rows(fr: ModuleType) -> None:
    problems = fr.check(REPO)
    assert not problems, "\n".join(map(str, problems)) + "\nrun `make docs`, or put the figure in a row"


def test_every_row_is_valid_and_listed(fr: ModuleType) -> None:
    rows = fr.load_rows()
    assert len(rows) > 50  # the docs' figures, not a token few
    listed = (REPO / "docs" / "figures.md").read_text()
    for fid, rs in rows.items():
        assert f"`{fid}`" in listed, f"{fid} is not in docs/figures.md's table: run `make docs`"
        for r in rs:
            fr.render_text(r)  # its own sentence renders from its own values


def test_a_changed_row_makes_its_marker_stale(fr: ModuleType, tmp_path: Path) -> None:
    readme = "# t\n\nDemo: <!-- fig demo.x -->207 s, **10.2x**<!-- /fig -->; "
    readme += "<!-- fig demo.x: {wall:dur} -->3 min 27 s<!-- /fig -->\n"
    repo = _repo(tmp_path, readme, [_row()])
    assert fr.check(repo) == []
    _repo(tmp_path, readme, [_row(), _row(date="2026-12-05", values={"wall": [199, "s"], "ratio": [9.9, "x"]})])
    problems = fr.check(repo)
    assert len(problems) == 1 and problems[0].where == "README.md:3" and "stale figure" in problems[0].what
    assert "207 s" in problems[0].what and "199 s" in problems[0].what
    assert fr.write(repo) == []  # `make docs` takes the newest row ...
    assert (repo / "README.md").read_text() == readme.replace("207 s, **10.2x**", "199 s, **9.9x**").replace(
        "3 min 27 s", "3 min 19 s"
    )
    assert fr.check(repo) == []  # ... and the check agrees


def test_a_block_marker_renders_a_table(fr: ModuleType, tmp_path: Path) -> None:
    table = "| arm | s |\n| --- | --- |\n| cold | {wall} |"
    readme = f"# t\n\n<!-- fig demo.x:\n{table}\n-->\n| arm | s |\n| --- | --- |\n| cold | 201 |\n<!-- /fig -->\n"
    repo = _repo(tmp_path, readme, [_row()])
    problems = fr.check(repo)
    assert [p.where for p in problems] == ["README.md:10"] and "'| cold | 207 |'" in problems[0].what
    assert fr.write(repo) == []
    assert "| cold | 207 |\n<!-- /fig -->" in (repo / "README.md").read_text()
    assert fr.check(repo) == []


def test_unknown_ids_bad_templates_and_open_markers_are_named(fr: ModuleType, tmp_path: Path) -> None:
    readme = (
        "# t\n\n<!-- fig demo.nope -->1<!-- /fig -->\n<!-- fig demo.x: {nope} s -->1<!-- /fig -->\n"
        "<!-- fig demo.x -->207 s, **10.2x**\n"
    )
    problems = fr.check(_repo(tmp_path, readme, [_row()]))
    whats = [f"{p.where} {p.what}" for p in problems]
    assert any(w.startswith("README.md:3 ") and "no row" in w for w in whats)
    assert any(w.startswith("README.md:4 ") and "no value 'nope'" in w for w in whats)
    assert any(w.startswith("README.md:5 ") and "without its" in w for w in whats)


@pytest.mark.parametrize(
    "sentence",
    [
        "`make demo` takes 3.5 minutes cold.",
        "It took 207 s here.",
        "The artifact starts **10.2x** sooner.",
        "make test 16:04 and 17:01.",
        "| the test suite | 15 min 36 s |",
        "a 2-5 s import",
    ],
)
def test_a_hand_written_timing_is_caught(fr: ModuleType, sentence: str) -> None:
    assert fr.scan_lines(["# t", "", sentence]), sentence


@pytest.mark.parametrize(
    "sentence",
    [
        "Demo: <!-- fig demo.x -->207 s<!-- /fig -->.",  # in a marker
        "the budget is `--case-budget 600` or `600 s`",  # inline code
        "`--case-budget SEC` (default 3600 s)",  # a setting
        "goal >= 10x, and < 20 min",  # bounds
        "a fault 3x the trusted noise; gelu taken at 1.02x",  # factors, not speed-ups
        "2026-12-02 00:38, and 06:05 UTC",  # times of day
        "a 4096x4096 GEMM, 2 x 128 tokens, 429s and 503s, 5xx",  # not durations
    ],
)
def test_what_is_not_a_hand_written_timing(fr: ModuleType, sentence: str) -> None:
    assert fr.scan_lines(["# t", "", sentence]) == [], sentence


def test_code_blocks_are_read_unless_marked_as_example_output(fr: ModuleType) -> None:
    block = ["```", "fast start: eager reaches step 1 in 7.39 s (22.2x sooner)", "```"]
    assert [n for n, _ in fr.scan_lines(["# t", "", *block])] == [4, 4]
    assert fr.scan_lines(["# t", "", fr.EXAMPLE_OUTPUT, *block]) == []


def test_every_allowed_phrase_still_allows_something(fr: ModuleType) -> None:
    text = "\n".join(fr._strip(line) for p in fr.docs() for line in p.read_text().split("\n"))
    for pattern, why in fr.ALLOW:
        assert re.search(pattern, text), f"ALLOW entry no doc needs any more ({why}): {pattern}"


def test_a_figure_from_a_loaded_machine_says_so(fr: ModuleType, tmp_path: Path) -> None:
    loaded = _row(conditions="shared with another session", label="load 7-8")
    readme = "# t\n\n## Figures\n\nPlanning: <!-- fig demo.x: {wall} s -->207 s<!-- /fig -->.\n"
    problems = fr.check(_repo(tmp_path, readme, [loaded]))
    assert len(problems) == 1 and "must say so" in problems[0].what and "load 7-8" in problems[0].what
    assert fr.check(_repo(tmp_path, readme.replace("## Figures", "## Figures (load 7-8)"), [loaded])) == []
    labelled = readme.replace("{wall} s -->207 s", "{wall} s at {label} -->207 s at load 7-8")
    assert fr.check(_repo(tmp_path, labelled, [loaded])) == []
    with pytest.raises(fr.FigureError, match="needs a label"):  # and a row cannot leave its label out
        fr._check_row(_row(conditions="loaded"), "x", tmp_path)
    with pytest.raises(fr.FigureError, match="needs a label"):
        fr._check_row(_row(machine="one H200"), "x", tmp_path)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"date": "yesterday"}, "YYYY-MM-DD"),
        ({"values": {"wall": [207]}}, "must be \\[number"),
        ({"values": {"wall": ["207", "s"]}}, "must be \\[number"),
        ({"values": {}}, "at least one"),
        ({"command": ""}, "command must be"),
        ({"raw": "bench/results/nowhere.jsonl"}, "not in the repository"),
        ({"id": "Demo X"}, "lower-case"),
    ],
)
def test_a_malformed_row_is_refused(fr: ModuleType, tmp_path: Path, change: dict[str, Any], match: str) -> None:
    with pytest.raises(fr.FigureError, match=match):
        fr._check_row(_row(**change), "x", tmp_path)
    with pytest.raises(fr.FigureError, match="missing"):
        fr._check_row({k: v for k, v in _row().items() if k != "source"}, "x", tmp_path)


def test_check_exits_1_naming_the_problem(fr: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path, "# t\n\nIt takes 3.5 minutes.\n", [_row()])
    assert fr.main(["--check", "--repo", str(repo)]) == 1
    err = capsys.readouterr().err
    assert "README.md:3" in err and "3.5 minutes" in err and "make docs" in err
    assert fr.main(["--check", "--repo", str(_repo(tmp_path, "# t\n", [_row()]))]) == 0


def test_time_command_appends_a_row_the_docs_take(fr: ModuleType, tmp_path: Path) -> None:
    repo = _repo(
        tmp_path / "repo",
        "# t\n\n<!-- fig demo.x: {wall} s {where} -->207 s on 2 quiet cpu cores<!-- /fig -->\n",
        [_row()],
    )
    rows = repo / "bench" / "results" / "figures"
    tc = [sys.executable, str(REPO / "bench" / "time_command.py"), "--rows-dir", str(rows), "--quiet-load", "1000"]
    p = subprocess.run([*tc, "--id", "demo.x", "--", sys.executable, "-c", "pass"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    new = json.loads((rows / "demo.jsonl").read_text().splitlines()[-1])
    assert new["id"] == "demo.x" and new["text"] == _row()["text"] and new["values"]["wall"][1] == "s"
    assert new["command"] == f"{sys.executable} -c pass" and new["commit"]
    fr._check_row(new, "new", repo)
    assert fr.write(repo) == []  # the doc follows the new row
    assert f"{new['values']['wall'][0]} s" in (repo / "README.md").read_text()
    # a failed run is not a figure; a new id needs its sentence
    p = subprocess.run([*tc, "--id", "demo.x", "--", sys.executable, "-c", "raise SystemExit(3)"], capture_output=True)
    assert p.returncode == 1 and len((rows / "demo.jsonl").read_text().splitlines()) == 2
    p = subprocess.run([*tc, "--id", "demo.new", "--", "true"], capture_output=True, text=True)
    assert p.returncode == 2 and "--what and --text" in p.stderr
    shutil.rmtree(repo)
