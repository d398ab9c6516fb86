"""Slices that run at the same time on the local mesh (P-MAP-1..3): a map of 10 slices over an actor whose
``batch_size`` is 10 runs them all at once, and a map bounded to 2 never has more than 2 of its handlers running.
Both are checked with a barrier the slices meet at (tests/e2e/maps/functions/maps_actors.py), not with a clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from asya.manifest import load_manifest
from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.e2e.conftest import E2E_DIR, Gateway

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def maps_mesh() -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(E2E_DIR / "maps" / "asya.yaml"), port=0) as mesh:
        yield mesh


def test_p_map_3_ten_slices_of_a_batch_size_10_actor_run_at_the_same_time(maps_mesh: LocalMesh) -> None:
    assert maps_mesh.esms["gate"].config.batch_size == 10
    assert maps_mesh.esms["gate"].config.max_concurrency == 10
    run = str(uuid.uuid4())
    items = [{"run": run, "i": i, "parties": 10} for i in range(10)]
    client = Gateway(maps_mesh.url)
    task_id = client.create(flow="wide", payload={"items": items})
    events = client.follow(task_id)
    task = client.get(task_id)
    assert terminal_status(events[-1]) == "succeeded", task.get("error")
    assert task["result"]["results"] == [{**item, "passed": True} for item in items]


def test_p_map_2_a_bounded_map_runs_at_most_its_bound_at_once(maps_mesh: LocalMesh, tmp_path: Path) -> None:
    import maps_actors  # the module the mesh's handlers run in this process (the actors' code directory)

    run, bound, count = str(uuid.uuid4()), 2, 8
    items = [{"run": run, "i": i, "bound": bound, "dir": str(tmp_path)} for i in range(count)]
    barrier, release = maps_actors.hold(run, bound)
    client = Gateway(maps_mesh.url)
    task_id = client.create(flow="bounded", payload={"items": items})
    try:
        barrier.wait(timeout=60)  # the first `bound` slices are in their handlers, held there
        running = maps_actors.in_flight(run)
        sent = _messages(maps_mesh, "counted")
    finally:
        release.set()
    # while they are held, only they were sent (plus, at most, the originals of copies handed back, P-MAP-3): the
    # aggregator starts the others as these finish, where an unbounded map sends all 8 at once
    assert running == bound
    assert sent <= 2 * bound - 1, sent
    events = client.follow(task_id)
    task = client.get(task_id)
    assert terminal_status(events[-1]) == "succeeded", task.get("error")
    assert task["result"]["results"] == [{**item, "counted": True} for item in items]
    assert task["result"]["done"] == count
    assert (tmp_path / "max_in_flight").read_text() == str(bound)


def _messages(mesh: LocalMesh, actor: str) -> int:
    """The messages in ``actor``'s queue, received or not."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = mesh.clients.sqs.get_queue_attributes(QueueUrl=mesh.resources.queue_urls[actor], AttributeNames=names)
    return sum(int(found["Attributes"][name]) for name in names)
