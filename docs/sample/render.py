"""The sample scorecard, rendered from one real run's bundle (docs/sample/run-quick-cpu.json) only.

Two blocks, each between its markers: docs/sample.md holds the whole terminal output, README.md an abridged
one (the cases that did not pass, train's and the zoo's tables, the totals).

    python docs/sample/render.py            rewrite both blocks (`make docs`)
    python docs/sample/render.py --check    exit 1 when a block differs, naming the file and the first differing
                                            line (`make docs-check`; tests/spine/test_readme_sample.py)
    python docs/sample/render.py --print    the whole block on stdout (`--abridged`: README's)

The block is what `bringup run --quick` printed, rebuilt with bringup's own printers (no second renderer):
the plan line (orchestrate.describe), the run line and every case that did not pass (console.run_line,
console.progress_line), each suite's table and summary lines (flow.summarize_by_suite: the suites' own
summarize functions), what the quick path left out (orchestrate.LeftOut.line), the bug groups
(triage.post_run.print_block) and the totals line (console.final_line), on a rich console 160 columns wide, no
colour. Paths go through the report's Portable (the run's recorded working directory -> `.`), so nothing
of the machine that renders it, and no absolute path of the one that ran it, ends up in the docs.

A new sample: run it, export it, render it (the bundle replaces the old one; the docs follow):

    bringup --device cpu run --quick
    bringup export --out docs/sample/run-quick-cpu.json
    make docs
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "docs" / "sample" / "run-quick-cpu.json"
README = REPO / "README.md"
FULL = REPO / "docs" / "sample.md"
BEGIN = (
    "<!-- sample:begin (rendered by docs/sample/render.py from docs/sample/run-quick-cpu.json: `make docs`; "
    "do not edit) -->"
)
BEGIN_ABRIDGED = (
    "<!-- sample:begin abridged (rendered by docs/sample/render.py from docs/sample/run-quick-cpu.json: "
    "`make docs`; do not edit) -->"
)
END = "<!-- sample:end -->"
ABRIDGED_SUITES = ("train", "zoo")  # README's block: these suites' tables only
WIDTH = 160  # what bringup.console.make_console gives a log or a CI console


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def render(bundle: Path = BUNDLE, abridged: bool = False) -> str:
    """The block's text (markers excluded) from `bundle` alone; `abridged`: README's (ABRIDGED_SUITES' tables)."""
    from rich.console import Console

    from bringup.bundle import load_bundle
    from bringup.case import Status
    from bringup.console import final_line, progress_line, run_line, short_reason, totals_line
    from bringup.flow import summarize_by_suite
    from bringup.orchestrate import LeftOut, RunCommandOptions, describe
    from bringup.outcomes import OUTCOMES, outcome
    from bringup.report.portable import portable
    from bringup.store import DEFAULT_DB
    from bringup.triage.post_run import print_block

    run, results = load_bundle(bundle)
    info = run.info
    pt = portable(recorded=info.get("paths") or {}, also=[{}])  # the run's roots only, not this machine's
    opts = info.get("options") or {}
    buf = io.StringIO()
    con = Console(
        file=buf, width=WIDTH, color_system=None, force_terminal=False, highlight=False, soft_wrap=True, emoji=False
    )

    con.print(describe(results, RunCommandOptions(full=bool(opts.get("full")), skip=opts.get("skip") or "")))
    db = opts.get("db") or DEFAULT_DB  # the run gave no --db: the default store
    con.print(run_line(run.run_id, run.device, run.device_name, len(results), db), markup=False)
    last = 0
    for i, r in enumerate(results, 1):
        if r.status is Status.PASS:
            continue
        if i != last + 1:
            con.print("...", markup=False)
        con.print(progress_line(i, len(results), r), markup=False)
        last = i
    if last != len(results):
        con.print("...", markup=False)
    summarize_by_suite([r for r in results if not abridged or r.suite in ABRIDGED_SUITES], con)
    if info.get("quick_left_out") is not None:
        con.print(LeftOut.line(info["quick_left_out"]), highlight=False)
    if info.get("bugs"):
        print_block(info["bugs"], con)
    con.print(final_line(run.run_id, results))
    if info.get("summary"):
        con.print(f"summary: {info['summary']}", markup=False)
    terminal = pt.text(buf.getvalue()).rstrip("\n")

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.started_at))
    wall = f", {_duration(run.ended_at - run.started_at)} wall" if run.ended_at else ""
    argv = " ".join(pt.text(a) for a in run.argv)
    lines = [
        f"Run `{run.run_id}` ({started}{wall}): `bringup {argv}` on {run.device} ({run.device_name}), "
        f"torch {run.torch_version}, bringup {run.bringup_version}"
        + (f" ({info['build']['bringup_git'][:10]})" if (info.get("build") or {}).get("bringup_git") else "")
        + ". Its terminal output, abridged to the cases that did not pass (`...`: passing cases left out), "
        + ("the train and zoo tables" if abridged else "each suite's table")
        + " and the totals:",
        "",
        "```",
        terminal,
        "```",
        "",
        f"This run: {len(results)} cases, {totals_line(results)}.",
    ]
    for o in OUTCOMES:
        rs = [r for r in results if outcome(r.status).key == o.key]
        if o.key == "pass" or not rs:
            continue
        items = "; ".join(f"`{r.suite}/{r.name}` ({r.status.value}: {short_reason(pt.text(r.reason), 90)})" for r in rs)
        n = len(rs)
        lines.append(f"The {n} {o.one if n == 1 else o.many}: {items}. A {o.one}: {o.meaning}.")
    return "\n".join(lines)


