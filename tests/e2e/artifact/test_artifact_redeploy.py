"""A redeploy with work in flight, on what ``cdk deploy`` ships: version 1 of a project runs on the artifact mesh, tasks
pause, stop in the middle of a loop and wait in a queue; version 2 (a real synthesis of the changed project: the flow
file with statements inserted before the pause, one actor's code changed, an actor added and one dropped) is applied
with :meth:`ArtifactMesh.update`, moto's state kept; everything is resumed and drained.

"As version 1 says" is the version 1 flow run as plain Python, with each actor's code as of the hop that ran it:
handler code is not pinned, so a ``step`` hop run after the update runs version 2's ``step``. The update stops every
poller before it changes anything and starts them after, so which hops ran before it is known exactly. Each
assembly is synthesized once per content (``tests/synthcache.py``, the project's files hashed with it).

Then version 1's program is deleted from the bucket (``asya flow gc`` keeps it while a paused task names it, so it
is deleted by hand, as a lost object would be) and a resumed version 1 task fails with ``FlowVersionMissing``.

The module sorts before test_artifact_suite.py, whose grant drift check must stay the session's last test (this
mesh, like the edge modules', has its own IAM proxy and is stopped when the module ends).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from asya.manifest import load_manifest
from asya.tableschema import program_key
from asya_local.artifact.mesh import ArtifactMesh
from asya_local.flowgc import collect, default_grace
from tests.e2e.artifact.conftest import CACHE
from tests.synthcache import cached_cdk_out, synthesize
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.artifact, pytest.mark.xdist_group("artifact")]

_MANIFEST: Final = """\
namespace: upgr
defaults:
  timeout: 20s
actors:
  prepare: {handler: common.prepare}
  step: {handler: stepper.step, code: stepcode/}
  check: {handler: common.check}
  finish: {handler: common.finish}
%s
flows:
  journey:
    source: flows/journey.py
    timeout: 900
"""
#: Version 1 has an actor no flow calls (its queue and mapping go with version 2), version 2 one it calls.
_V1_ACTORS: Final = "  spare: {handler: common.spare}"
_V2_ACTORS: Final = "  audit: {handler: common.audit}"
_FLOW_V1: Final = """\
from asya.flows import flow, pause


@flow(max_iterations=10)
async def journey(state):
    state = prepare(state)
    state["rounds"] = 0
    while state["rounds"] < state["loops"]:
        state["rounds"] += 1
        state = step(state)
        state = check(state)
    if state["review"]:
        state = await pause(state, prompt="Go on?", fields=[{"name": "approved", "type": "boolean"}])
    state = finish(state)
    return state
"""
#: Version 2: statements inserted before the pause (a mutation and a call), so every later position moves.
_INSERTED: Final = '    state["version"] = 2\n    state = audit(state)\n'
_PAUSE_AT: Final = '    if state["review"]:\n'
_FLOW_V2: Final = _FLOW_V1.replace(_PAUSE_AT, _INSERTED + _PAUSE_AT)
_COMMON: Final = """\
def _mark(state, name):
    state["trace"] = [*state.get("trace", []), name]
    return state


def prepare(state):
    return _mark(state, "prepare")


def check(state):
    return _mark(state, "check")


def finish(state):
    return _mark(state, "finish")


def spare(state):
    return _mark(state, "spare")


def audit(state):
    return _mark(state, "audit")
"""
_STEPPER: Final = """\
CODE = "step@%s"


def step(state):
    state["trace"] = [*state.get("trace", []), CODE]
    return state
