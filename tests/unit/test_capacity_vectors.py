"""The committed per-task request vectors against a recount (about a second, in memory: bench.fakes clients):
a change to the requests a task makes fails here until the vectors are regenerated."""

from __future__ import annotations

import json

import pytest

from bench.vectors import CONFIGS, REGENERATE, compare, path_of, recount

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_committed_vector_matches_a_recount(config: object) -> None:
    committed = json.loads(path_of(config).read_text(encoding="utf-8"))["requests"]  # type: ignore[arg-type]
    diff = compare(committed, recount(config))  # type: ignore[arg-type]
    assert not diff, f"the requests per task changed; regenerate the vectors with `{REGENERATE}`:\n{diff}"


def test_a_changed_count_is_reported_with_the_regeneration_command() -> None:
    diff = compare({"gateway|sqs|SendMessage|queue:normalize": 1.0}, {"gateway|sqs|SendMessage|queue:normalize": 2.0})
    assert diff == "  gateway|sqs|SendMessage|queue:normalize: committed 1.0, counted now 2.0"
