"""A pause whose prompt quotes the state (P-FLOW-31), end to end on the local mesh: the continuation evaluates it at
the pause, and the task view, ``asya status`` and the resumed result agree with the plain-Python run of the same
file; a prompt that evaluates to no string fails the task at once with ``FlowError``."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.cli import main
from asya_local.mesh import LocalMesh
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

_MANIFEST = """\
namespace: prompt
actors:
  draft: {handler: prompt_actors.draft, code: functions}
  publish: {handler: prompt_actors.publish, code: functions}
flows:
  release: {source: flows/release.py, timeout: 600}
"""
_ACTORS = """\
def draft(payload):
    return {**payload, "title": payload["topic"], "text": "x" * payload["size"]}


def publish(payload):
    return {**payload, "published": payload["approved"]}
"""
_FLOW = """\
from asya.flows import flow, pause


@flow
async def release(state):
    state = await draft(state)
    state["length"] = len(state["text"])
    state = await pause(
        state,
        prompt="Publish " + state["title"] + " (" + str(state["length"]) + " chars)?",
        fields=[{"name": "approved", "type": "boolean"}],
    )
    state = await publish(state)
    return state
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prompt")
    (root / "functions").mkdir()
    (root / "flows").mkdir()
    (root / "asya.yaml").write_text(_MANIFEST, encoding="utf-8")
    (root / "functions" / "prompt_actors.py").write_text(_ACTORS, encoding="utf-8")
    (root / "flows" / "release.py").write_text(_FLOW, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def mesh(project: Path) -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(project / "asya.yaml"), port=0) as running:
        yield running


def _view(mesh: LocalMesh, task_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    return answer


def _create(mesh: LocalMesh, payload: dict[str, Any]) -> str:
    created = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"flow": "release"}, json={"payload": payload}, timeout=10)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _plain_run(project: Path, payload: dict[str, Any], resume: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The flow file run as plain Python with the stand-in ``pause`` (recording its prompt) and the real actors."""
    sys.path.insert(0, str(project / "functions"))
    try:
        import prompt_actors
    finally:
        sys.path.remove(str(project / "functions"))
    from asya.flows import pause

    prompts: list[str] = []
    namespace: dict[str, Any] = {}
    exec(compile((project / "flows" / "release.py").read_text(), "release.py", "exec"), namespace)

    def recording(state: dict[str, Any], *, prompt: str, fields: Any = None) -> Any:
        prompts.append(prompt)
        return pause(state, prompt=prompt, fields=fields, resume=resume)

    async def call(name: str, state: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = getattr(prompt_actors, name)(state)
        return result

    namespace["pause"] = recording
    namespace["draft"] = lambda s: call("draft", s)
    namespace["publish"] = lambda s: call("publish", s)
    result: dict[str, Any] = asyncio.run(namespace["release"](dict(payload)))
    return prompts[0], result


def test_p_flow_31_the_view_and_asya_status_show_the_prompt_evaluated_at_the_pause(
    mesh: LocalMesh, project: Path
) -> None:
    payload = {"topic": "Q3 Report", "size": 12}
    task_id = _create(mesh, payload)
    paused = wait_for(lambda: (v := _view(mesh, task_id))["status"] == "paused" and v, "the flow to pause")
    expected_prompt, expected_result = _plain_run(project, payload, {"approved": True})
    assert expected_prompt == "Publish Q3 Report (12 chars)?"
    assert paused["pause_metadata"]["prompt"] == expected_prompt, paused
    assert [f["name"] for f in paused["pause_metadata"]["fields"]] == ["approved"]
    out, err = io.StringIO(), io.StringIO()
    assert main(["status", task_id, "--url", mesh.url], env={}, stdout=out, stderr=err) == 0, err.getvalue()
    assert expected_prompt in err.getvalue()
    assert json.loads(out.getvalue())["paused_state"]["length"] == 12
    answer = httpx.post(f"{mesh.url}/api/v1/mesh/{task_id}/resume", json={"input": {"approved": True}}, timeout=10)
    assert answer.status_code in (200, 202), answer.text
    done = wait_for(lambda: (v := _view(mesh, task_id))["status"] in ("succeeded", "failed") and v, "the resume")
    assert done["status"] == "succeeded" and done["result"] == expected_result, done


def test_p_flow_31_a_prompt_that_does_not_evaluate_fails_the_task_at_the_pause(mesh: LocalMesh) -> None:
    """A number as the title: ``"Publish " + 3`` raises in plain Python, and fails the task at once on the mesh with
    the expression's error, never at its deadline."""
    task_id = _create(mesh, {"topic": 3, "size": 1})
    done = wait_for(lambda: (v := _view(mesh, task_id))["status"] in ("paused", "failed") and v, "the flow to end")
    assert done["status"] == "failed", done
    assert "line 8" in str(done["error"]) and "timed out" not in str(done["error"]), done
