"""Every `bringup ...` command shown in README.md and docs/*.md parses with the real parser.

The commands come from fenced code blocks (one per line; `\\` continuations joined; `;` and `&&` split;
`# comments` dropped), from indented code blocks (a gap of 3+ spaces before a word ends the command:
a synopsis's explanation column) and from inline code spans. Nothing runs: each is parsed in-process by
`bringup.cli.build_parser()`, the parser `bringup` itself uses. A synopsis is checked in its shortest form
(optional `[...]` groups left out) and in its longest (each group in, the first of `a|b`); placeholders
stay as written (MODEL, RUN_ID, PATH...) except numeric ones (N, SEC, ...), which get a number; `...`
(elided options) is dropped, or a dummy value after an option that takes one. A command named in prose
(`bringup compare`, no arguments) is checked as `bringup compare --help`. Skipped as not a command: a
line whose sub-command is a placeholder (`bringup NAME`) or an alternatives list (`bringup hub
fetch|plan|...`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import sys

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NUMERIC = {"N", "K", "SEC", "S", "GB", "GIB", "BUDGET", "SECONDS"}
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.\.\.)?$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_GROUP = re.compile(r"\[([^\[\]]*)\]")


def _command_tail(text: str) -> str | None:
    """What follows the `bringup` word of a command line (`$ `, `time`, VAR=... and a path to the script
    allowed before it; `python -m bringup.cli` too), or None when the line is not a bringup command."""
    words = text.strip().split()
    i = 0
    while i < len(words) and (words[i] in ("$", "time") or _ENV.match(words[i])):
        i += 1
    if i + 1 < len(words) and words[i].rsplit("/", 1)[-1] == "bringup":  # `bringup` alone names the tool
        return " ".join(words[i + 1 :])
    if (
        words[i : i + 3]
        and words[i].rsplit("/", 1)[-1].startswith("python")
        and words[i + 1 : i + 3]
        == [
            "-m",
            "bringup.cli",
        ]
    ):
        return " ".join(words[i + 3 :])
    return None


def _split_top(text: str) -> list[str]:
    """`a; b && c` -> [a, b, c], outside brackets."""
    out, depth, cur = [], 0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        depth += ch == "["
        depth -= ch == "]"
        if depth == 0 and (ch == ";" or text.startswith("&&", i)):
            out.append(cur)
            cur = ""
            i += 2 if ch == "&" else 1
            continue
        cur += ch
        i += 1
    return [*out, cur]


def doc_commands() -> list[tuple[str, str]]:
    """(where, command line) for every bringup command in the docs."""
    found: list[tuple[str, str]] = []
    for doc in DOCS:
        fenced, lang, pending = False, "", ""
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            where = f"{doc.relative_to(REPO)}:{n}"
            m = re.match(r"^\s*```(\w*)", line)
            if m:
                fenced, lang, pending = not fenced, m.group(1), ""
                continue
            if fenced:
                if lang not in ("", "bash", "sh", "shell", "console"):
                    continue
                if line.rstrip().endswith("\\"):
                    pending += line.rstrip()[:-1] + " "
                    continue
                text, pending = pending + line, ""
                text = re.split(r"\s#\s|\s#$", " " + text, maxsplit=1)[0]
                for part in _split_top(text):
                    tail = _command_tail(part)
                    if tail is not None:
                        found.append((where, tail))
                continue
            if re.match(r"^(    |\t)\s*\S", line):  # an indented code block: a column gap ends the command
                for part in _split_top(re.split(r"\s#\s|\s{3,}(?=[^\s\-\[])", line.strip(), maxsplit=1)[0]):
                    tail = _command_tail(part)
                    if tail is not None:
                        found.append((where, tail))
                continue
            for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", line):
                span = span.replace("\\|", "|")
                for part in _split_top(span):
                    tail = _command_tail(part)
                    if tail is not None:
                        found.append((where, tail))
    return found


def _forms(tail: str) -> list[list[str]] | None:
    """The argument lists to parse for one documented command (None: not a command, skipped)."""
    tail = tail.replace("\\|", "|")
    shortest, longest = tail, tail
    while _GROUP.search(shortest):
        shortest = _GROUP.sub("", shortest)
    while _GROUP.search(longest):
        longest = _GROUP.sub(lambda m: m.group(1).split("|")[0].strip(), longest)
    out = []
    for text in dict.fromkeys((shortest, longest)):
        try:
            words = shlex.split(text)
        except ValueError:
            return None
        words = [("2" if w in NUMERIC else w if w == "..." else w.removesuffix("...")) for w in words]
        out.append(words)
    return out


def _positionals(words: list[str], options_with_values: set[str]) -> list[str]:
    """The words that are not options or option values: the sub-command, its action, its arguments."""
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-"):
            out.append(w)
        i += 1 + (w.startswith("-") and w in options_with_values and "=" not in w)
    return out


def test_every_documented_command_parses() -> None:
    from bringup.cli import build_parser

    cmds = doc_commands()
    # plugins the docs import (docs/examples/bringup_kernels.py offers `bringup kernels`): imported first,
    # as `--import` does, where they exist here
    sys.path.insert(0, str(REPO / "docs" / "examples"))
    try:
        for _, tail in cmds:
            for m in re.findall(r"--import[ =](\S+)", tail):
                if importlib.util.find_spec(m.split(".")[0]) is not None:
                    importlib.import_module(m)
        parser = build_parser()
    finally:
        sys.path.remove(str(REPO / "docs" / "examples"))
    with_values: set[str] = set()  # options that take a value, in every parser and sub-parser
    todo = [parser]
    while todo:
        for a in todo.pop()._actions:
            with_values |= {s for s in a.option_strings if a.nargs != 0}
            if isinstance(a, argparse._SubParsersAction):
                todo += list(a.choices.values())
    checked, failures, skipped = 0, [], []
    for where, tail in cmds:
        forms = _forms(tail)
        pos = _positionals(forms[0], with_values) if forms else []
        if forms is None or (pos and _PLACEHOLDER.match(pos[0])) or any("|" in w for w in pos[:2]):
            skipped.append(f"{where}: bringup {tail}")
            continue
        for words in forms:
            if len(words) == 1 and not words[0].startswith("-"):
                words = [words[0], "--help"]  # a command named in prose (`bringup compare`): it exists
            # an elided value (`--source ...`) gets a dummy one
            words = [w for i, w in enumerate(words) if w != "..." or (i and words[i - 1] in with_values)]
            words = ["x" if w == "..." else w for w in words]
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    parser.parse_args(words)
                    rc = 0
                except SystemExit as e:
                    rc = e.code
            checked += 1
            if rc != 0:
                failures.append(f"{where}: bringup {' '.join(words)}\n    {err.getvalue().strip()}")
    assert checked >= 100, (checked, skipped)  # the docs show well over a hundred
    assert not failures, "documented commands that do not parse:\n" + "\n".join(failures)
    print(f"{checked} parsed; skipped:", *skipped, sep="\n  ")
    assert len(skipped) <= 10, skipped  # a new kind of line skipped is a gap in this test: look at it
