"""A report that travels: no absolute path of the machine that ran it (nor of the one rendering it) in the
page or its embedded JSON; every link relative. The rewriting (bringup/report/portable.py) is checked on
its own, then on a rendered page whose run planted absolute paths everywhere a real run puts them:
cache_dir, artifact links (trace, the profile's summary.json), tracebacks through site-packages, the
run's checkout and home, the command line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from bringup.report import html
from bringup.report.portable import portable
from bringup.store import Store
from tests.report.conftest import build_store, fixture_results

OTHER = {
    "cwd": "/data/ci/work",
    "home": "/home/ci",
    "tmp": "/scratch/tmp",
    "python": "/opt/venvs/b",
    "bringup": "/data/ci/bringup",
}


def test_roots_become_relative_or_named(tmp_path: Path) -> None:
    run_dir = tmp_path / "res" / "RUN1"
    p = portable(OTHER, out_dir=run_dir, run_dirs=[run_dir], also=[])
    assert p.text(f"{run_dir}/artifacts/x/trace.json.gz") == "./artifacts/x/trace.json.gz"
    assert p.text(f"{run_dir.parent}/bringup.db") == "../bringup.db"
    assert p.text('File "/opt/venvs/b/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1') == (
        'File "$PYTHON/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1'
    )
    assert p.text("/data/ci/bringup/bringup/probe/suite.py") == "$BRINGUP/bringup/probe/suite.py"
    assert p.text("cd /data/ci/work && ls /home/ci/.cache /scratch/tmp/x") == "cd . && ls ~/.cache $TMPDIR/x"
    # not a root: a longer name, a relative path that contains one, a system path
    assert p.text("/data/ci/workspace/a") == "/data/ci/workspace/a"
    assert p.text("../../tmp/x and /dev/shm") == "../../tmp/x and /dev/shm"


def test_generic_patterns_cover_other_machines() -> None:
    p = portable({}, out_dir=None, run_dirs=[], also=[])
    assert p.text("/home/alice/x.py /Users/bob/y /root/.cache/z") == "~/x.py ~/y ~/.cache/z"
    assert p.text("/tmp/bringup-1/a /var/folders/ab/cd12/T/q") == "$TMPDIR/bringup-1/a $TMPDIR/q"
    assert p.text("/usr/lib/python3/dist-packages/numpy/x.py") == "dist-packages/numpy/x.py"
    assert p.text('{"cache_dir":"/tmp/c"}') == '{"cache_dir":"$TMPDIR/c"}'
    assert p.text("/tmpfiles/x /homely") == "/tmpfiles/x /homely"


def _planted(run_dir: Path) -> list:
    rs = fixture_results(trace_path=str(run_dir / "artifacts" / "abc" / "trace.json.gz"))
    for r in rs:
        if r.suite == "train":
            r.fields["cache_dir"] = str(run_dir / "train-cache" / "compile-1")
            r.fields["elsewhere"] = "/scratch/tmp/bringup-train-x/inductor"
        if r.suite == "profile":
            r.artifacts["summary"] = str(run_dir / "artifacts" / "abc" / "summary.json")
        if r.suite == "zoo" and r.error:
            r.error += (
                '\n  File "/opt/venvs/b/lib/python3.11/site-packages/torch/nn/modules/module.py", line 9'
                '\n  File "/data/ci/bringup/bringup/zoo/suite.py", line 3'
                f'\n  File "{Path.home()}/plugins/mine.py", line 1'
            )
    return rs


def test_rendered_page_has_no_absolute_paths(tmp_path: Path) -> None:
    db = tmp_path / "res" / "bringup.db"
    run_id = build_store(db, results=[])
    run_dir = db.parent / run_id
    (run_dir / "artifacts" / "abc").mkdir(parents=True)
    (run_dir / "artifacts" / "abc" / "trace.json.gz").write_bytes(b"")
    with Store(db) as st:
        for r in _planted(run_dir):
            st.record(run_id, r)
        st.update_run_info(run_id, paths=OTHER, summary=str(run_dir / "summary.json"))
        st.conn.execute(
            "UPDATE runs SET argv = ? WHERE run_id = ?",
            (json.dumps(["run", "--port", "/data/ci/work/train.py"]), run_id),
        )
        page_path = html.write_report(st, run_id, None)
    page = page_path.read_text()
    roots = [*OTHER.values(), str(tmp_path), str(Path.home()), os.getcwd(), str(db.parent)]
    assert _leaks(page, roots) == [] and "file:" not in page
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert "artifacts/abc/trace.json.gz" in hrefs and "artifacts/abc/summary.json" in hrefs
    assert all(not h.startswith("/") and ":" not in h for h in hrefs), hrefs
    data = json.loads(re.search(r'id="bringup-data">(.*?)</script>', page, re.S).group(1))
    train = next(c for c in data["cases"] if c["suite"] == "train")
    assert train["cache_dir"] == "./train-cache/compile-1"
    assert train["elsewhere"] == "$TMPDIR/bringup-train-x/inductor"
    assert "$PYTHON/lib/python3.11/site-packages/torch" in page and "$BRINGUP/bringup/zoo/suite.py" in page
    assert "~/plugins/mine.py" in page and "bringup run --port ./train.py" in page


def test_the_store_keeps_absolute_paths_and_the_check_can_fail(tmp_path: Path) -> None:
    """The store keeps what the run recorded; the same data, not rewritten, trips the check above."""
    db = tmp_path / "res" / "bringup.db"
    run_id = build_store(db, results=[])
    run_dir = db.parent / run_id
    with Store(db) as st:
        for r in _planted(run_dir):
            st.record(run_id, r)
        results = st.results(run_id)
    train = next(r for r in results if r.suite == "train")
    assert train.fields["cache_dir"] == str(run_dir / "train-cache" / "compile-1")
    raw = json.dumps([r.flat() for r in results])
    assert _leaks(raw, [*OTHER.values(), str(tmp_path)]) != []


def _leaks(page: str, roots: list[str]) -> list[str]:
    return [r for r in roots if r in page] + (["/tmp/"] if "/tmp/" in page else [])
