"""The live deploy preview against moto (docs/deploy.md "Upgrading a mesh"): a mesh deployed with an actor that the
new manifest drops, with messages in its queue and DLQ, tasks paused on an older program of a flow and tasks running.
The preview counts them, ``asya deploy --plan`` refuses the removal, and ``--force`` fails those messages' tasks
through x-sump at once instead of leaving them to their deadline."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from asya import naming
from asya.flows import STATE_HEADER, Program, compile_flow
from asya.programstore import ProgramStore
from asya.tableschema import paused_key
from asya_local.cli import main
from asya_local.livestate import read_live
from asya_local.preview import drain_removed, refusal, render_live
from tests.functional.actors import NOW, REGION, drain
from tests.functional.actors import envelope as actor_envelope
from tests.functional.test_sump import Sump

pytestmark = pytest.mark.functional

GONE = "old-step"
REPO = Path(__file__).resolve().parents[2]


def _deployed_actor(mesh: Any) -> tuple[str, str]:
    """The queue and DLQ of actor ``GONE``, which the deployed version has and the new manifest (the example's) has
    not: tagged with the namespace as the deployed version's provision tagged them."""
    sqs, namespace = mesh.aws.sqs, mesh.resources.namespace
    tags = {"asya-namespace": namespace}
    dlq = sqs.create_queue(QueueName=naming.dlq_name(namespace, GONE), tags=tags)["QueueUrl"]
    queue = sqs.create_queue(QueueName=naming.queue_name(namespace, GONE), tags=tags)["QueueUrl"]
    return str(queue), str(dlq)


def _older_triage() -> Program:
    """The triage flow as an earlier version deployed it."""
    source = "async def triage(state):\n    state = await analyze(state)\n    return state\n"
    return compile_flow(source, flow="triage", filename="flows/triage.py", actors={"analyze"})


def _pause(mesh: Any, task_id: str, digest: str | None) -> None:
    state: dict[str, Any] = {"flow": "triage", "pc": 2}
    if digest is not None:
        state["digest"] = digest
    document = {"id": task_id, "headers": {STATE_HEADER: state}}
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=paused_key(task_id), Body=json.dumps(document))


def _live(mesh: Any, **kwargs: Any) -> Any:
    return read_live(
        mesh.manifest,
        sqs=mesh.aws.sqs,
        s3=mesh.aws.s3,
        dynamodb=mesh.aws.dynamodb,
        bucket=mesh.resources.bucket,
        table=mesh.resources.table,
        now=NOW + timedelta(seconds=60),
        **kwargs,
    )


def _work_in_flight(mesh: Any) -> tuple[list[str], Program]:
    """Two tasks waiting in GONE's queue and one in its DLQ; three tasks paused on triage (two on an older program,
    one without a digest); two running tasks of text-pipeline. The ids of the tasks GONE holds, and the older
    program."""
    queue, dlq = _deployed_actor(mesh)
    store = mesh.store(lambda: NOW)
    held = ["gone-1", "gone-2", "gone-dlq"]
    for task_id, url in zip(held, (queue, queue, dlq), strict=True):
        store.create_task(task_id=task_id, actor=GONE, flow="text-pipeline")
        mesh.aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(actor_envelope(task_id, curr=GONE, nxt=[])))
    older = _older_triage()
    programs = ProgramStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3)
    programs.publish(older)
    _pause(mesh, "paused-1", older.digest)
    _pause(mesh, "paused-2", older.digest)
    _pause(mesh, "paused-3", None)
    for task_id in ("run-1", "run-2"):
        store.create_task(task_id=task_id, actor="normalize", flow="text-pipeline")
    return held, older


