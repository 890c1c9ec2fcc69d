"""The sample scorecard (README's abridged block, docs/sample.md's whole one) is what docs/sample/render.py
renders from the committed real run's bundle.

A hand edit of a block, a new bundle without `make docs`, or a change to a suite's printed table fails
here, naming the first differing line. The render reads the bundle only: a perturbed bundle renders a
different block.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO


def _render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_sample_render", REPO / "docs" / "sample" / "render.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def render() -> ModuleType:
    return _render_module()


@pytest.fixture(scope="module")
def rendered(render: ModuleType) -> str:
    return render.render(abridged=True)


@pytest.fixture(scope="module")
def rendered_full(render: ModuleType) -> str:
    return render.render()


def test_readme_sample_block_is_rendered_from_the_bundle(render: ModuleType, rendered: str) -> None:
    _, block, _ = render.split((REPO / "README.md").read_text(), render.BEGIN_ABRIDGED)
    diff = render.first_difference(block, rendered)
    assert diff is None, f"README.md's sample is stale: {diff}; run `make docs`"


def test_docs_sample_block_is_the_whole_render(render: ModuleType, rendered: str, rendered_full: str) -> None:
    _, block, _ = render.split((REPO / "docs" / "sample.md").read_text(), render.BEGIN)
    diff = render.first_difference(block, rendered_full)
    assert diff is None, f"docs/sample.md's sample is stale: {diff}; run `make docs`"
    # README's is the same run abridged: every one of its lines but the header is in the whole one
    assert set(rendered.splitlines()[1:]) <= set(rendered_full.splitlines())
    assert len(rendered.splitlines()) < len(rendered_full.splitlines()) / 2


def test_sample_states_the_bundles_counts(render: ModuleType, rendered: str) -> None:
    data = json.loads(render.BUNDLE.read_text())
    n = len(data["cases"])
    assert f"This run: {n} cases, " in rendered
    assert data["run"]["run_id"] in rendered
    for status in {c["status"] for c in data["cases"]}:
        k = sum(c["status"] == status for c in data["cases"])
        assert f"{k} {status}" in rendered


def test_check_names_the_first_stale_line(
    render: ModuleType, rendered: str, rendered_full: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme, full = tmp_path / "README.md", tmp_path / "sample.md"
    good = f"intro\n{render.BEGIN_ABRIDGED}\n{rendered}\n{render.END}\noutro\n"
    readme.write_text(good)
    full.write_text(f"{render.BEGIN}\n{rendered_full}\n{render.END}\n")
    paths = ["--readme", str(readme), "--full", str(full)]
    assert render.main(["--check", *paths]) == 0
    line = next(x for x in rendered.splitlines() if x.startswith("This run: "))
    readme.write_text(good.replace(line, line.replace(" cases", " case(s)")))
    assert render.main(["--check", *paths]) == 1
    err = capsys.readouterr().err
    n = rendered.splitlines().index(line) + 1
    assert f"line {n} of the sample block" in err and "make docs" in err and str(readme) in err
    assert render.main(paths) == 0  # `make docs` rewrites the block ...
    assert readme.read_text() == good  # ... and only the block
    readme.write_text("no markers\n")
    assert render.main(["--check", *paths]) == 2


def test_render_reads_the_bundle(render: ModuleType, rendered: str, tmp_path: Path) -> None:
    data = json.loads(render.BUNDLE.read_text())
    case = next(c for c in data["cases"] if c["status"] == "pass")
    case["status"], case["reason"] = "fail_numeric", "max rel err 0.5 > 0.01 (perturbed in the test)"
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps(data))
    other = render.render(bundle)
    assert render.first_difference(rendered, other) is not None
    assert "1 failure" in other and "perturbed in the test" in other
