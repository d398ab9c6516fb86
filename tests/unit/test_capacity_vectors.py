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


@pytest.mark.parametrize(
    "config", [c for c in CONFIGS if c.name.startswith("text-pipeline-1kb-")], ids=lambda c: c.name
)
def test_gw_data_8_5_a_1_kb_task_writes_at_most_8_units(config: object) -> None:
    """The committed vectors' write units, metered on moto by ``make vectors``: table plus indexes, at most 8 per
    task with 1 KB payloads, and no result item (its result is read from the checkpoint line, GW-DATA-10)."""
    vector = json.loads(path_of(config).read_text(encoding="utf-8"))  # type: ignore[arg-type]
    totals = vector["totals"]
    assert totals["wru_table"] + totals["wru_index"] <= 8, totals
    assert not [key for key in vector["requests"] if key.endswith("/RESULT")]