"""
_RESUME: Final = {"approved": True}


def _write(root: Path, *, version: int) -> Path:
    """The project of ``version`` under ``root``; its manifest."""
    files = {
        "asya.yaml": _MANIFEST % (_V1_ACTORS if version == 1 else _V2_ACTORS),
        "flows/journey.py": _FLOW_V1 if version == 1 else _FLOW_V2,
        "functions/common.py": _COMMON,
        "stepcode/stepper.py": _STEPPER % f"v{version}",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "asya.yaml"


def _plain(version: int, payload: dict[str, Any], *, steps: list[int]) -> dict[str, Any]:
    """The flow of ``version`` run as plain Python; the ``i``-th ``step`` call runs version ``steps[i]``'s code, the
    pause merges :data:`_RESUME`."""
    common: dict[str, Any] = {}
    exec(compile(_COMMON, "functions/common.py", "exec"), common)
    codes = iter(steps)

    def step(state: dict[str, Any]) -> dict[str, Any]:
        module: dict[str, Any] = {}
        exec(compile(_STEPPER % f"v{next(codes)}", "stepcode/stepper.py", "exec"), module)
        result: dict[str, Any] = module["step"](state)
        return result

    namespace: dict[str, Any] = {}
    exec(compile(_FLOW_V1 if version == 1 else _FLOW_V2, "flows/journey.py", "exec"), namespace)
    namespace.update({name: common[name] for name in ("prepare", "check", "finish", "audit")}, step=step)
    namespace["pause"] = lambda state, **_: _Awaitable({**state, **_RESUME})
    coroutine = namespace["journey"](json.loads(json.dumps(payload)))
    try:
        coroutine.send(None)
    except StopIteration as done:
        assert next(codes, None) is None, "the plain run made fewer step calls than expected"
        return dict(done.value)
    raise AssertionError("the plain run of the flow suspended")


class _Awaitable(dict[str, Any]):
    def __await__(self) -> Generator[Any, None, dict[str, Any]]:
        yield from ()
        return dict(self)


def _assembly(tmp_path_factory: pytest.TempPathFactory, version: int) -> tuple[Path, Path]:
    """The project of ``version`` and its ``cdk.out`` (from the synthesis cache when this content was synthesized)."""
    root = tmp_path_factory.mktemp(f"upgrade-v{version}")
    manifest = _write(root, version=version)
    out, _ = cached_cdk_out(
        manifest,
        lambda outdir: synthesize(outdir, manifest=manifest),
        name=f"upgrade-v{version}",
        inputs=[root / "flows", root / "functions", root / "stepcode"],
    )
    return manifest, out


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, Path]]:
    return {version: _assembly(tmp_path_factory, version) for version in (1, 2)}


@pytest.fixture(scope="module")
def mesh(versions: dict[int, tuple[Path, Path]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtifactMesh]:
    with ArtifactMesh(versions[1][1], cache_dir=CACHE, log_dir=tmp_path_factory.mktemp("upgrade-logs")) as running:
        assert running.iam_enforced
        yield running


def _create(mesh: ArtifactMesh, payload: dict[str, Any]) -> str:
    response = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"flow": "journey"}, json={"payload": payload}, timeout=30)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _view(mesh: ArtifactMesh, task_id: str) -> dict[str, Any]:
    response = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=30)
    assert response.status_code == 200, response.text
    view: dict[str, Any] = response.json()
    return view


def _ended(mesh: ArtifactMesh, task_id: str) -> dict[str, Any]:
    return wait_for(
        lambda: (v := _view(mesh, task_id))["status"] in ("succeeded", "failed", "canceled") and v,
        f"task {task_id} to end",
        limit=300,
    )


def _paused(mesh: ArtifactMesh, task_id: str) -> None:
    """Paused, and its envelope stored by x-pause (a resume before that is refused, P-PAUSE-5)."""
    wait_for(lambda: _view(mesh, task_id)["status"] == "paused", f"task {task_id} to pause", limit=300)
    s3, bucket = mesh.clients.s3, mesh.resources.bucket
    wait_for(
        lambda: s3.list_objects_v2(Bucket=bucket, Prefix=f"paused/{task_id}.json").get("KeyCount", 0),
        f"x-pause to store task {task_id}",
    )


def _resume(mesh: ArtifactMesh, task_id: str) -> None:
    answer = httpx.post(f"{mesh.url}/api/v1/mesh/{task_id}/resume", json={"input": _RESUME}, timeout=30)
    assert answer.status_code == 202, answer.text


def _queued(mesh: ArtifactMesh, actor: str) -> int:
    attributes = mesh.clients.sqs.get_queue_attributes(
        QueueUrl=mesh.resources.queue_urls[actor], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_tasks_in_flight_finish_on_their_version_across_an_update_and_fail_when_its_program_is_gone(
    mesh: ArtifactMesh, versions: dict[int, tuple[Path, Path]]
) -> None:
    v1 = load_manifest(versions[1][0]).flows["journey"].program
    v2_manifest = load_manifest(versions[2][0])
    v2 = v2_manifest.flows["journey"].program
    assert v1 is not None and v2 is not None and v1.digest != v2.digest
    mesh.clear_denied()

    # -- version 1: paused, in the middle of a loop, waiting in a queue ----------------------------------------------
    paused = _create(mesh, {"loops": 1, "review": True})
    lost = _create(mesh, {"loops": 1, "review": True})
    for task_id in (paused, lost):
        _paused(mesh, task_id)
    mesh.stop_pollers(["check"])
    looping = _create(mesh, {"loops": 3, "review": False})
    wait_for(lambda: _queued(mesh, "check") == 1, "the looping task to wait at check after its first step")
    mesh.stop_pollers(["prepare"])
    queued = _create(mesh, {"loops": 2, "review": False})
    wait_for(lambda: _queued(mesh, "prepare") == 1, "the queued task to wait at prepare")

    # -- the update ---------------------------------------------------------------------------------------------------
    before = {_actor(f): f for f in _functions(mesh)}
    spare = _queue_names(mesh, "spare")
    change = mesh.update(versions[2][1])
    after = {_actor(f): f for f in _functions(mesh)}
    summary = change.summary()
    assert summary["queues added"] == sorted(_queue_names(mesh, "audit"))
    assert summary["queues removed"] == sorted(spare)
    assert (summary["functions added"], summary["functions removed"]) == (
        [after["audit"].logical_id],
        [before["spare"].logical_id],
    )
    assert after["step"].code_dir.name != before["step"].code_dir.name, "step's code asset changed"
    assert after["check"].code_dir.name == before["check"].code_dir.name, "the common code did not"
    assert after["step"].logical_id in summary["functions changed"]
    for name in spare:
        with pytest.raises(mesh.clients.sqs.exceptions.QueueDoesNotExist):
            mesh.clients.sqs.get_queue_url(QueueName=name)
    assert _view(mesh, paused)["status"] == "paused", "the update kept the table's items"

    # -- version 2 -----------------------------------------------------------------------------------------------------
    fresh = _create(mesh, {"loops": 1, "review": True})
    _paused(mesh, fresh)
    for task_id in (paused, fresh):
        _resume(mesh, task_id)

    expected = {
        paused: _plain(1, {"loops": 1, "review": True}, steps=[1]),
        looping: _plain(1, {"loops": 3, "review": False}, steps=[1, 2, 2]),
        queued: _plain(1, {"loops": 2, "review": False}, steps=[2, 2]),
        fresh: _plain(2, {"loops": 1, "review": True}, steps=[2]),
    }
    # the plain runs tell the versions apart, so finishing on the wrong program cannot pass
    assert expected[queued] != _plain(2, {"loops": 2, "review": False}, steps=[2, 2])
    assert expected[paused]["trace"] == ["prepare", "step@v1", "check", "finish"]
    assert expected[fresh]["trace"] == ["prepare", "step@v2", "check", "audit", "finish"]
    for task_id, result in expected.items():
        view = _ended(mesh, task_id)
        assert (view["status"], view["result"]) == ("succeeded", result), (task_id, view)

    # -- version 1's program gone ------------------------------------------------------------------------------------
    s3, bucket = mesh.clients.s3, mesh.resources.bucket
    kept = collect(v2_manifest, s3=s3, bucket=bucket, grace=default_grace(v2_manifest), now=lambda: datetime.now(UTC))
    assert v1.digest in kept.kept, "flow gc keeps the program a paused task names"
    s3.delete_object(Bucket=bucket, Key=program_key(v1.digest))
    # a warm environment keeps the programs it read, as Lambda's does: x-resume's are retired, so the next resume
    # runs in a new one that must read the store
    resumer = next(f for f in _functions(mesh) if _actor(f) == "x-resume")
    mesh.deploy_code(resumer.name)
    _resume(mesh, lost)
    failed = _ended(mesh, lost)
    assert failed["status"] == "failed", failed
    assert "FlowVersionMissing" in failed["error"] and v1.digest in failed["error"] and "journey" in failed["error"]
    # S3 answers a read of a missing key with 403 without ListBucket: x-resume's listing (programs.list) told it
    # missing; nothing else was denied
    assert [d for d in mesh.denied() if "missing key" not in d] == [], mesh.denied()


def _queue_names(mesh: ArtifactMesh, actor: str) -> list[str]:
    resources = mesh.resources
    return [url.rsplit("/", 1)[-1] for url in (resources.queue_urls[actor], resources.dlq_urls[actor])]


def _functions(mesh: ArtifactMesh) -> list[Any]:
    spec = mesh.spec
    assert spec is not None
    return list(spec.functions.values())


def _actor(function: Any) -> str:
    return str(function.environment.get("ASYA_ACTOR", ""))
