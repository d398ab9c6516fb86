"""The example mesh's ``documents`` flow end to end over HTTP in the local mode: gateway -> ``chunk`` (a fan-in actor)
-> ``summarize-chunk`` per chunk -> the aggregator ``x-fanin-chunk`` (its poller runs in ``asya dev``) -> ``digest``
-> x-sink. P-FANIN-1..3, P-AGG-3..6, P-SINK-5 under the origin id, GW-TASK-1."""

from __future__ import annotations

from typing import Any

import pytest

from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status

pytestmark = pytest.mark.e2e


def test_documents_flow_merges_the_chunk_summaries_in_order_under_the_task_id(
    local_mesh: LocalMesh, gateway: Any
) -> None:
    assert "x-fanin-chunk" in local_mesh.esms  # the aggregator's poller runs like any actor's
    sentences = [f"Sentence number {i} says something." for i in range(12)]
    task_id = gateway.create(flow="documents", payload={"text": " ".join(sentences), "chunk_words": 8})
    events = gateway.follow(task_id)
    assert terminal_status(events[-1]) == "succeeded"
    task = gateway.get(task_id)
    assert task["status"] == "succeeded" and task["flow"] == "documents"
    result = task["result"]
    # 12 sentences of 5 words, cut after 8 words or more: 6 chunks of 2 sentences, merged in chunk order
    assert result["chunks"] == 6 and result["words"] == 60
    assert result["summary"] == " ".join(sentences[0::2])
