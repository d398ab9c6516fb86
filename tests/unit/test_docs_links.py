"""Every relative link of README.md and docs/*.md names a file that exists and, with a ``#fragment``, a heading of
that file (GitHub's anchor rule): the README was split into docs pages, and a moved section must not leave a dead
link behind (issue 28, item 7)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "RELIABILITY.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    return {_anchor(match) for match in re.findall(r"(?m)^#{1,6} (.+)$", text)}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    dead: list[str] = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        file = page if not path else (page.parent / path).resolve()
        if not file.exists():
            dead.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif fragment and file.suffix == ".md" and fragment not in _anchors(file):
            dead.append(f"{target}: no heading #{fragment} in {file.relative_to(ROOT)}")
    assert dead == [], f"dead links in {page.relative_to(ROOT)}:\n" + "\n".join(dead)
