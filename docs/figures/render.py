"""Every time and speed-up README.md and docs/*.md state, filled in from the committed bench rows.

    python docs/figures/render.py            rewrite every marker's text and docs/figures.md's table (`make docs`)
    python docs/figures/render.py --check    exit 1, naming file:line, on a marker whose text differs from its
                                             row, an unknown id, a malformed row, a labelled figure whose
                                             section does not say so, or a time or speed-up written outside a
                                             marker (`make docs-check`; tests/spine/test_doc_figures.py)

The rows: bench/results/figures/*.jsonl, one JSON object a line, one measurement each (the file is the
topic; a re-measurement appends a row with the same id and the newest date wins: bench/time_command.py does
that for a timed command). ROW_KEYS, all required:

    {"id": "demo.fresh_clone", "what": "...", "values": {"wall": [441, "s"]}, "text": "{wall:dur} ...",
     "date": "2026-12-05", "machine": "...", "conditions": "quiet", "label": null,
     "command": "make demo", "commit": "508b26b", "raw": null, "source": "..."}

`values` maps a name to [number, unit] (or [[low, high], unit]: a range); `text` is the row's own sentence, a
Python format string over the values (`{wall}`, `{wall:.1f}`, `{wall:,}`, `{wall:dur}` for seconds as
"7 min 21 s"), `{label}`, `{date}`, `{commit}`, `{machine}` and `{where}` (the label, or "on 2 quiet cpu
cores"). A row measured anywhere but on REFERENCE_MACHINE, or on it while it was not quiet, carries a `label`
("load 7-8", "Trainium2", "on paper"), and the section (heading to heading) of every marker that shows it must
contain that label: a figure from another machine says so where it stands. `raw` names the committed file the
figure was read from, where there is one; `source` says where it was recorded.

The markers, inline on one line (prose or a table cell), or a block (a table, a bench's printed lines):

    <!-- fig ID -->TEXT<!-- /fig -->               TEXT is the row's `text`, rendered
    <!-- fig ID: TEMPLATE -->TEXT<!-- /fig -->     TEXT is TEMPLATE, rendered over the row
    <!-- fig ID:                                   a block: the template's lines up to `-->`, then its
    TEMPLATE LINES                                 rendered lines up to `<!-- /fig -->`
    -->
    TEXT LINES
    <!-- /fig -->

A time or a speed-up anywhere else in README.md or docs/*.md (prose, tables, code blocks; not inline code,
comments, the rendered sample blocks, a fenced block right after `<!-- example output -->`) fails the check,
unless one of the few ALLOW phrases (bounds and goals, settings, factors between errors) covers it.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "bench" / "results" / "figures"
FIGURES_MD = REPO / "docs" / "figures.md"
REFERENCE_MACHINE = "this project's 2-core cpu machine"
ROW_KEYS = ("id", "what", "values", "text", "date", "machine", "conditions", "label", "command", "commit", "raw")
ROW_KEYS += ("source",)
MARKER = re.compile(r"<!-- fig (?P<id>[a-z0-9_.\-]+)(?:: (?P<tpl>.*?))? -->(?P<text>.*?)<!-- /fig -->")
BLOCK = re.compile(r"^<!-- fig (?P<id>[a-z0-9_.\-]+):$")  # a block marker: the template's lines follow, to `-->`
BLOCK_END = "<!-- /fig -->"
TABLE_BEGIN = (
    "<!-- figures:begin (rendered by docs/figures/render.py from bench/results/figures/*.jsonl: `make docs`; "
    "do not edit) -->"
)
TABLE_END = "<!-- figures:end -->"


class FigureError(ValueError):
    """A row or a marker that cannot be rendered; the message names where."""


@dataclass(frozen=True)
class Row:
    """One measurement: a committed bench row."""

    data: dict[str, Any]
    where: str  # file:line of the row

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def label(self) -> str | None:
        return self.data.get("label")


def docs(repo: Path = REPO) -> list[Path]:
    """The files whose figures come from rows: README.md and docs/*.md."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def _check_row(d: Any, where: str, repo: Path) -> None:
    if not isinstance(d, dict):
        raise FigureError(f"{where}: a row is a JSON object")
    missing = [k for k in ROW_KEYS if k not in d]
    extra = sorted(set(d) - set(ROW_KEYS))
    if missing or extra:
        raise FigureError(f"{where}: row {d.get('id')!r}: missing {missing}, unknown {extra}")
    if not re.fullmatch(r"[a-z0-9_.\-]+", str(d["id"])):
        raise FigureError(f"{where}: id {d['id']!r}: lower-case letters, digits, '_', '.', '-'")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(d["date"])):
        raise FigureError(f"{where}: {d['id']}: date {d['date']!r} is not YYYY-MM-DD")
    for k in ("what", "text", "machine", "conditions", "command", "source"):
        if not isinstance(d[k], str) or not d[k].strip():
            raise FigureError(f"{where}: {d['id']}: {k} must be a non-empty string")
    if not isinstance(d["values"], dict) or not d["values"]:
        raise FigureError(f"{where}: {d['id']}: values must name at least one [number, unit]")
    for name, v in d["values"].items():
        ok = isinstance(v, list) and len(v) == 2 and isinstance(v[1], str)
        nums = v[0] if ok and isinstance(v[0], list) else [v[0]] if ok else []
        if not ok or not nums or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in nums):
            raise FigureError(f"{where}: {d['id']}: value {name!r} must be [number or [low, high], unit]")
    other = d["machine"] != REFERENCE_MACHINE or d["conditions"] != "quiet"
    if other and not (isinstance(d["label"], str) and d["label"].strip()):
        raise FigureError(
            f"{where}: {d['id']}: measured on {d['machine']!r} ({d['conditions']}), not quietly on "
            f"{REFERENCE_MACHINE!r}: it needs a label that says so wherever it is shown"
        )
    if d["raw"] is not None and not (repo / d["raw"]).exists():
        raise FigureError(f"{where}: {d['id']}: raw file {d['raw']!r} is not in the repository")


def load_rows(rows_dir: Path = ROWS, repo: Path = REPO) -> dict[str, list[Row]]:
    """id -> its rows, oldest first (by date, then file order); FigureError on a malformed row."""
    out: dict[str, list[Row]] = {}
    for f in sorted(rows_dir.glob("*.jsonl")):
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if not line.strip():
                continue
            where = f"{f.relative_to(repo) if f.is_relative_to(repo) else f}:{n}"
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise FigureError(f"{where}: not JSON ({e})") from None
            _check_row(d, where, repo)
            out.setdefault(d["id"], []).append(Row(d, where))
    for rows in out.values():
        rows.sort(key=lambda r: r.data["date"])  # stable: same date keeps file order
    return out


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        h, rest = divmod(s, 3600)
        return f"{h} h {rest // 60:02d} min"
    m, s = divmod(s, 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def _one(x: float, spec: str) -> str:
    if spec == "dur":
        return _duration(x)
    return str(x) if not spec else format(x, spec)


class _Formatter(string.Formatter):
    def __init__(self, row: Row) -> None:
        super().__init__()
        self.row = row

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        d = self.row.data
        if key == "where":  # the label, or what a quiet reference-machine row is
            return d["label"] or "on 2 quiet cpu cores"
        if key in ("label", "date", "commit", "machine"):
            if not d[key]:
                raise FigureError(f"{self.row.where}: {self.row.id} has no {key}")
            return str(d[key])
        if key not in d["values"]:
            raise FigureError(f"{self.row.where}: {self.row.id} has no value {key!r} (it has {sorted(d['values'])})")
        return d["values"][key][0]

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, str):
            return format(value, format_spec)
        if isinstance(value, list):
            return "-".join(_one(x, format_spec) for x in value)
        return _one(value, format_spec)


def render_text(row: Row, template: str | None = None) -> str:
    """The row's sentence (or `template`) with its values; it must state the row's label when it has one."""
    tpl = row.data["text"] if template is None else template
    try:
        text = _Formatter(row).format(tpl)
    except (ValueError, IndexError) as e:
        raise FigureError(f"{row.id}: template {tpl!r}: {e}") from None
    return text


def unlabelled(lines: list[str], rows: dict[str, list[Row]], where: str) -> list[Problem]:
    """A figure from another machine (or a loaded one) must say so where it stands: each marker of a labelled
    row needs its label in the marker's text or elsewhere in its section (from the heading above it to the
    next heading)."""
    problems: list[Problem] = []
    heads = [n for n, line in enumerate(lines) if re.match(r"#{1,6} ", line)]
    for start, end in zip([0, *heads], [*heads, len(lines)], strict=True):
        sec = lines[start:end]
        prose = re.sub(r"<!--.*?-->", "", "\n".join(sec), flags=re.S)
        ids = [m.group("id") for line in sec for m in MARKER.finditer(line)]
        ids += [m.group("id") for line in sec if (m := BLOCK.match(line))]
        for fid in dict.fromkeys(ids):
            row = rows.get(fid, [None])[-1]
            if row is not None and row.label and row.label not in prose:
                d = row.data
                problems.append(
                    Problem(
                        f"{where}:{start + 1}",
                        f"{fid} was measured on {d['machine']} ({d['conditions']}): its section must say so "
                        f"(contain its label {row.label!r}, e.g. through {{label}} in the marker's template)",
                    )
                )
    return problems


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def render_line(line: str, rows: dict[str, list[Row]], where: str) -> tuple[str, list[Problem]]:
    """`line` with every marker's text rendered, and the problems (unknown id, bad template) met."""
    problems: list[Problem] = []
    opened = len(re.findall(r"<!-- fig [a-z0-9]", line))
    if opened != len(MARKER.findall(line)):
        problems.append(Problem(where, "a `<!-- fig ID -->` marker without its `<!-- /fig -->` on the same line"))

    def sub(m: re.Match[str]) -> str:
        fid = m.group("id")
        if fid not in rows:
            problems.append(Problem(where, f"marker names {fid!r}, which no row in bench/results/figures has"))
            return m.group(0)
        try:
            text = render_text(rows[fid][-1], m.group("tpl"))
        except FigureError as e:
            problems.append(Problem(where, str(e)))
            return m.group(0)
        tpl = f": {m.group('tpl')}" if m.group("tpl") is not None else ""
        return f"<!-- fig {fid}{tpl} -->{text}<!-- /fig -->"

    return MARKER.sub(sub, line), problems


def render_block(
    lines: list[str], start: int, rows: dict[str, list[Row]], where: str
) -> tuple[list[str], int, list[Problem]]:
    """A block marker from line `start`: its template (up to a `-->` line), then its text, rendered (up to
    `<!-- /fig -->`); returns the block's new lines, the index after it, and the problems."""
    fid = BLOCK.match(lines[start]).group("id")  # type: ignore[union-attr]
    try:
        close = lines.index("-->", start + 1)
        end = lines.index(BLOCK_END, close + 1)
    except ValueError:
        return (
            lines[start : start + 1],
            start + 1,
            [Problem(where, f"block `<!-- fig {fid}:` needs a `-->` line, then `{BLOCK_END}`")],
        )
    template = "\n".join(lines[start + 1 : close])
    keep = lines[start : close + 1]
    if fid not in rows:
        return lines[start : end + 1], end + 1, [Problem(where, f"block names {fid!r}, which no row has")]
    try:
        text = render_text(rows[fid][-1], template)
    except FigureError as e:
        return lines[start : end + 1], end + 1, [Problem(where, str(e))]
    return [*keep, *text.split("\n"), BLOCK_END], end + 1, []


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def figures_table(rows: dict[str, list[Row]]) -> str:
    """docs/figures.md's generated part: every row, newest first within its id, one table per topic file."""
    by_file: dict[str, list[Row]] = {}
    for rs in rows.values():
        for r in rs:
            by_file.setdefault(r.where.rsplit(":", 1)[0], []).append(r)
    out: list[str] = []
    for f in sorted(by_file):
        out += [f"### {Path(f).stem}", "", f"Rows: [{f}](../{f})", ""]
        out += [
            "| id | figure | what | date | machine | command | from |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in by_file[f]:
            d = r.data
            machine = d["machine"] + ("" if d["conditions"] == "quiet" else f" ({d['conditions']}: {d['label']})")
            src = d["source"] + (f"; raw: [{d['raw']}](../{d['raw']})" if d["raw"] else "")
            src += f"; commit {d['commit']}" if d["commit"] else ""
            text = render_text(r)
            if "\n" in text:  # a block's table: its values, each with its unit
                text = ", ".join(
                    f"{k} {_Formatter(r).format_field(v[0], '')} {v[1]}".strip() for k, v in d["values"].items()
                )
            cells = [f"`{r.id}`", text, d["what"], d["date"], machine, f"`{d['command']}`", src]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    return "\n".join(out).rstrip("\n")


def _with_table(text: str, table: str, where: str) -> tuple[str, list[Problem]]:
    if TABLE_BEGIN not in text or TABLE_END not in text:
        return text, [Problem(where, f"no `{TABLE_BEGIN}` ... `{TABLE_END}` block")]
    head, rest = text.split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{TABLE_BEGIN}\n{table}\n{TABLE_END}{tail}", []


def render_file(path: Path, rows: dict[str, list[Row]], repo: Path = REPO) -> tuple[str, list[Problem]]:
    """The file's text with every marker (and docs/figures.md's table) rendered, and the problems met."""
    text = path.read_text()
    rel = path.relative_to(repo) if path.is_relative_to(repo) else path
    out: list[str] = []
    problems: list[Problem] = []
    lines = text.split("\n")
    n = 0
    while n < len(lines):
        if BLOCK.match(lines[n]):
            block, end, ps = render_block(lines, n, rows, f"{rel}:{n + 1}")
            out += block
            problems += ps
            n = end
            continue
        new, ps = render_line(lines[n], rows, f"{rel}:{n + 1}")
        out.append(new)
        problems += ps
        n += 1
    problems += unlabelled(out, rows, str(rel))
    text = "\n".join(out)
    if path.name == FIGURES_MD.name and path.parent.name == "docs":
        try:
            text, ps = _with_table(text, figures_table(rows), str(rel))
        except FigureError as e:
            ps = [Problem(str(rel), str(e))]
        problems += ps
    return text, problems


def first_difference(path: Path, have: str, want: str, repo: Path = REPO) -> Problem | None:
    """Where `have` (the file) and `want` (its render) first differ, or None."""
    a, b = have.split("\n"), want.split("\n")
    rel = path.relative_to(repo) if path.is_relative_to(repo) else path
    for n in range(max(len(a), len(b))):
        x, y = (a[n] if n < len(a) else ""), (b[n] if n < len(b) else "")
        if x != y:
            got = [m.group(0) for m in MARKER.finditer(x)]
            new = [m.group(0) for m in MARKER.finditer(y)]
            diff = next(((g, w) for g, w in zip(got, new, strict=False) if g != w), (x, y))
            return Problem(f"{rel}:{n + 1}", f"stale figure: the text has {diff[0]!r}; its row renders {diff[1]!r}")
    return None


def check(repo: Path = REPO, rows_dir: Path | None = None) -> list[Problem]:
    """Everything `make docs-check` fails on: bad rows, stale or unknown markers, unmarked timings."""
    try:
        rows = load_rows(rows_dir or repo / "bench" / "results" / "figures", repo)
    except FigureError as e:
        return [Problem("bench/results/figures", str(e))]
    problems: list[Problem] = []
    for path in docs(repo):
        want, ps = render_file(path, rows, repo)
        problems += ps
        if not ps:
            diff = first_difference(path, path.read_text(), want, repo)
            problems += [diff] if diff else []
        problems += [Problem(w, m) for w, m in scan_file(path, repo)]
    return problems


def write(repo: Path = REPO, rows_dir: Path | None = None) -> list[Problem]:
    """`make docs`: rewrite what renders cleanly; the problems that stop a file are returned."""
    rows = load_rows(rows_dir or repo / "bench" / "results" / "figures", repo)
    problems: list[Problem] = []
    for path in docs(repo):
        want, ps = render_file(path, rows, repo)
        problems += ps
        if not ps and want != path.read_text():
            path.write_text(want)
            print(f"{path.relative_to(repo)}: figures rewritten from bench/results/figures")
    return problems


# ---- the scanner: a time or speed-up written by hand, outside a marker

_NUM = r"\d+(?:[.,]\d+)*"
_RANGE = rf"{_NUM}(?:\s?(?:-|–|to)\s?{_NUM})?"
_UNITS = r"(?:ms|µs|us|sec|secs|seconds?|min|mins|minutes?|hrs?|hours?)"  # and " s", " h" (a space before)
TIMING = re.compile(
    rf"(?<![\w.\-/:=^])~?{_RANGE}(?:\s?{_UNITS}(?![\w/])|\s[sh](?![\w/])|x(?!\w))"  # 3.5 min, 207 s, 10.2x
    r"|(?<![\w.:])\d{1,3}:\d{2}(?::\d{2})?(?![\d:])"  # 16:04, a duration as minutes:seconds
)
EXAMPLE_OUTPUT = "<!-- example output -->"  # the line before a fenced block of a run's output, shown as a sample
BLOCKS = (("<!-- sample:begin", "<!-- sample:end"), (TABLE_BEGIN, TABLE_END))  # rendered from committed data

# Phrases with a number and a unit that state no measurement: each says why. A hit inside a match (on its line
# joined with the lines before and after it, for a phrase a line break cuts) is allowed.
_N = r"~?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?"
ALLOW: tuple[tuple[str, str], ...] = (
    (
        rf"(?:>=|<=|<|>|goal|[Uu]nder|within|at most|reach)\s{_N}(?:\s?(?:min|minutes|s|h)\b|x)",
        "a bound or a goal, not a measurement",
    ),
    (
        rf"default {_N} s, {_N} s at|(?:default|budget \+|exceeded|\+|fails in|retried|per|any) {_N}(?: s| minutes|x)\b"
        rf"|{_N} s busy timeout|backoff \([\d, ]+ s",
        "a setting (a default, a budget, a timeout, a retry count, the Hub's rate window), not a measurement",
    ),
    (
        rf"{_N}x\s+(?:the|its|a|an|off|error|past|above|over|under|further|noisier|eps|cpu|cpu's|forward|against)\b"
        rf"|taken at {_N}x|silu\({_N}x\)|own {_N}x\)|times that \({_N}x\)|shrinks [^.]*?{_N}x",
        "a factor between two errors or sizes (a rule's bound, an injected fault, an error ratio), not a speed-up",
    ),
    (r"\d{4}-\d{2}-\d{2},? \d{2}:\d{2}|\d{2}:\d{2} UTC", "a time of day, not a duration"),
)


def _strip(line: str) -> str:
    """The prose of a line: markers, comments, inline code and link targets blanked (same length)."""
    for pat in (MARKER.pattern, r"<!--.*?-->", r"`[^`]*`", r"\]\([^)]*\)"):
        line = re.sub(pat, lambda m: " " * len(m.group(0)), line)
    return line


def scan_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, the figure) for each time or speed-up written outside a marker and not allowed."""
    out: list[tuple[int, str]] = []
    fenced = example = False
    block_end: str | None = None
    prev = ""
    for n, line in enumerate(lines, 1):
        if block_end is not None:
            block_end = None if line.startswith(block_end) else block_end
            continue
        if not fenced and (end := next((e for b, e in BLOCKS if line.startswith(b)), None)):
            block_end = end
            continue
        if not fenced and BLOCK.match(line):
            block_end = BLOCK_END  # its template and its rendered text
            continue
        if re.match(r"^\s*```", line):
            fenced = not fenced
            example = fenced and prev.strip() == EXAMPLE_OUTPUT
            prev = line
            continue
        if line.strip():
            prev = line
        if fenced and example:
            continue
        text = line if fenced else _strip(line)
        before = "" if fenced or n < 2 else _strip(lines[n - 2])
        after = "" if fenced or n >= len(lines) else _strip(lines[n])
        joined, at = f"{before} {text} {after}", len(before) + 1
        allowed = [(a - at, b - at) for pat, _ in ALLOW for m in re.finditer(pat, joined) for a, b in [m.span()]]
        for m in TIMING.finditer(text):
            if not any(a <= m.start() and m.end() <= b for a, b in allowed):
                out.append((n, m.group(0).strip()))
    return out


def scan_file(path: Path, repo: Path = REPO) -> list[tuple[str, str]]:
    rel = path.relative_to(repo) if path.is_relative_to(repo) else path
    return [
        (f"{rel}:{n}", f"{fig!r} is a time or speed-up written by hand: put it in a row and a `<!-- fig ID -->` marker")
        for n, fig in scan_lines(path.read_text().split("\n"))
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 on a stale, unknown or unmarked figure")
    ap.add_argument("--repo", type=Path, default=REPO)
    args = ap.parse_args(argv)
    try:
        problems = check(args.repo) if args.check else write(args.repo)
    except FigureError as e:
        problems = [Problem("bench/results/figures", str(e))]
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(
            f"{len(problems)} figure problem(s): a figure comes from a row in bench/results/figures through a "
            "`<!-- fig ID -->` marker (docs/figures.md says how); `make docs` rewrites the markers",
            file=sys.stderr,
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
