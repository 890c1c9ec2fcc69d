"""Results travel (issue 45, item 7): summary.json and an exported bundle hold no path of the machine that
ran them; the run's folder is `.` (paths relative to it), its parent `..`, the other roots are named. A real
run of a test plugin suite that records paths where real suites do (an artifact, a train cache under the run's
folder, a temp dir, the working directory, home, a traceback through site-packages); the --json file and the
store keep the absolute paths (so the same check on them fails: it can)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from bringup.bundle import load_bundle
from tests.conftest import REPO, load_json, run_cli

PLUGINS = Path(__file__).resolve().parent / "plugins"
ENV = {"PYTHONPATH": os.pathsep.join([str(PLUGINS), str(REPO), os.environ.get("PYTHONPATH", "")])}
# an absolute path: a "/" that does not follow a word character, a dot, a token ($TMPDIR, ~) or a scheme's ':'
ABSOLUTE = re.compile(r"(?<![\w.~$:/\-])/[\w.+-]+(?:/[\w.+-]*)*")


def leaks(text: str, roots: list[str]) -> list[str]:
    return [r for r in roots if r and r in text] + ABSOLUTE.findall(text)


def test_summary_json_and_the_bundle_travel(tmp_path: Path) -> None:
    run_cli(
        ["--import", "bringup_travel", "--device", "cpu", "travel", "--json", "j.json"], tmp_path, env=ENV, check_rc=0
    )
    raw = load_json(tmp_path / "j.json")
    run_dir = tmp_path / "bringup-results" / raw["run_id"]
    roots = [str(tmp_path), str(run_dir), os.getcwd(), str(Path.home()), sys.prefix, str(REPO), "/tmp/"]
    assert leaks(json.dumps(raw), roots) != []  # --json keeps the absolute paths: the check can fail

    text = (run_dir / "summary.json").read_text()
    assert leaks(text, roots) == [], leaks(text, roots)
    row = json.loads(text)["cases"][0]
    assert re.fullmatch(r"\./artifacts/[0-9a-f]+/trace\.json\.gz", row["trace"]), row["trace"]
    assert (run_dir / row["trace"]).is_file()  # relative to the run's folder
    assert row["cache_dir"] == "./train-cache/compile-1" and json.loads(text)["cache_root"] == "./train-cache"
    assert row["scratch"] == "$TMPDIR/bringup-travel-x" and row["home_file"] == "~/.cache/x"
    assert "$PYTHON/lib/python3.11/site-packages/torch" in row["where"]
    assert row["script"] == "./train.py"  # the run's working directory is `.`

    bundle = tmp_path / "b.json"
    run_cli(["export", "--out", str(bundle)], tmp_path, check_rc=0)
    btext = bundle.read_text()
    assert leaks(btext, roots) == [], leaks(btext, roots)
    run, results = load_bundle(bundle)  # still a bundle every reader takes
    assert results[0].artifacts["trace"] == row["trace"] and run.info["summary"] == "./summary.json"
    assert run.info["paths"]["home"] == "~"
