"""A paused task crossing a redeploy under owner isolation (``gateway.auth.mode: jwt``, ``owner_only``), on the
artifact mesh: a flow whose first statement is a fan-out (its slices sent by the gateway at create) pauses after the
merge; version 2 (a real synthesis: a statement inserted before the pause) is applied with
:meth:`ArtifactMesh.update`; another subject's resume is answered as an unknown task (GW-EDGE-7), the owner's runs
the rest of version 1's program; a retry from a recorded step runs that step's program (version 1), a plain retry the
current one (version 2), P-FLOWV-6.

The JWKS issuer listens on a fixed loopback port when it is free, so the assemblies (which name its URL) repeat and
come from the synthesis cache (``tests/synthcache.py``); a taken port costs one synthesis per version. The module
sorts before test_artifact_suite.py, as test_artifact_redeploy.py does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from asya_local.artifact.mesh import ArtifactMesh
from tests.e2e.artifact.conftest import CACHE, REPO
from tests.e2e.artifact.edge import JwksIssuer
from tests.synthcache import cached_cdk_out, synthesize
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.artifact, pytest.mark.xdist_group("artifact")]

ISSUER: Final = "https://idp.example.com/crossing"
AUDIENCE: Final = "asya-crossing"
#: A port of this checkout's own (stable across runs of it, apart from another checkout's).
PORT: Final = 20000 + int(hashlib.sha256(str(REPO).encode()).hexdigest(), 16) % 20000
_MANIFEST: Final = """\
namespace: cross
defaults:
  timeout: 20s
actors:
  left: {handler: sides.left}
  right: {handler: sides.right}
  finish: {handler: sides.finish}
flows:
  crossing:
    source: flows/crossing.py
    timeout: 900
    history: steps
gateway:
  auth:
    mode: jwt
    jwks_url: %s
    issuer: %s
    audience: %s
    owner_only: true
"""
_FLOW_V1: Final = """\
from asya.flows import flow, pause


@flow
async def crossing(state):
    state["parts"] = [left(state), right(state)]
    state = await pause(state, prompt="Merge?", fields=[{"name": "approved", "type": "boolean"}])
    state = finish(state)
    return state
"""
_PAUSE_AT: Final = "    state = await pause("
_FLOW_V2: Final = _FLOW_V1.replace(_PAUSE_AT, '    state["version"] = 2\n' + _PAUSE_AT)
_SIDES: Final = """\
def left(state):
    return {"side": "left", "n": state["n"]}


def right(state):
    return {"side": "right", "n": state["n"] * 2}


def finish(state):
    state["finished"] = True
    return state
