"""The e2e suite against what ``cdk deploy`` ships: the example mesh synthesized into ``cdk.out`` and run by the
artifact mesh (issue 24). The imported tests are the manifest-built mesh's own, run unchanged here (this directory's
``local_mesh``/``gateway`` fixtures are the artifact mesh); the tests written here cover what those do not. Every
test ends with zero denied calls (the ``local_mesh`` fixture asserts it).

The tests of issue 24's grant gaps (pause and resume, cancel while paused, a result over 64 KiB, a payload over the
SQS limit) failed here as they would have in AWS until the grants were derived from ``asya_deploy.access``; they
pass now.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from asya import naming
from asya.store import TaskStore
from asya.timeutil import format_ts
from asya_deploy import access
from asya_local.artifact.drift import unused_calls
from asya_local.artifact.mesh import ArtifactMesh
from asya_local.client import GatewayClient
from asya_local.sse import terminal_status
from tests.e2e.artifact.aws_target import AwsTarget
from tests.e2e.artifact.edge import deployer_client
from tests.e2e.test_local_agents import test_mcp_sdk_auto_mode_adopts_2026_07_28_by_discover_gw_mcp_1
from tests.e2e.test_local_fanin import test_documents_flow_merges_the_chunk_summaries_in_order_under_the_task_id
from tests.e2e.test_local_mesh import (
    test_gw_ops_1_health,
    test_gw_sse_8_reconnect_at_the_terminal_event_gets_204,
    test_p_ckpt_1_the_crew_is_consumed_with_batch_size_10_and_no_batching_window,
    test_p_fan_6_sentences_fan_out_completes_with_frame_zero_lineage,
    test_text_pipeline_succeeds_with_enriched_result_and_checkpoint,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.artifact, pytest.mark.xdist_group("artifact")]


__all__ = [
    "test_call_shows_the_prompt_then_status_and_resume_finish_the_task",
    "test_documents_flow_merges_the_chunk_summaries_in_order_under_the_task_id",
    "test_gw_cancel_2_cancel_while_paused_over_http",
    "test_gw_ops_1_health",
    "test_gw_sse_8_reconnect_at_the_terminal_event_gets_204",
    "test_mcp_sdk_auto_mode_adopts_2026_07_28_by_discover_gw_mcp_1",
    "test_p_ckpt_1_the_crew_is_consumed_with_batch_size_10_and_no_batching_window",
    "test_p_fan_6_sentences_fan_out_completes_with_frame_zero_lineage",
    "test_p_large_2_a_payload_over_the_sqs_limit_runs_the_whole_flow",
    "test_p_pause_5_pause_then_resume_succeeds_on_the_same_id_over_http",
    "test_text_pipeline_succeeds_with_enriched_result_and_checkpoint",
]


def _create(mesh: Any, *, payload: Any, timeout: int | None = None, **params: str) -> str:
    body: dict[str, Any] = {"payload": payload}
    if timeout is not None:
        body["timeout"] = timeout
    response = httpx.post(f"{mesh.url}/api/v1/mesh/", params=params, json=body, timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _view(mesh: Any, task_id: str) -> dict[str, Any]:
    view: dict[str, Any] = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    return view


def _final(mesh: Any, task_id: str) -> dict[str, Any]:
    with GatewayClient(mesh.url) as client:
        for _ in client.events(task_id).events():
            pass
        return client.get(task_id)


def test_an_unsigned_request_to_an_aws_iam_method_gets_api_gateways_403(e2e_target: Any) -> None:
    """The API's ``{proxy+}`` ANY method is ``AWS_IAM``: no signature, API Gateway's 403; ``GET /health`` is
    ``NONE``; a path outside the stage is 403 ``Forbidden``. (Either target: ``api_url`` is API Gateway itself.)"""
    unsigned = httpx.get(f"{e2e_target.api_url}/api/v1/mesh/some-id", timeout=10)
    assert (unsigned.status_code, unsigned.json()) == (403, {"message": "Missing Authentication Token"})
    assert httpx.get(f"{e2e_target.api_url}/health", timeout=10).status_code == 200
    outside = httpx.get(e2e_target.api_url.removesuffix("/prod") + "/health", timeout=10)
    assert outside.status_code == 403
    e2e_target.clear_denied()


def test_the_functions_run_in_their_own_interpreters_from_the_assembly(artifact_mesh: ArtifactMesh) -> None:
    """One interpreter per function, none of them this one; the code directories are the assembly's."""
    pids = {p.pid for pool in artifact_mesh.pools.values() for p in pool.processes}
    spec = artifact_mesh.spec
    assert spec is not None
    # every function of the assembly but the web-adapter ones (gateway, stream function: run.sh) has its pool
    plain = {arn for arn, f in spec.functions.items() if "AWS_LWA_INVOKE_MODE" not in f.environment}
    assert set(artifact_mesh.pools) == plain and len(pids) >= len(plain) >= 13
    assert os.getpid() not in pids
    assert all(str(f.code_dir).startswith(str(artifact_mesh.cdk_out.resolve())) for f in spec.functions.values())


