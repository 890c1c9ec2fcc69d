"""README's sample block, rendered from one real run's bundle (docs/sample/run-quick-cpu.json) only.

    python docs/sample/render.py            rewrite the block between the markers in README.md (`make docs`)
    python docs/sample/render.py --check    exit 1 when README's block differs, naming the first differing
                                            line (`make docs-check`; tests/spine/test_readme_sample.py)
    python docs/sample/render.py --print    the block on stdout

The block is what `bringup run --quick` printed, rebuilt with bringup's own printers (no second renderer):
the plan line (orchestrate.describe), the run line and every case that did not pass (console.run_line,
console.progress_line), each suite's table and summary lines (flow.summarize_by_suite: the suites' own
summarize functions) and the totals line (console.final_line), on a rich console 160 columns wide, no
colour. Paths go through the report's Portable (the run's recorded working directory -> `.`), so nothing
of the machine that renders it, and no absolute path of the one that ran it, ends up in README.

A new sample: run it, export it, render it (the bundle replaces the old one; the README follows):

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
BEGIN = (
    "<!-- sample:begin (rendered by docs/sample/render.py from docs/sample/run-quick-cpu.json: `make docs`; "
    "do not edit) -->"
)
END = "<!-- sample:end -->"
WIDTH = 160  # what bringup.console.make_console gives a log or a CI console


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def render(bundle: Path = BUNDLE) -> str:
    """The block's text (markers excluded) from `bundle` alone."""
    from rich.console import Console

    from bringup.bundle import load_bundle
    from bringup.case import Status
    from bringup.console import final_line, progress_line, run_line, short_reason, totals_line
    from bringup.flow import summarize_by_suite
    from bringup.orchestrate import RunCommandOptions, describe
    from bringup.outcomes import OUTCOMES, outcome
    from bringup.report.portable import portable
    from bringup.store import DEFAULT_DB

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
    summarize_by_suite(results, con)
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
        "each suite's table and the totals:",
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


def split(readme: str) -> tuple[str, str, str]:
    """README as (before, block, after) around the markers; ValueError when they are missing."""
    try:
        head, rest = readme.split(BEGIN + "\n", 1)
        block, tail = rest.split(END, 1)
    except ValueError:
        raise ValueError(f"README.md has no `{BEGIN}` ... `{END}` block") from None
    return head, block.removesuffix("\n"), tail


def first_difference(have: str, want: str) -> str | None:
    """None when equal, else 'line N: README has ... / the bundle renders ...' (N within the block)."""
    a, b = have.splitlines(), want.splitlines()
    for n in range(max(len(a), len(b))):
        x = a[n] if n < len(a) else "<end of block>"
        y = b[n] if n < len(b) else "<end of block>"
        if x != y:
            return f"line {n + 1} of the sample block: README has {x!r}; the bundle renders {y!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when README's block differs from the render")
    mode.add_argument("--print", action="store_true", help="print the block")
    ap.add_argument("--bundle", type=Path, default=BUNDLE)
    ap.add_argument("--readme", type=Path, default=README)
    args = ap.parse_args(argv)
    want = render(args.bundle)
    if args.print:
        print(want)
        return 0
    text = args.readme.read_text()
    try:
        head, block, tail = split(text)
    except ValueError as e:
        print(f"render.py: {e}", file=sys.stderr)
        return 2
    if args.check:
        diff = first_difference(block, want)
        if diff:
            print(f"{args.readme}: stale sample ({diff}); run `make docs`", file=sys.stderr)
            return 1
        return 0
    new = f"{head}{BEGIN}\n{want}\n{END}{tail}"
    if new != text:
        args.readme.write_text(new)
        print(f"{args.readme}: sample block rewritten from {args.bundle.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
