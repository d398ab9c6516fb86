"""The code cites a reference that ships with it: every statement id (``P-ROUTE-2``, ``GW-CREATE-5``) that a non-test
file names, in a docstring, a comment, a message or a console script, is defined in docs/protocol.md or docs/http.md,
which a user who clones the repository has. And the code carries no history: no revision markers (``(R3)``, ``R2:``)
and no issue numbers, which belong in ``git log``.

An id is *defined* when the reference states it: as a bold lead (``**P-HOP-1**``, ``**GW-SSE-22 (R3)**``) or inside a
bracket tag that closes a statement (``[P-ROUTE-2]``, ``[P-ABI-19, P-ABI-20]``, ``[GW-EVT-3 (R3)]``). A passing mention
(``(P-FLOW-13)``, ``see GW-DATA-8``) or a range (``P-NAME-1..4``) defines nothing. The docs' own ``(R3)`` legend stays:
only code is checked for markers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The trees of shipped and tooling code; files under a ``tests`` directory are left out.
CODE = ("layers", "crew", "gateway", "cdk", "deploy", "local", "bench", "chaos", "flows", "functions")
REFERENCE = ("docs/protocol.md", "docs/http.md")

_ID = re.compile(r"\b(?:P|GW)-[A-Z0-9]+(?:-[A-Z0-9]+)*-\d+[a-z]?\b")
_BOLD = re.compile(r"\*\*((?:P|GW)-[A-Z0-9-]+?\d+[a-z]?)(?:\s*\(R\d+\))?\*\*")
#: A bracket that is not a link's text: ``[P-ROUTE-2]``, not ``[protocol](protocol.md)``.
_TAG = re.compile(r"\[([^\[\]\n]+)\](?![(\[])")
#: ``P-NAME-1..4`` names a span of statements; it defines none of them, not even its first.
_RANGE = re.compile(r"\b(?:P|GW)-[A-Z0-9-]+?-\d+\.\.\d+\b")
#: ``R3`` standing alone, ``(R3)``, ``R2:``; never the ``R3`` inside an id's own name (``GW-CREATE-R3-7``).
_MARKER = re.compile(r"(?<![\w-])R\d+\b(?!-\d)|(?<=\d-)R\d+\b(?!-\d)")
#: Issue numbers and spec revisions, in any case; the leads' spec by name (``PROTOCOL section 8.5``, ``GATEWAY
#: GW-DATA-2``, ``GATEWAY.md``), which no user has: cite the plain id, which docs/ defines.
_HISTORY = re.compile(
    r"(?i:\bissues? #?\d+|\b(?:spec )?revision \d+)|\b(?:PROTOCOL|GATEWAY)(?: (?:sections? )?\d|\.md\b| (?=(?:P|GW)-))"
)


def _code_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *CODE],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [
        ROOT / name
        for name in sorted(set(listed))
        if not name.endswith(".md") and "tests" not in Path(name).parts and (ROOT / name).is_file()
    ]


def _definitions(text: str) -> set[str]:
    """The ids a page of the reference defines: bold leads and bracket tags, ranges left out."""
    ids = {found.group(0) for lead in _BOLD.findall(text) if (found := _ID.match(lead))}
    for tag in _TAG.findall(text):
        ids |= set(_ID.findall(_RANGE.sub("", tag)))
    return ids


def _defined() -> set[str]:
    return set().union(*(_definitions((ROOT / page).read_text(encoding="utf-8")) for page in REFERENCE))


def _cited() -> dict[str, list[str]]:
    cited: dict[str, list[str]] = {}
    for path in _code_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for found in _ID.findall(line):
                cited.setdefault(found, []).append(f"{path.relative_to(ROOT)}:{number}")
    return cited


def test_a_definition_is_a_bold_lead_or_a_bracket_tag() -> None:
    page = (
        "- **P-HOP-1** (R3) counts sends. **GW-SSE-22 (R3)** ids. A shift [P-ROUTE-2];\n"
        "values [P-ABI-19, P-ABI-20 (R3)]. Mentions define nothing: (P-FLOW-13), see GW-DATA-8,\n"
        "[the flows](flows.md#P-FLOW-1), [P-NAME-1..4], P-CKPT-1..4."
    )
    assert _definitions(page) == {"P-HOP-1", "GW-SSE-22", "P-ROUTE-2", "P-ABI-19", "P-ABI-20"}


def test_the_reference_defines_the_ids_it_leads_with() -> None:
    """The parser reads the real pages, so an empty set cannot pass the check below."""
    assert {"P-ROUTE-2", "P-HOP-1", "P-ACK-8", "GW-CREATE-5", "GW-SSE-22", "GW-CREATE-R3-7"} <= _defined()


def test_every_id_the_code_cites_is_defined_in_the_reference() -> None:
    defined = _defined()
    cited = _cited()
    assert len(cited) > 100, "the scan found almost no ids: is the code tree where the test looks?"
    missing = [f"{found} (first at {places[0]}, {len(places)} places)" for found, places in sorted(cited.items())]
    missing = [entry for entry in missing if entry.split(" ", 1)[0] not in defined]
    assert missing == [], f"{len(missing)} ids cited by the code are defined in neither {REFERENCE}:\n" + "\n".join(
        missing
    )


def test_the_code_carries_no_revision_markers_or_issue_numbers() -> None:
    found: list[str] = []
    for path in _code_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            hits = [m.group(0) for m in _MARKER.finditer(line)] + [m.group(0) for m in _HISTORY.finditer(line)]
            found += [f"{path.relative_to(ROOT)}:{number}: {hit!r}" for hit in hits]
    assert found == [], (
        f"{len(found)} revision markers or issue numbers in code (history goes in git log):\n" + "\n".join(found)
    )


def test_the_marker_pattern_tells_a_marker_from_an_id() -> None:
    def markers(text: str) -> list[str]:
        return [m.group(0) for m in _MARKER.finditer(text)]

    assert markers("the hop claim (P-ACK-7 (R3)); R2: fewer checks; GW-DATA-8 R3; GW-DATA-8-R3") == [
        "R3",
        "R2",
        "R3",
        "R3",
    ]
    assert markers("GW-CREATE-R3-7 and GW-DATA-8-R3-1 are ids") == []
    text = "fixed in issue 25; see issues 4 and 15, spec revision 2, PROTOCOL section 8, GATEWAY GW-DATA-2, GATEWAY.md"
    found = [m.group(0) for m in _HISTORY.finditer(text)]
    assert found == ["issue 25", "issues 4", "spec revision 2", "PROTOCOL section 8", "GATEWAY ", "GATEWAY.md"]
    assert list(_HISTORY.finditer("access.GATEWAY, the GATEWAY role; MCP Protocol 2026-07-28")) == []