"""
_RESUME: Final = {"approved": True}
#: What version 1 finishes with for ``{"n": 3}`` resumed with :data:`_RESUME` (version 2 adds ``version: 2``).
_V1_RESULT: Final = {
    "n": 3,
    "parts": [{"side": "left", "n": 3}, {"side": "right", "n": 6}],
    "approved": True,
    "finished": True,
}


def _assembly(root: Path, jwks_url: str, version: int) -> Path:
    files = {
        "asya.yaml": _MANIFEST % (jwks_url, ISSUER, AUDIENCE),
        "flows/crossing.py": _FLOW_V1 if version == 1 else _FLOW_V2,
        "functions/sides.py": _SIDES,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    manifest = root / "asya.yaml"
    out, _ = cached_cdk_out(
        manifest,
        lambda outdir: synthesize(outdir, manifest=manifest),
        name=f"crossing-v{version}",
        inputs=[root / "flows", root / "functions"],
    )
    return out


@pytest.fixture(scope="module")
def issuer() -> Iterator[JwksIssuer]:
    with JwksIssuer(issuer=ISSUER, audience=AUDIENCE, port=PORT) as running:
        yield running


@pytest.fixture(scope="module")
def assemblies(issuer: JwksIssuer, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    return {v: _assembly(tmp_path_factory.mktemp(f"crossing-v{v}"), issuer.jwks_url, v) for v in (1, 2)}


@pytest.fixture(scope="module")
def mesh(assemblies: dict[int, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtifactMesh]:
    with ArtifactMesh(assemblies[1], cache_dir=CACHE, log_dir=tmp_path_factory.mktemp("crossing-logs")) as running:
        assert running.iam_enforced
        yield running


class _Subject:
    """Requests of one token subject, unsigned to the API front (as a client of a ``jwt`` API sends them)."""

    def __init__(self, mesh: ArtifactMesh, issuer: JwksIssuer, sub: str) -> None:
        self._client = httpx.Client(
            base_url=mesh.api_url, timeout=30, headers={"Authorization": f"Bearer {issuer.token(sub=sub)}"}
        )

    def close(self) -> None:
        self._client.close()

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self._client.post(path, json=body)

    def get(self, path: str) -> httpx.Response:
        return self._client.get(path)

    def view(self, task_id: str) -> dict[str, Any]:
        response = self.get(f"/api/v1/mesh/{task_id}")
        assert response.status_code == 200, response.text
        view: dict[str, Any] = response.json()
        return view

    def status(self, task_id: str, *wanted: str) -> dict[str, Any]:
        return wait_for(
            lambda: (v := self.view(task_id))["status"] in wanted and v, f"task {task_id} to be {wanted}", limit=300
        )


def _paused(mesh: ArtifactMesh, subject: _Subject, task_id: str) -> dict[str, Any]:
    """The view of ``task_id`` once paused and its envelope stored by x-pause (the view then shows its state)."""
    view = subject.status(task_id, "paused", "failed")
    assert view["status"] == "paused", view
    s3, bucket = mesh.clients.s3, mesh.resources.bucket
    wait_for(
        lambda: s3.list_objects_v2(Bucket=bucket, Prefix=f"paused/{task_id}.json").get("KeyCount", 0),
        "x-pause to store the paused envelope",
    )
    return subject.view(task_id)


def test_a_paused_fan_out_task_crosses_an_update_owner_only_and_retries_on_its_recorded_program(
    mesh: ArtifactMesh, issuer: JwksIssuer, assemblies: dict[int, Path]
) -> None:
    alice, bob = _Subject(mesh, issuer, "alice"), _Subject(mesh, issuer, "bob")
    try:
        _cross(mesh, alice, bob, assemblies[2])
    finally:
        alice.close()
        bob.close()
    assert [d for d in mesh.denied() if "missing key" not in d] == [], mesh.denied()


def _cross(mesh: ArtifactMesh, alice: _Subject, bob: _Subject, version_2: Path) -> None:
    mesh.clear_denied()
    created = alice.post("/api/v1/mesh/?flow=crossing", {"payload": {"n": 3}})
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    paused = _paused(mesh, alice, task_id)
    assert paused["paused_state"]["parts"] == _V1_RESULT["parts"], "the fan-out merged before the pause"

    mesh.update(version_2)

    refused = bob.post(f"/api/v1/mesh/{task_id}/resume", {"input": _RESUME})
    assert refused.status_code == 404, refused.text
    assert bob.get(f"/api/v1/mesh/{task_id}").status_code == 404
    assert alice.view(task_id)["status"] == "paused", "another subject's resume changed nothing"
    resumed = alice.post(f"/api/v1/mesh/{task_id}/resume", {"input": _RESUME})
    assert resumed.status_code == 202, resumed.text
    done = alice.status(task_id, "succeeded", "failed")
    assert (done["status"], done["result"]) == ("succeeded", _V1_RESULT), done

    # the retry from finish needs finish's step in the run history (its object may land after the task ended)
    def history_has_finish() -> bool:
        response = alice.get(f"/api/v1/mesh/{task_id}/history")
        steps = response.json().get("steps", []) if response.status_code == 200 else []
        return any(step["actor"] == "finish" for step in steps)

    wait_for(history_has_finish, "finish's step in the run history")
    assert bob.post(f"/api/v1/mesh/{task_id}/retry", {"from": "finish"}).status_code == 404
    replay = alice.post(f"/api/v1/mesh/{task_id}/retry", {"from": "finish"})
    assert replay.status_code == 201, replay.text
    replayed = alice.status(replay.json()["id"], "succeeded", "failed")
    assert (replayed["status"], replayed["result"]) == ("succeeded", _V1_RESULT), "the recorded program: version 1"

    again = alice.post(f"/api/v1/mesh/{task_id}/retry", {})
    assert again.status_code == 201, again.text
    current = _paused(mesh, alice, again.json()["id"])
    assert current["paused_state"]["version"] == 2, "a plain retry: version 2"
