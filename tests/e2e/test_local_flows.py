"""The example mesh's ``triage`` flow, written as Python (flows/triage.py) and compiled to continuations, end to end
over HTTP in the local mode, one payload per branch: which actors ran (from the run history) and the result.
P-FLOW-3..9: branches, mutations and loop tests run inside the layer (no step of their own in the history), the map
fans out through the flow's aggregator, and ``except ConnectionError`` catches ``deliver``'s failure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from asya.manifest import Manifest
from asya_local.history import RunHistory
from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.e2e.conftest import Gateway
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def flow_mesh(example_manifest: Manifest) -> Iterator[LocalMesh]:
    with LocalMesh(example_manifest, port=0, history=RunHistory(namespace=example_manifest.namespace)) as mesh:
        yield mesh


def _run(mesh: LocalMesh, payload: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    client = Gateway(mesh.url)
    task_id = client.create(flow="triage", payload=payload)
    assert terminal_status(client.follow(task_id)[-1]) in ("succeeded", "failed")
    task = client.get(task_id)
    history = mesh.history
    assert history is not None

    def steps() -> list[str] | None:
        record = history.get(task_id)
        actors = [s["actor"] for s in (record or {}).get("steps", [])]
        return actors if "x-sink" in actors else None

    actors = wait_for(steps, "the run history to show the task's x-sink step")
    return task, [a for a in actors if a != "x-sink"]


def test_positive_short_text_takes_the_plain_branch_and_delivers(flow_mesh: LocalMesh) -> None:
    """No escalation, an empty map (no fan-out), no loop iteration, deliver succeeds: three hops for the whole
    flow, the tests and mutations cost none."""
    task, actors = _run(flow_mesh, {"text": "a good and happy day"})
    assert task["status"] == "succeeded"
    assert actors == ["normalize", "analyze", "deliver"]
    result = task["result"]
    assert result["priority"] == "normal" and result["sections"] == [] and result["rounds"] == 0
    assert result["delivered"] is True


def test_negative_long_offline_text_escalates_fans_out_loops_and_is_caught(flow_mesh: LocalMesh) -> None:
    """The negative branch, a 2-way map merged in order by x-fanin-flow-triage, the loop until the text is short,
    and deliver's ConnectionError caught by the except clause, which publishes."""
    text = "this bad awful slow service broke again and the support was terrible and sad all week long"
    parts = [{"chunk": 0, "text": "First part. More."}, {"chunk": 1, "text": "Second part here."}]
    task, actors = _run(flow_mesh, {"text": text, "parts": parts, "max_words": 4, "offline": True})
    assert task["status"] == "succeeded", task
    assert actors[:3] == ["normalize", "analyze", "summarize"]
    # the aggregator receives three slices (the state and two chunk summaries) and emits once, in any order
    fan = actors[3:8]
    assert sorted(fan) == ["summarize-chunk"] * 2 + ["x-fanin-flow-triage"] * 3
    assert actors[8:] == ["shorten", "shorten", "deliver", "publish"]
    result = task["result"]
    assert result["priority"] == "high" and result["summary"].startswith("A negative text")
    assert [s["summary"] for s in result["sections"]] == ["First part.", "Second part here."]
    assert result["rounds"] == 2 and result["words"] <= 4
    assert result["delivered"] is False and result["published"] is False


def test_the_loop_guard_of_the_condition_stops_after_three_rounds(flow_mesh: LocalMesh) -> None:
    task, actors = _run(flow_mesh, {"text": " ".join(["word"] * 64), "max_words": 1})
    assert task["status"] == "succeeded"
    assert actors == ["normalize", "analyze", "shorten", "shorten", "shorten", "deliver"]
    assert task["result"]["rounds"] == 3 and task["result"]["words"] == 8
