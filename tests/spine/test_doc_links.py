"""The docs a newcomer reads hold together: every relative link in README.md and docs/*.md names a file that
exists and, with a `#fragment`, a heading that exists there (GitHub's anchors); README stays a page read to
the end (<= 250 lines), the reference is in docs/ and README links to it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file (lower case, punctuation dropped, spaces to '-', repeats
    numbered)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in doc.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(doc: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link outside code (inline code spans and fenced blocks left out)."""
    out, fenced = [], False
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(prose):
            if not re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                out.append((n, target))
    return out


def test_every_relative_link_resolves() -> None:
    broken = []
    checked = 0
    for doc in DOCS:
        for n, target in links(doc):
            path, _, frag = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(REPO)}:{n}: {target}"
            checked += 1
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif frag and dest.suffix == ".md" and frag not in anchors(dest):
                broken.append(f"{where} (no heading #{frag} in {dest.relative_to(REPO)})")
    assert checked > 100
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_anchor_rule_matches_githubs() -> None:
    doc = REPO / "docs" / "zoo.md"
    assert "verdict-power-benchverdict_powerpy" in anchors(doc)  # "Verdict power (`bench/verdict_power.py`)"
    assert "bringup-devices" in anchors(REPO / "docs" / "cli.md")  # "`bringup devices`"


def test_readme_is_a_page_read_to_the_end() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for doc in ("cli", "install", "figures", "development", "devices", "suites", "sample", "testing"):
        assert f"(docs/{doc}.md" in text, f"README does not link docs/{doc}.md"
    for section in ("## The two commands", "## What a scorecard looks like", "## Install next to your own torch"):
        assert section in text
    for section in ("## The commands", "## Adding a device plugin", "## Where results go"):
        assert section in text
