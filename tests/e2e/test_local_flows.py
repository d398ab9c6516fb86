"""The example mesh's ``triage`` flow, written as Python (flows/triage.py) and compiled to continuations, end to end
over HTTP in the local mode, one payload per branch: which actors ran (from the run history) and the result.
P-FLOW-3..10: branches, mutations and loop tests run inside the layer (no step of their own in the history), the map
fans out through the flow's aggregator, and ``except KeyError`` catches failed slices once for the task."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from asya.manifest import Manifest
from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.e2e.conftest import Gateway
from tests.history import recorded_history

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def flow_mesh(example_manifest: Manifest) -> Iterator[LocalMesh]:
    with LocalMesh(example_manifest, port=0, record_history=True) as mesh:
        yield mesh


def _run(mesh: LocalMesh, payload: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The task view and the actors of its history's steps (the actor hops; crew deliveries are not recorded),
    oldest first."""
    task, steps = _steps(mesh, payload)
    return task, [s["actor"] for s in steps]


def _steps(mesh: LocalMesh, payload: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    client = Gateway(mesh.url)
    task_id = client.create(flow="triage", payload=payload)
    assert terminal_status(client.follow(task_id)[-1]) in ("succeeded", "failed")
    task = client.get(task_id)
    steps: list[dict[str, Any]] = recorded_history(mesh.url, task_id)["steps"]
    return task, steps


def test_positive_text_takes_the_plain_branch_with_no_fan_out_and_no_loop(flow_mesh: LocalMesh) -> None:
    """The test, the mutations, the empty map and the loop test cost no hop: two actor hops for the whole flow."""
    task, actors = _run(flow_mesh, {"text": "a good and happy day"})
    assert task["status"] == "succeeded"
    assert actors == ["normalize", "analyze"]
    result = task["result"]
    assert result["priority"] == "normal" and result["sections"] == [] and result["rounds"] == 0


def test_negative_text_summarises_fans_out_in_order_and_loops(flow_mesh: LocalMesh) -> None:
    """The negative branch, a 2-way map merged in order by the flow's aggregator, then two loop iterations."""
    parts = [{"chunk": 0, "text": "First part. More."}, {"chunk": 1, "text": "Second part here."}]
    task, actors = _run(flow_mesh, {"text": "a bad and awful day", "parts": parts, "reviews": 2})
    assert task["status"] == "succeeded", task
    assert actors[:3] == ["normalize", "analyze", "summarize"]
    # the two slices run in either order; the aggregator (crew) that merges them records no step of its own
    assert sorted(actors[3:5]) == ["summarize-chunk"] * 2
    assert actors[5:] == ["analyze", "analyze"]
    result = task["result"]
    assert result["priority"] == "high" and result["summary"].startswith("A negative text")
    assert [s["summary"] for s in result["sections"]] == ["First part.", "Second part here."]
    assert result["rounds"] == 2


def test_failed_slices_are_caught_once_for_the_task(flow_mesh: LocalMesh) -> None:
    """Two parts without text: both slices raise KeyError; the except runs once (P-FLOW-10), so the loop's analyze
    runs once."""
    task, steps = _steps(flow_mesh, {"text": "fine", "parts": [{"chunk": 0}, {"chunk": 1}], "reviews": 1})
    assert task["status"] == "succeeded", task
    assert [s["actor"] for s in steps[:2]] == ["normalize", "analyze"]
    assert [s["actor"] for s in steps].count("summarize-chunk") == 2
    # the KeyError the except caught shows on each failed slice's step, not a success
    errors = [s["error"] for s in steps if s["actor"] == "summarize-chunk"]
    assert len(errors) == 2 and all(
        e is not None and e.startswith("KeyError: ") and e.endswith("(caught by the flow's except)") for e in errors
    ), steps
    # both failed slices dispatch to the except with one fence: one analyze runs (sends), a second delivery, if the
    # history shows one, is absorbed by its hop claim and sends nothing
    ran = [s["actor"] for s in steps if s["outputs"]]
    assert ran.count("analyze") == 2, steps
    result = task["result"]
    assert result["sections"] == "unreadable parts" and result["rounds"] == 1