def test_p_err_a_handler_error_fails_the_task_through_x_sump_with_its_checkpoint(local_mesh: ArtifactMesh) -> None:
    """normalize raises ``KeyError`` on a payload without ``text``: x-sump records the failure and its checkpoint."""
    task_id = _create(local_mesh, actor="normalize", payload={"no": "text"})
    task = _final(local_mesh, task_id)
    assert task["status"] == "failed"
    assert "KeyError" in json.dumps(task)
    key = task["checkpoint_key"]
    assert key.startswith("failed/") and key.endswith(".jsonl")
    body = local_mesh.clients.s3.get_object(Bucket=local_mesh.resources.bucket, Key=key)["Body"].read()
    assert task_id in body.decode()


def test_gw_sse_2_a_stream_resumed_after_an_event_continues_after_it(local_mesh: ArtifactMesh) -> None:
    """SSE relayed through the API front as it comes; a reconnect with ``Last-Event-ID`` gets only what follows."""
    task_id = _create(local_mesh, flow="text-pipeline", payload={"text": "resume me please, it is a good day"})
    with GatewayClient(local_mesh.url) as client:
        events = list(client.events(task_id).events())
        assert terminal_status(events[-1]) == "succeeded"
        ids = [int(e.id) for e in events if e.id is not None]
        middle = ids[len(ids) // 2]
        resumed = list(client.events(task_id, last_event_id=str(middle)).events())
    resumed_ids = [int(e.id) for e in resumed if e.id is not None]
    assert resumed_ids and min(resumed_ids) > middle
    assert resumed_ids == [i for i in ids if i > middle]


def test_gw_back_1_an_overdue_task_fails_with_its_deadline(local_mesh: ArtifactMesh) -> None:
    """A 1 s deadline on a flow of many hops: the task ends failed by its deadline (the timer queue's mapping feeds
    the backstop function, which fails an overdue task; the actors check the deadline too)."""
    task_id = _create(
        local_mesh, flow="documents", payload={"text": "Word one two. " * 60, "chunk_words": 2}, timeout=1
    )
    view = wait_for(
        lambda: (
            (v := httpx.get(f"{local_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json())["status"]
            not in ("pending", "running")
            and v
        ),
        "the overdue task to end",
        limit=120,
    )
    assert view["status"] == "failed"
    assert "deadline" in json.dumps(view).lower() or "timeout" in json.dumps(view).lower()
    # the task's timer came through the timer queue's event source mapping to the backstop function (the artifact
    # mesh counts deliveries; Lambda's mappings do not say)
    timer_mapping = local_mesh.esms[naming.DEADLINE]
    if timer_mapping.stats is not None:
        wait_for(lambda: timer_mapping.stats.records >= 1, "the deadline timer to be delivered")


def test_gw_ui_1_the_console_page_loads(local_mesh: ArtifactMesh) -> None:
    """The console under the stage: ``/prod/console`` redirects (relatively, keeping the stage) to its page, whose
    stylesheet and script load through the API."""
    page = httpx.get(f"{local_mesh.url}/console", timeout=10, follow_redirects=True)
    assert page.status_code == 200, page.text
    assert str(page.url).endswith("/prod/console/")
    assert "text/html" in page.headers["content-type"]
    for asset in ("console.css", "console.js"):
        assert httpx.get(f"{page.url}{asset}", timeout=10).status_code == 200, asset


def test_gw_back_1_a_long_deadline_is_failed_by_the_scheduled_sweep(artifact_mesh: ArtifactMesh) -> None:
    """GW-BACK-1, -2: a deadline more than 900 s away gets no timer; the task enters the sparse ``long_deadlines``
    index and the sweep (the template's schedule rule invoking the backstop function under its own role) fails it
    once due. Time passes through the store's injectable clock, not by waiting: the record is written as the gateway
    writes it, an hour ago, with a 1000 s deadline (so it is long, and overdue by 2600 s). Nothing else can fail it:
    no envelope runs and no timer was sent; the test reads the table directly (a gateway read would time it out
    itself, GW-BACK-3). The schedule may sweep the overdue record before the test could look at the index, so the
    index entry is shown on a second long deadline, not due yet (read by a store whose clock is past it), then
    canceled."""
    mesh = artifact_mesh
    mesh.clear_denied()
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    resources, clients = mesh.resources, mesh.clients
    then = TaskStore(table=resources.table, bucket=resources.bucket, dynamodb=clients.dynamodb, s3=clients.s3)
    past = TaskStore(
        table=resources.table, bucket=resources.bucket, dynamodb=clients.dynamodb, s3=clients.s3, clock=lambda: hour_ago
    )
    later = datetime.now(UTC) + timedelta(seconds=2000)
    ahead = TaskStore(
        table=resources.table, bucket=resources.bucket, dynamodb=clients.dynamodb, s3=clients.s3, clock=lambda: later
    )
    waiting_id = str(uuid.uuid4())
    waiting_deadline = format_ts(datetime.now(UTC) + timedelta(seconds=1000))
    then.create_task(task_id=waiting_id, actor="normalize", flow="text-pipeline", deadline_at=waiting_deadline)
    try:
        due_later = [entry["id"] for page in ahead.long_deadline_pages() for entry in page]
        assert waiting_id in due_later, "a deadline 1000 s away enters long_deadlines (no timer)"
        assert waiting_id not in [entry["id"] for page in then.long_deadline_pages() for entry in page], "not due"
    finally:
        then.cancel(waiting_id)
    task_id = str(uuid.uuid4())
    deadline = format_ts(hour_ago + timedelta(seconds=1000))
    past.create_task(task_id=task_id, actor="normalize", flow="text-pipeline", deadline_at=deadline)
    view = wait_for(
        lambda: (v := then.get_task(task_id, enforce_deadline=False)) is not None and v["status"] == "failed" and v,
        "the sweep to fail the overdue task",
        limit=120,
    )
    assert view["error"] == "task timed out"
    assert task_id not in [entry["id"] for page in then.long_deadline_pages() for entry in page]
    assert httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()["status"] == "failed"
    assert mesh.denied() == [], "the sweep made a call its role does not allow"


@pytest.fixture
def normalize_importing_yaml(artifact_mesh: ArtifactMesh, tmp_path: Path) -> Iterator[ArtifactMesh]:
    """``normalize`` redeployed with its module (``ASYA_HANDLER``'s) importing ``yaml``; its own code after."""
    spec = artifact_mesh.spec
    assert spec is not None
    normalize = next(f for f in spec.functions.values() if f.environment.get("ASYA_ACTOR") == "normalize")
    code = tmp_path / "code"
    shutil.copytree(normalize.code_dir, code)
    handler = normalize.environment["ASYA_HANDLER"]  # text.normalize
    module = code / (handler.rpartition(".")[0].replace(".", "/") + ".py")
    module.write_text(module.read_text() + "\nimport yaml  # noqa: E402 - not in the actor layer's lock\n")
    artifact_mesh.deploy_code(normalize.name, code)
    try:
        yield artifact_mesh
    finally:
        artifact_mesh.deploy_code(normalize.name)


def test_p_abi_2_a_module_missing_from_the_layers_lock_fails_the_task_naming_it(
    normalize_importing_yaml: ArtifactMesh,
) -> None:
    """The actor functions' dependency layer is restaged from its own lock: ``yaml`` is in this interpreter and in
    the gateway's layer, not in the actors' lock. ``normalize`` importing it cannot load its handler, so the task
    fails through x-sump with ``HandlerLoadError`` naming the handler and the missing module (P-ABI-2), as in Lambda
    (issue 24, "Native wheels")."""
    assert importlib.util.find_spec("yaml") is not None, "the host has yaml: only the layer's lock can hide it"
    mesh = normalize_importing_yaml
    task = _final(mesh, _create(mesh, actor="normalize", payload={"text": "a good day"}))
    assert task["status"] == "failed"
    text = json.dumps(task)
    assert "HandlerLoadError" in text and "No module named 'yaml'" in text, text


def test_the_aws_target_signs_with_botocore_and_relays_sse(artifact_mesh: ArtifactMesh) -> None:
    """The real-AWS target's own code (:class:`tests.e2e.artifact.aws_target.AwsTarget`: its botocore SigV4 signer
    with a session token, the signing client relaying to the API, the stack outputs) pointed at this mesh's API front
    as if it were API Gateway: a signed task runs and its SSE stream arrives through it, and the front accepts
    botocore's signature (a mismatch would be its 403)."""
    tester = artifact_mesh.tester_credentials
    session = boto3.Session(
        aws_access_key_id=tester.access_key_id,
        aws_secret_access_key=tester.secret_access_key,
        aws_session_token=tester.session_token,
        region_name=artifact_mesh.clients.region,
    )
    resources = artifact_mesh.resources
    outputs = {
        "GatewayUrl": f"{artifact_mesh.api_url}/",
        "TableName": resources.table,
        "BucketName": resources.bucket,
    }
    target = AwsTarget(session, region=artifact_mesh.clients.region, namespace=resources.namespace, outputs=outputs)
    try:
        assert target.api_url == artifact_mesh.api_url
        assert target.resources.bucket == resources.bucket
        task_id = _create(target, flow="text-pipeline", payload={"text": "signed by botocore", "stream": False})
        task = _final(target, task_id)
        assert task["status"] == "succeeded"
    finally:
        target.stop()
    assert artifact_mesh.denied() == []


def test_p_pause_5_resume_over_a2a_a_task_paused_by_the_flow(local_mesh: Any) -> None:
    """``reviewed-text`` pauses at x-pause; an A2A ``message/send`` naming the task id with the review as a data part
    resumes it (GW-A2A-7, GW-RESUME-3) and the same task succeeds with the review."""
    task_id = _create(local_mesh, flow="reviewed-text", payload={"text": "What a GREAT day"})
    wait_for(lambda: _view(local_mesh, task_id)["status"] == "paused", "the task to pause at x-pause")
    message = {
        "kind": "message",
        "role": "user",
        "messageId": f"review-{task_id}",
        "taskId": task_id,
        "parts": [{"kind": "data", "data": {"approved": True, "note": "via a2a"}}],
    }

    def resumed() -> dict[str, Any] | None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        answer = httpx.post(f"{local_mesh.url}/a2a/", json=body, timeout=30).json()
        # the paused write comes before x-pause stores its envelope (P-PAUSE-5): a resume in the gap is refused
        return None if "error" in answer and answer["error"]["code"] == -32004 else answer

    answer = wait_for(resumed, "the A2A resume to be accepted")
    assert "error" not in answer, answer
    done = wait_for(lambda: (v := _view(local_mesh, task_id))["status"] == "succeeded" and v, "the task to succeed")
    assert done["result"]["published"] is True
    assert done["result"]["review"] == {"note": "via a2a"}


def test_gw_task_10_a_paused_tasks_view_in_the_gap_before_its_file_is_stored(local_mesh: Any) -> None:
    """x-pause writes the paused status before it stores the paused file (P-PAUSE-5), so a view can find no file. S3
    answers that read 403 to a role that may not list the bucket, as it answers a denial; the gateway tells the two
    apart by listing the key under ``paused/`` (``asya.missingkey``), a grant its role lacked: the view answered 500
    on AWS. The gap is made here by removing the stored file with the deployer's client."""
    task_id = _create(local_mesh, flow="reviewed-text", payload={"text": "What a GREAT day"})
    wait_for(lambda: _view(local_mesh, task_id)["status"] == "paused", "the task to pause at x-pause")
    s3, bucket, key = local_mesh.clients.s3, local_mesh.resources.bucket, f"paused/{task_id}.json"
    wait_for(lambda: s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount", 0), "the paused file")
    s3.delete_object(Bucket=bucket, Key=key)
    answer = httpx.get(f"{local_mesh.url}/api/v1/mesh/{task_id}", timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "paused"
    assert "paused_state" not in answer.json()
    assert httpx.delete(f"{local_mesh.url}/api/v1/mesh/{task_id}", timeout=10).status_code == 204
    # the one refusal is S3's own: the read of the missing file, answered 403 as on AWS; the listing that follows it
    # is granted (without the grant it was refused too, and the view could not tell a missing file from a denial)
    [refused] = local_mesh.denied()
    assert "GatewayFunction" in refused and "operation='GetObject'" in refused and "missing key" in refused, refused
    local_mesh.clear_denied()


@pytest.fixture
def without_grant(artifact_mesh: ArtifactMesh) -> Iterator[ArtifactMesh]:
    """x-sink's role without its ``succeeded/*`` PutObject: the statement's resource list loses that entry."""
    spec = artifact_mesh.spec
    assert spec is not None
    sink = next(f for f in spec.functions.values() if f.environment.get("ASYA_ACTOR") == "x-sink")
    documents = copy.deepcopy(list(sink.policies))
    removed = 0
    for document in documents:
        for statement in document["Statement"]:
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            kept = [r for r in resources if not (isinstance(r, str) and r.endswith("/succeeded/*"))]
            if len(kept) != len(resources) and "s3:PutObject" in json.dumps(statement["Action"]):
                removed += 1
                statement["Resource"] = kept or ["arn:aws:s3:::nothing-at-all/*"]
    assert removed, "x-sink's policy has no succeeded/* PutObject grant to remove"
    artifact_mesh.replace_policies(sink.name, documents)
    try:
        yield artifact_mesh
    finally:
        artifact_mesh.replace_policies(sink.name, list(sink.policies))
        artifact_mesh.clear_denied()


def test_a_dropped_grant_is_denied_and_the_task_does_not_succeed(without_grant: ArtifactMesh) -> None:
    """Without x-sink's ``succeeded/*`` PutObject, its checkpoint write is denied (403 AccessDenied from the proxy),
    the record is retried and the task never reads succeeded, as in AWS."""
    mesh = without_grant
    mesh.clear_denied()
    task_id = _create(mesh, flow="text-pipeline", payload={"text": "a good day"})
    denied = wait_for(
        lambda: [d for d in mesh.denied() if "s3:PutObject" in d and "succeeded/" in d], "x-sink's denied PutObject"
    )
    assert denied
    view = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    assert view["status"] != "succeeded"


# -- issue 24's grant gaps -------------------------------------------------------------------------------------------
# Collected last (pytest runs a module's tests in the order their names are bound): the records these tasks leave
# behind keep failing in the background, and their denials must not land in another test's zero-denials check.

from tests.e2e.test_local_mesh import test_p_large_2_a_payload_over_the_sqs_limit_runs_the_whole_flow  # noqa: E402
from tests.e2e.test_local_pause import (  # noqa: E402
    test_gw_cancel_2_cancel_while_paused_over_http,
    test_p_pause_5_pause_then_resume_succeeds_on_the_same_id_over_http,
)
from tests.e2e.test_local_pause_cli import (  # noqa: E402
    test_call_shows_the_prompt_then_status_and_resume_finish_the_task,
)


def test_p_large_4_a_result_over_64_kib_is_read_back(local_mesh: ArtifactMesh) -> None:
    """The result is read from its checkpoint line with a ranged GET under the gateway's own grant (GW-DATA-10)."""
    text = "good " * 15_000  # 75 KB of text: the result (text + normalized) is over 64 KiB
    task = _final(local_mesh, _create(local_mesh, flow="text-pipeline", payload={"text": text, "stream": False}))
    assert task["status"] == "succeeded"
    assert task["result"]["text"] == text


def test_gw_cancel_1_cancel_a_running_task(local_mesh: ArtifactMesh) -> None:
    task_id = _create(local_mesh, flow="documents", payload={"text": "One two three. " * 40, "chunk_words": 3})
    assert httpx.delete(f"{local_mesh.url}/api/v1/mesh/{task_id}", timeout=10).status_code == 204
    assert httpx.get(f"{local_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()["status"] == "canceled"
    assert local_mesh.denied() == [], "the gateway's cancel made a call its role does not allow"


def test_gw_edge_2_the_producer_route_takes_the_key_of_the_templates_reporter_secret(local_mesh: ArtifactMesh) -> None:
    """GW-EDGE-2 (R3): the assembly's reporter-key secret exists (created as CloudFormation would, with a random key)
    and the gateway reads it under its own role: that key passes the producer route, a client's does not."""
    (name,) = local_mesh.spec.secrets if local_mesh.spec is not None else ()
    key = deployer_client(local_mesh, "secretsmanager").get_secret_value(SecretId=name)["SecretString"]
    events = f"{local_mesh.url}/api/v1/mesh/no-such-task/events"
    fly = {"type": "fly", "data": 1}
    with httpx.Client(timeout=30) as client:
        assert client.post(events, json=fly, headers={"X-Asya-Reporter-Key": key}).status_code == 404  # past auth
        refused = client.post(events, json=fly, headers={"X-Asya-Reporter-Key": "not-the-key"})
        assert (refused.status_code, refused.json()) == (401, {"error": "invalid credentials"})


def test_p_hist_5_the_run_history_is_written_and_read_under_the_declared_grants(local_mesh: ArtifactMesh) -> None:
    """The example's ``sentences`` flow has ``history: steps``: split and analyze PUT their invocation objects under
    ``history/`` with the actor role's grant, the gateway walks them back with its own, and no call is denied (the
    ``local_mesh`` fixture asserts it): the fan-out child's step is linked to the task (P-HIST-2..5, GW-HIST-1)."""
    task_id = _create(local_mesh, flow="sentences", payload={"text": "One. Two."})
    assert _final(local_mesh, task_id)["status"] == "succeeded"
    deadline = time.monotonic() + 120  # the child and the last invocation's PUT may land after the task ended
    while True:
        response = httpx.get(f"{local_mesh.url}/api/v1/mesh/{task_id}/history", timeout=10)
        steps = response.json().get("steps", []) if response.status_code == 200 else []
        if len(steps) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted((s["actor"], s["envelope_id"] == task_id) for s in steps) == [
        ("analyze", False), ("analyze", True), ("split", True)], response.text  # fmt: skip
    child = next(s for s in steps if s["envelope_id"] != task_id)
    assert child["parent_id"] == task_id
    assert all(s["key"].startswith("history/") for s in steps)


def _flow_envelope(task_id: str, digest: str) -> dict[str, Any]:
    """A triage task's envelope at ``analyze``, the end of the flow's first route segment (pc 2), on program
    ``digest``."""
    now = format_ts(datetime.now(UTC))
    state = {"flow": "triage", "pc": 2, "owner": task_id, "digest": digest}
    return {
        "id": task_id,
        "route": {"prev": ["normalize"], "curr": "analyze", "next": []},
        "headers": {"x-asya-flow": "triage", "x-asya-flow-state": state},
        "status": {"phase": "pending", "actor": "analyze", "attempt": 1, "max_attempts": 1, "created_at": now,
                   "updated_at": now, "deadline_at": format_ts(datetime.now(UTC) + timedelta(seconds=120))},
        "payload": {"text": "a good day"},
    }  # fmt: skip


def test_p_flowv_3_flow_programs_are_kept_and_read_under_the_declared_grants(artifact_mesh: ArtifactMesh) -> None:
    """The gateway keeps the program of a created triage task in ``flows/`` (``programs.store``); ``analyze`` runs the
    continuation of a task started on another version of the flow, reading that program from the bucket under the
    actor role's ``programs.read``; a task whose program is nowhere fails with ``FlowVersionMissing``
    (``programs.list`` tells the missing object from a denied one). No call is denied (P-FLOWV-1..3)."""
    from asya.flows import compile_flow
    from asya.manifest import load_manifest
    from asya.tableschema import program_key

    mesh = artifact_mesh
    mesh.clear_denied()
    repo = Path(__file__).resolve().parents[3]
    manifest = load_manifest(repo / "asya.yaml")
    current = manifest.flows["triage"].program
    assert current is not None
    created = _create(mesh, flow="triage", payload={"text": "a good day"})
    assert _final(mesh, created)["status"] == "succeeded"
    s3, bucket = mesh.clients.s3, mesh.resources.bucket
    assert s3.get_object(Bucket=bucket, Key=program_key(current.digest))["Body"].read() == current.canonical()

    source = (repo / "flows" / "triage.py").read_text(encoding="utf-8")
    edited = source.replace(
        "    state = analyze(state)\n    if", '    state = analyze(state)\n    state["v1"] = 1\n    if'
    )
    older = compile_flow(edited, flow="triage", filename="flows/triage.py", actors=set(manifest.actors))
    s3.put_object(Bucket=bucket, Key=program_key(older.digest), Body=older.canonical())
    store = TaskStore(table=mesh.resources.table, bucket=bucket, dynamodb=mesh.clients.dynamodb, s3=s3)
    kept, lost = str(uuid.uuid4()), str(uuid.uuid4())
    for task_id, digest in ((kept, older.digest), (lost, "0" * 64)):
        store.create_task(task_id=task_id, actor="analyze", flow="triage", deadline_at=None)
        body = json.dumps(_flow_envelope(task_id, digest))
        mesh.clients.sqs.send_message(QueueUrl=mesh.resources.queue_urls["analyze"], MessageBody=body)
    done = _final(mesh, kept)
    assert (done["status"], done["result"]["v1"]) == ("succeeded", 1), done
    failed = _final(mesh, lost)
    assert failed["status"] == "failed" and "FlowVersionMissing" in failed["error"], failed
    # the one 403 is S3's answer to a read of a missing key without ListBucket (the proxy records it as a denial);
    # the listing of that key, under programs.list, that told it missing was allowed
    denied = mesh.denied()
    assert [d for d in denied if "missing key" not in d] == [], "a program was kept or read with a call not allowed"
    assert len(denied) == 1 and "analyze" in denied[0] and "GetObject" in denied[0], denied


def test_p_hop_1_the_deployed_mesh_counts_hops_and_names_each_actors_service(local_mesh: ArtifactMesh) -> None:
    """Issue 26 items 6 and 7 on what ``cdk deploy`` ships: every actor function logs under its own service name and
    carries the hop ceiling; a text-pipeline task reaches x-sink after 3 sends (normalize, analyze, summarize)."""
    spec = local_mesh.spec
    assert spec is not None
    actors = [f.environment for f in spec.functions.values() if "ASYA_ACTOR" in f.environment]
    assert actors and all(env["POWERTOOLS_SERVICE_NAME"] == env["ASYA_ACTOR"] for env in actors)
    assert all(env["ASYA_MAX_HOPS"] == "1000" for env in actors)
    task_id = _create(local_mesh, payload={"text": "Hello World"}, flow="text-pipeline")
    task = _final(local_mesh, task_id)
    assert task["status"] == "succeeded"
    body = local_mesh.clients.s3.get_object(Bucket=local_mesh.resources.bucket, Key=task["checkpoint_key"])["Body"]
    (line,) = [json.loads(text) for text in body.read().decode().splitlines() if json.loads(text)["id"] == task_id]
    assert line["headers"]["x-asya-hops"] == 3


# -- grant drift (issue 24 item 3): the last test of the session ---------------------------------------------------

#: Declared calls the suite cannot reach, by (role, call name): each reason starts with the code path that makes the
#: call (``module:qualname``, checked to exist) and says why the suite does not get there.
_LISTS = (
    "asya.missingkey:is_missing lists a key's prefix only after a read answered 403 (a missing object told from a "
    "denied one): every object the suite reads exists"
)
_READS = (
    "asya.payloads:PayloadStore.rehydrate reads a payload reference: only the over-256 KiB payload test makes one, "
    "and its route (normalize, analyze, summarize) has no {role}"
)
UNREACHED: dict[tuple[str, str], str] = {
    **{(role, "payloads.list"): _LISTS for role in ("actor", "aggregator", "x-pause", "x-resume", "x-sink", "x-sump")},
    **{(role, "payloads.read"): _READS.format(role=role) for role in ("aggregator", "x-pause", "x-resume", "x-sump")},
    ("x-resume", "pause.expire"): "asya_crew.resume:ResumeRuntime._expire writes when a pause nobody resumed times "
    "out: the example mesh's pauses wait for their 7-day cap; test_artifact_waits.py times one out, under the same "
    "declared grant, on a mesh of its own",
    ("gateway", "payloads.read"): "asya.payloads:PayloadStore.rehydrate in the gateway reads a payload reference "
    "back only for a view of a task whose payload was offloaded by an actor, which no test reads",
    **{
        (role, "payloads.write"): f"asya.payloads:PayloadStore.encode offloads an outgoing payload over 256 KiB: "
        f"no {role} of the suite sends one"
        for role in ("aggregator", "x-resume")
    },
    ("aggregator", "fanin.slices"): "asya_crew.fanin_state:FanInState._put_slice stores a slice too large for its "
    "item: the documents flow's chunks are small",
    (
        "backstop",
        "timer.rearm",
    ): "asya_gateway.timers:DeadlineTimers.rearm sends again a timer due early; it is armed only within SQS's "
    "900 s delay, so it comes before its deadline only after clock skew",
    ("gateway", "queues.metrics"): "asya_gateway.diagnostic:QueueDiagnostic._oldest_age reads CloudWatch for the "
    "queue diagnostic (GW-OPS-3), which no test asks for",
    ("gateway", "task.list"): "asya_gateway.routes.tasks:list_tasks answers GET /api/v1/mesh/ (GW-LIST): the console "
    "test loads the page, not its list",
    ("gateway", "values.list"): _LISTS,
    ("x-resume", "paused.list"): _LISTS + " (a paused file is missing only for a resume delivered twice)",
    **{
        (role, call): f"asya.programstore:ProgramStore.fetch reads a program the {role} does not hold: only a task "
        "started on another deployment of its flow names one, and the suite's flows with a fan-in or a pause are "
        "static routes, never redeployed"
        for role in ("aggregator", "x-resume")
        for call in ("programs.read", "programs.list")
    },
    ("x-pause", "mesh.send"): "asya_crew.routed:RoutedCrewRuntime._reject sends a rejected envelope to x-sink (and "
    "_stop_if_canceled a canceled one): the suite's pauses are valid and not canceled before x-pause runs",
    ("x-pause", "pause.metadata"): "asya.store.bodies:BodyCodec.encode stores pause metadata over 64 KiB apart: the "
    "example's review form is small",
    ("x-sink", "error.store"): "asya.store.bodies:BodyCodec.encode stores error details over 64 KiB apart: the "
    "suite's errors are small",
    ("x-sink", "result.store"): "asya_crew.sink:SinkRuntime._result_span names the checkpoint line of a result over "
    "64 KiB (GW-DATA-10), so x-sink stores a result apart only for a line over 4 MiB or checkpoints that expire "
    "before the task record, which no suite mesh has (tests/functional/test_sink_result_span.py covers the latter)",
    **{
        (role, "key.use"): "asya_cdk.permissions:grant_access grants the customer-managed key's use only when the mesh "
        "has one (storage.kms_key_arn or create_kms_key); the example has none, and the artifact mesh does not "
        "emulate KMS (a template with a created key is refused)"
        for role in ("actor", "aggregator", "backstop", "gateway", "x-pause", "x-resume", "x-sink", "x-sump")
    },
    ("gateway", "dlq.redrive"): "asya_gateway.redrive:redrive_dlq answers the console's Redrive button (GW-DLQ-1): "
    "the suite puts nothing in a DLQ (tests/functional/test_gateway_history_routes.py covers it against moto)",
    ("gateway", "history.list"): "asya.missingkey:is_missing lists a history key's prefix only after a read "
    "answered 403 (an object still being written told from a denied one): every history object the suite reads "
    "exists",
    ("x-sump", "unparsed.store"): "asya_crew.checkpoint:put_unparsed stores a body that does not parse: the gateway "
    "and the actors send only envelopes",
}
#: Declared calls with no code path that makes them: grants wider than the code. Each is a finding to drop from
#: ``asya_deploy.access`` (it stays listed here, checked still declared and still unused, until it is dropped).
TOO_WIDE: dict[tuple[str, str], str] = {}


def _code_path_exists(reason: str) -> bool:
    path = reason.split(" ", 1)[0]
    module_name, _, qualname = path.partition(":")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        return False
    for part in qualname.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    return bool(qualname)


def test_zz_every_declared_grant_is_used_by_the_suite(artifact_mesh: ArtifactMesh, whole_suite: bool) -> None:
    """Too wide: every call ``asya_deploy.access`` declares for a role (so every grant derived from it) was made by some
    function of that role during this session, unless :data:`UNREACHED` names the code path and why the suite cannot
    reach it. Too narrow is every test's own zero-denials check. Runs last (defined last in the module that sorts
    last) over the example mesh's IAM proxy's cumulative record, so it costs no extra task. The ``jwt`` mesh of
    test_artifact_edge_auth.py (run before, stopped before this module starts) has its own proxy and is not judged
    here: it is a one-actor subset of the same roles, and its one call outside them, the authorizer's read of the
    reporter secret, is granted by the secret's construct, not by ``asya_deploy.access`` (asya_local.artifact.drift)."""
    if not whole_suite:
        pytest.skip("the grant drift check judges a whole run: some tests of the suite were deselected")
    bad = {key: reason for key, reason in UNREACHED.items() if not _code_path_exists(reason)}
    assert bad == {}, "an UNREACHED reason must start with a real module:qualname"
    declared = {(role.name, call.name) for role in access.ROLES.values() for call in role.calls}
    assert set(UNREACHED) | set(TOO_WIDE) <= declared, "UNREACHED/TOO_WIDE name a call asya_deploy.access lacks"
    spec = artifact_mesh.spec
    assert spec is not None
    unused = {(role, name) for role, names in unused_calls(spec, artifact_mesh.proxy.used()).items() for name in names}
    assert set(TOO_WIDE) <= unused, "a TOO_WIDE call was used after all: move it to UNREACHED or drop the entry"
    left = sorted(unused - set(UNREACHED) - set(TOO_WIDE))
    assert left == [], f"declared grants no test used (drop them, or say why in UNREACHED): {left}"
