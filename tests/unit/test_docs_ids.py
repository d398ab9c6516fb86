"""Every spec statement id a user can meet in a message (an error, a log line, an OpenAPI summary) is explained in
the repository's own docs (docs/*.md), which stand alone: a user has no copy of the leads' spec (issue 28, item 6).
Docstrings and comments may cite the spec freely; they are for the developers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("layers/sidecar/python", "crew", "gateway", "local")
#: The access declaration's reasons cite the leads' spec for the developers who review grants; they reach users only
#: as IAM statement reasons (cdk-nag acknowledgments), so they are left out until docs/deploy.md explains each.
_EXEMPT = {"layers/sidecar/python/asya/access.py"}
_ID = re.compile(r"\b(?:P|GW)-[A-Z0-9]+-\d+\b")
_SECTION = re.compile(r"\b(?:PROTOCOL|GATEWAY) (?:section )?\d")


def _messages(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_every_statement_id_in_a_message_is_in_the_docs() -> None:
    documented = set(_ID.findall("\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))))
    missing: list[str] = []
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            if str(path.relative_to(ROOT)) in _EXEMPT:
                continue
            for line, text in _messages(path):
                missing += [f"{path.relative_to(ROOT)}:{line}: {found}" for found in _ID.findall(text)]
                missing += [f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}" for m in _SECTION.finditer(text)]
    missing = [entry for entry in missing if entry.rsplit(": ", 1)[1] not in documented]
    assert missing == [], "cited in a message but explained in no docs/*.md:\n" + "\n".join(missing)
