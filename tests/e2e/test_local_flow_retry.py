"""``retry`` and ``retry --from STEP`` of a compiled-flow task on the local mesh (P-HIST-6, P-HIST-8, GW-HIST-2): the
new task runs under its own flow state (its own id as the flow's owner, the loop counters and try stack of the step),
so it ends under its own id: succeeded once the failing actor is fixed, failed at once (never at its deadline) when
the replay fails again."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.cli import main
from asya_local.mesh import LocalMesh
from tests.history import recorded_history
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

_MANIFEST = """\
namespace: replay
actors:
  prep: {handler: replay_actors.prep, code: functions}
  bump: {handler: replay_actors.bump, code: functions}
  merge: {handler: replay_actors.merge, code: functions}
flows:
  document: {source: flows/document.py, timeout: 600, history: steps}
"""
# merge yields two payloads until the file `merge.fixed` exists beside it: a flow call returns one (P-FLOW-11)
_ACTORS = """\
from pathlib import Path


def prep(payload):
    return {**payload, "prepped": True}


def bump(payload):
    return {**payload, "rounds": payload["rounds"] + 1}


def merge(payload):
    yield {**payload, "merged": True}
    if not Path(__file__).with_name("merge.fixed").exists():
        yield {**payload, "merged": "twice"}
"""
_FLOW = """\
# ruff: noqa: F821
from asya.flows import flow


@flow
async def document(state):
    state = await prep(state)
    state["rounds"] = 0
    while state["rounds"] < 2:
        state = await bump(state)
    try:
        state = await merge(state)
    except KeyError:
        state["caught"] = True
    return state
"""
_DOUBLE = "returned more than one payload in flow 'document'"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replay")
    (root / "functions").mkdir()
    (root / "flows").mkdir()
    (root / "asya.yaml").write_text(_MANIFEST, encoding="utf-8")
    (root / "functions" / "replay_actors.py").write_text(_ACTORS, encoding="utf-8")
    (root / "flows" / "document.py").write_text(_FLOW, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def mesh(project: Path) -> Iterator[LocalMesh]:
    manifest = load_manifest(project / "asya.yaml")
    with LocalMesh(manifest, port=0, record_history=True) as running:
        yield running


def _ended(mesh: LocalMesh, task_id: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        view: dict[str, Any] = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
        return view if view["status"] in ("succeeded", "failed", "canceled") else None

    return check


def _retry(mesh: LocalMesh, task_id: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(f"{mesh.url}/api/v1/mesh/{task_id}/retry", json=body, timeout=10)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    assert created["retry_of"] == task_id and created["id"] != task_id
    return created


def _failed_task(mesh: LocalMesh) -> str:
    created = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"flow": "document"}, json={"payload": {}}, timeout=10)
    assert created.status_code == 201, created.text
    task_id = str(created.json()["id"])
    view = wait_for(_ended(mesh, task_id), "the task to end")
    assert view["status"] == "failed" and _DOUBLE in str(view["error"]), view
    recorded_history(mesh.url, task_id, until=lambda steps: any(s["actor"] == "merge" for s in steps))
    return task_id


def test_a_replay_that_fails_again_fails_at_once_under_the_new_id(mesh: LocalMesh, project: Path) -> None:
    """Replayed from bump's second run, the flow reaches merge, which yields two payloads again: the new task fails
    with that error, under its own id, long before its 600 s deadline (the wait gives up after 60 s)."""
    (project / "functions" / "merge.fixed").unlink(missing_ok=True)
    old = _failed_task(mesh)
    new = _retry(mesh, old, {"from": "bump#2"})
    view = wait_for(_ended(mesh, new["id"]), "the replay to fail")
    assert view["status"] == "failed", view
    assert _DOUBLE in str(view["error"]) and "timed out" not in str(view["error"]), view


def test_a_replay_from_an_earlier_step_with_the_actor_fixed_succeeds_under_the_new_id(
    mesh: LocalMesh, project: Path
) -> None:
    """From bump's second run (inside the loop, one round counted) and from merge (inside the try): the flow goes
    on from there with the step's loop counters and try stack; a plain retry starts the flow anew; ``asya retry
    --from 3`` (merge's hop index) as well."""
    (project / "functions" / "merge.fixed").unlink(missing_ok=True)
    old = _failed_task(mesh)
    (project / "functions" / "merge.fixed").write_text("", encoding="utf-8")
    try:
        for body in ({"from": "bump#2"}, {"from": "merge"}, {}):
            new = _retry(mesh, old, body)
            view = wait_for(_ended(mesh, new["id"]), f"the retry {body} to end")
            assert view["status"] == "succeeded", (body, view)
            assert view["result"] == {"prepped": True, "rounds": 2, "merged": True}, (body, view)
            if body:
                _assert_own_state(mesh, old, new["id"])
        # the CLI, from a hop index: hop 3 is merge's (prep 0, bump 1 and 2)
        out, err = io.StringIO(), io.StringIO()
        code = main(["retry", old, "--from", "3"], env={"ASYA_URL": mesh.url}, stdout=out, stderr=err)
        assert (code, err.getvalue()) == (0, "")
        view = wait_for(_ended(mesh, out.getvalue().strip()), "the CLI's retry to end")
        assert view["status"] == "succeeded" and view["result"]["merged"] is True, view
    finally:
        (project / "functions" / "merge.fixed").unlink(missing_ok=True)


def _recorded(mesh: LocalMesh, task_id: str) -> list[dict[str, Any]]:
    """The task's steps in the run history the actors wrote to S3 (GW-HIST-1), once its first step is there."""

    def steps() -> list[dict[str, Any]] | None:
        answer = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}/history", timeout=10)
        found: list[dict[str, Any]] = answer.json().get("steps", []) if answer.status_code == 200 else []
        return found or None

    found: list[dict[str, Any]] = wait_for(steps, f"the recorded steps of {task_id}")
    return found


def _assert_own_state(mesh: LocalMesh, old: str, new: str) -> None:
    """The replay's first step carries a flow state owned by the new task, on the old task's program, and no header
    but ``retry_of`` names the old task."""
    old_state = _recorded(mesh, old)[0]["headers"]["x-asya-flow-state"]
    first = _recorded(mesh, new)[0]["headers"]
    state = first["x-asya-flow-state"]
    assert state["owner"] == new and state["digest"] == old_state["digest"], state
    assert [k for k, v in first.items() if old in str(v)] == ["retry_of"], first