def test_the_preview_counts_a_removed_actors_messages_and_the_work_in_flight(mesh: Any) -> None:
    _, older = _work_in_flight(mesh)
    state = _live(mesh)

    assert [a.name for a in state.removed] == [GONE], "only the actor the new manifest drops; no timer queue, no DLQ"
    (gone,) = state.removed
    assert (gone.queue.total, gone.dlq is not None and gone.dlq.total, gone.messages) == (2, 1, 3)
    assert state.blocking == (gone,)
    flows = {flow.name: flow for flow in state.flows}
    triage = flows["triage"]
    assert [(k.digest, k.paused) for k in triage.kept] == [(older.digest, 2)]
    assert triage.paused_unversioned == 1 and triage.paused == 3
    assert triage.changed, "the only program a task started on is the older one"
    assert triage.deployed_digest == older.digest
    assert flows["text-pipeline"].running == 5, "the two running tasks and the three GONE holds"
    assert state.cut == ()

    text = "\n".join(render_live(state))
    assert f"- {GONE}: queue 2 messages (2 waiting, 0 in flight, 0 delayed), DLQ 1 message" in text
    assert f"~ triage: program {older.digest[:12]} -> {mesh.manifest.flows['triage'].program.digest[:12]}" in text
    assert f"program {older.digest[:12]} (first used " in text and "): 2 paused" in text
    assert "approximate" in text and "at most 5000 reads each" in text

    problem = refusal(state)
    assert problem is not None and f"{GONE} (3)" in problem and "asya deploy --force" in problem
    assert f"asya dlq redrive {GONE}" in problem


def test_a_read_bound_cuts_the_counts_and_says_so(mesh: Any) -> None:
    _work_in_flight(mesh)
    state = _live(mesh, read_bound=1)
    assert set(state.cut) == {"paused", "running"}
    assert "a read bound of 1 cut the" in "\n".join(render_live(state))


def test_force_fails_the_removed_actors_tasks_through_x_sump_at_once(mesh: Any) -> None:
    held, _ = _work_in_flight(mesh)
    sump = Sump(mesh)
    state = _live(mesh)

    (done,) = drain_removed(state, sqs=mesh.aws.sqs, clock=lambda: NOW)
    assert (done.actor, done.queue, done.dlq, done.left_in_flight) == (GONE, 2, 1, 0)

    arrived = drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sump"])
    assert len(arrived) == 3
    assert {m["status"]["reason"] for m in arrived} == {"UnknownActor"}
    assert sump.run(*arrived)[0] == []
    store = mesh.store(lambda: NOW)
    for task_id in held:
        view = store.get_task(task_id)
        assert view is not None and view["status"] == "failed", view
        assert f"actor '{GONE}' is removed by a deploy" in view["error"]
    after = _live(mesh)
    assert after.blocking == () and refusal(after) is None, "nothing left to lose: the deploy may go on"


def _project(tmp_path: Path) -> Path:
    """The example project as `asya deploy` finds one: its manifest, code and flows, and the CDK app's files."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "asya.yaml").write_text((REPO / "asya.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    for directory in ("functions", "flows"):
        (project / directory).symlink_to(REPO / directory)
    (project / "app.py").write_text("", encoding="utf-8")
    (project / "cdk.json").write_text("{}", encoding="utf-8")
    return project


def _deploy(project: Path, *extra: str) -> tuple[int, str, str]:
    """``asya deploy`` of ``project``; the clients it makes talk to this test's in-process moto."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["deploy", "--dir", str(project), *extra], env={"AWS_REGION": REGION}, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_deploy_plan_prints_the_preview_and_refuses_the_removal(mesh: Any, tmp_path: Path) -> None:
    _work_in_flight(mesh)
    project = _project(tmp_path)

    code, out, err = _deploy(project, "--plan")
    assert code == 1, err
    assert f"- {GONE}: queue 2 messages" in out
    assert "would refuse" in err and "asya deploy --force" in err
    queue = mesh.aws.sqs.get_queue_url(QueueName=naming.queue_name(mesh.resources.namespace, GONE))["QueueUrl"]
    depth = mesh.aws.sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    assert depth["Attributes"]["ApproximateNumberOfMessages"] == "2", "--plan changes nothing"

    code, out, err = _deploy(project, "--plan", "--deployed", str(project))
    assert code == 1 and "manifest OLD -> NEW (static, as `asya plan`):" in out
    assert "no change to actors, flows or settings" in out

    code, _, err = _deploy(project, "--endpoint-url", "http://127.0.0.1:1")
    assert code == 2 and "--endpoint-url reads a local mesh for --plan" in err


def test_deploy_plan_of_a_mesh_without_a_removal_exits_0(mesh: Any, tmp_path: Path) -> None:
    code, out, err = _deploy(_project(tmp_path), "--plan")
    assert code == 0, err
    assert "no actor removed, no task in flight on another program, no queue setting changed" in out
