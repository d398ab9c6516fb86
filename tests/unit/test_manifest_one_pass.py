"""The manifest reports every cross-reference error in one pass, and its hints offer only names a deployment runs
(P-MAN-3; issue 20, point 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asya.exceptions import ManifestError
from asya.manifest import parse_manifest

pytestmark = pytest.mark.unit


def test_three_errors_in_one_message(tmp_path: Path) -> None:
    data = {
        "namespace": "one",
        "actors": {"prep": {"handler": "m.prep"}, "x-mine": {"handler": "m.mine"}},
        "flows": {
            "main": {"route": ["prep", "analyse"]},
            "other": {"route": ["prep", "x-sink"], "input_schema": {"type": "nonsense"}},
        },
    }
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data, base_dir=tmp_path, source="asya.yaml")
    assert str(caught.value) == (
        "asya.yaml: invalid manifest:\n"
        "  actors.x-mine: actor name 'x-mine' is reserved for crew (names starting with 'x-')\n"
        "  flows.main.route[1]: unknown actor 'analyse'; actors: prep, x-mine\n"
        "  flows.other.route[1]: 'x-sink' cannot be routed to; it is added by the runtime\n"
        "  flows.other.input_schema: invalid JSON Schema: 'nonsense' is not valid under any of the given schemas"
    )


def test_the_hint_never_offers_crew_that_would_be_refused(tmp_path: Path) -> None:
    data = {
        "namespace": "one",
        "actors": {"prep": {"handler": "m.prep"}, "analyze": {"handler": "m.analyze"}},
        "flows": {"main": {"route": ["prep", "x-paus"]}, "two": {"route": ["analyse"]}},
    }
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data, base_dir=tmp_path, source="asya.yaml")
    assert str(caught.value) == (
        "asya.yaml: invalid manifest:\n"
        "  flows.main.route[1]: unknown actor 'x-paus'; actors: analyze, prep\n"
        "  flows.two.route[0]: unknown actor 'analyse' (did you mean 'analyze'?); actors: analyze, prep"
    )