def split(text: str, begin: str = BEGIN_ABRIDGED) -> tuple[str, str, str]:
    """A doc as (before, block, after) around the markers (`begin`: README's, or BEGIN for docs/sample.md);
    ValueError when they are missing."""
    try:
        head, rest = text.split(begin + "\n", 1)
        block, tail = rest.split(END, 1)
    except ValueError:
        raise ValueError(f"no `{begin}` ... `{END}` block") from None
    return head, block.removesuffix("\n"), tail


def first_difference(have: str, want: str) -> str | None:
    """None when equal, else 'line N: the doc has ... / the bundle renders ...' (N within the block)."""
    a, b = have.splitlines(), want.splitlines()
    for n in range(max(len(a), len(b))):
        x = a[n] if n < len(a) else "<end of block>"
        y = b[n] if n < len(b) else "<end of block>"
        if x != y:
            return f"line {n + 1} of the sample block: the doc has {x!r}; the bundle renders {y!r}"
    return None


def _one(path: Path, begin: str, want: str, check: bool, bundle: Path) -> int:
    """Check or rewrite one doc's block: 0 fine (or rewritten), 1 stale, 2 no block."""
    text = path.read_text()
    try:
        head, block, tail = split(text, begin)
    except ValueError as e:
        print(f"render.py: {path}: {e}", file=sys.stderr)
        return 2
    if check:
        diff = first_difference(block, want)
        if diff:
            print(f"{path}: stale sample ({diff}); run `make docs`", file=sys.stderr)
            return 1
        return 0
    new = f"{head}{begin}\n{want}\n{END}{tail}"
    if new != text:
        path.write_text(new)
        print(f"{path}: sample block rewritten from {bundle.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when a doc's block differs from the render")
    mode.add_argument("--print", action="store_true", help="print the block")
    ap.add_argument("--abridged", action="store_true", help="with --print: README's abridged block")
    ap.add_argument("--bundle", type=Path, default=BUNDLE)
    ap.add_argument("--readme", type=Path, default=README, help="the doc with the abridged block")
    ap.add_argument("--full", type=Path, default=FULL, help="the doc with the whole block")
    args = ap.parse_args(argv)
    if args.print:
        print(render(args.bundle, abridged=args.abridged))
        return 0
    rc = 0
    for path, begin, abridged in ((args.readme, BEGIN_ABRIDGED, True), (args.full, BEGIN, False)):
        rc = max(rc, _one(path, begin, render(args.bundle, abridged=abridged), args.check, args.bundle))
    return rc


if __name__ == "__main__":
    sys.exit(main())
