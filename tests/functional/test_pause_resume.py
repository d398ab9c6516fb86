"""Pause and resume against moto: x-pause and x-resume runtimes, the gateway's resume route, cancel and the deadline
backstop (PROTOCOL 12.4 P-PAUSE-1..6, 12.5 P-RESUME-1..6, P-STAT-1, P-STAT-10, P-ACK-8, P-HDR-4, P-TIME-9; GATEWAY
section 9 GW-RESUME-1..4, GW-DATA-2, GW-CANCEL-2, GW-BACK-1, GW-BACK-5, GW-TASK-1).

Write units are metered with the bench's meter (``bench.meter``) on the real calls (GW-DATA-8 budget: at most 2 per
pause and 2 per resume).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from asya.config import ActorConfig
from asya.store import TaskStore
from asya.timeutil import format_ts
from asya_crew.pause import NOT_TRACKED, PauseRuntime
from asya_crew.resume import ResumeRuntime
from asya_gateway import GatewayConfig, create_app
from asya_gateway.backstop import Backstop
from asya_gateway.timers import DeadlineTimers
from bench.meter import Meter, Usage
from tests.asgi import asgi_client
from tests.clocks import ManualClock
from tests.functional.actors import Context, actor_env, deliver, drain, queue_arn

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
FLOW = "reviewed-text"
#: The example flow's route (asya.yaml): x-pause sits before publish.
PREV_AT_PAUSE = ["normalize", "analyze", "request-review"]
METADATA = {
    "prompt": "Publish this text?",
    "fields": [
        {"name": "approved", "type": "boolean", "required": True},
        {"name": "note", "type": "string", "payload_key": "/review/note"},
        {"name": "score", "type": "integer"},
    ],
}


@dataclass
class Rig:
    mesh: Any
    clock: ManualClock
    store: TaskStore
    client: httpx.Client
    pause: PauseRuntime
    resume: ResumeRuntime
    meter: Meter
    #: ``(write units, SQS sends)`` of the last resume request
    last_resume: tuple[int, int] = (0, 0)

    def create(self, timeout: int | None = None) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"payload": {"text": "a good day"}}
        if timeout is not None:
            body["timeout"] = timeout
        response = self.client.post(f"/api/v1/mesh/?flow={FLOW}", json=body)
        assert response.status_code == 201, response.text
        [created] = drain(self.mesh.aws.sqs, self.url("normalize"))
        return str(response.json()["id"]), created

    def url(self, actor: str) -> str:
        return str(self.mesh.resources.queue_urls[actor])

    def at_pause(self, created: dict[str, Any], metadata: Any = METADATA, attempt: int = 1) -> dict[str, Any]:
        """The envelope request-review sends to x-pause for the task ``created`` (its first envelope)."""
        headers = {**created["headers"], "x-asya-route-resolved": {}}
        if metadata is not None:
            headers["x-asya-pause"] = metadata
        return {
            "id": created["id"],
            "route": {"prev": PREV_AT_PAUSE, "curr": "x-pause", "next": ["publish"]},
            "headers": headers,
            "status": {**created["status"], "actor": "x-pause", "attempt": attempt},
            "payload": {"text": "a good day", "sentiment": "positive", "review": {"by": "bot"}},
        }

    def run(self, actor: str, body: dict[str, Any]) -> list[str]:
        """Deliver ``body`` to ``actor``'s runtime as one batch, metered as ``actor``; the failed record ids."""
        runtime = self.pause if actor == "x-pause" else self.resume
        event = deliver(self.mesh.aws.sqs, self.url(actor), [body], arn=queue_arn(self.mesh, actor))
        with self.meter.component(actor):
            response = runtime.handle(event, Context())
        return [f["itemIdentifier"] for f in response["batchItemFailures"]]

    def view(self, task_id: str) -> dict[str, Any]:
        response = self.client.get(f"/api/v1/mesh/{task_id}")
        assert response.status_code == 200, response.text
        view: dict[str, Any] = response.json()
        return view

    def resume_task(self, task_id: str, body: dict[str, Any]) -> httpx.Response:
        """POST the resume; its write units (the gateway's, metered in uvicorn's threads) land in ``last_resume``."""
        before, sends = self.writes("gateway"), self.sends("gateway")
        response = self.client.post(f"/api/v1/mesh/{task_id}/resume", json=body)
        self.last_resume = (self.writes("gateway") - before, self.sends("gateway") - sends)
        return response

    def sends(self, component: str) -> int:
        """SQS sends of ``component``; the gateway's include its deadline timers (metered as ``timers``)."""
        names = (component, "timers") if component == "gateway" else (component,)
        snapshot = self.meter.snapshot()
        return sum(found.requests for name in names if (found := snapshot.get((name, "sqs", "SendMessage"))))

    def paused_file(self, task_id: str) -> dict[str, Any] | None:
        s3 = self.mesh.aws.s3
        found = s3.list_objects_v2(Bucket=self.mesh.resources.bucket, Prefix=f"paused/{task_id}.json")
        if not found.get("KeyCount"):
            return None
        body = s3.get_object(Bucket=self.mesh.resources.bucket, Key=f"paused/{task_id}.json")["Body"].read()
        document: dict[str, Any] = json.loads(body)
        return document

    def writes(self, component: str) -> int:
        usage = Usage()
        for (name, svc, operation), value in self.meter.snapshot().items():
            if name == component and svc == "dynamodb" and operation in ("PutItem", "UpdateItem", "DeleteItem"):
                usage.add(value)
        return usage.wru


@pytest.fixture
def rig(mesh: Any) -> Iterator[Rig]:
    clock = ManualClock(START)
    aws = mesh.aws
    meter = Meter(shadow_dynamodb=aws.session.client("dynamodb"))
    for client in (aws.sqs, aws.dynamodb, aws.s3):
        meter.attach(client)
    store = TaskStore(
        table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=aws.dynamodb, s3=aws.s3, clock=clock
    )
    app = create_app(GatewayConfig(), manifest=mesh.manifest, store=store, sqs=aws.sqs, s3=aws.s3, clock=clock)

    def config(actor: str) -> ActorConfig:
        return ActorConfig.from_env(actor_env(mesh, actor, ASYA_ACTOR_TIMEOUT="30"))

    clients = {"sqs": aws.sqs, "dynamodb": aws.dynamodb, "s3": aws.s3, "clock": clock}
    with asgi_client(app) as client:
        yield Rig(
            mesh=mesh,
            clock=clock,
            store=store,
            client=client,
            pause=PauseRuntime(config("x-pause"), **clients),
            resume=ResumeRuntime(config("x-resume"), **clients),
            meter=meter,
        )


def _pause(rig: Rig, *, timeout: int | None = None, after: float = 10) -> tuple[str, dict[str, Any]]:
    task_id, created = rig.create(timeout)
    rig.clock.advance(after)
    body = rig.at_pause(created)
    assert rig.run("x-pause", body) == []
    return task_id, body


def test_p_pause_5_pause_stores_item_status_and_file_then_resume_succeeds_gw_resume_3(rig: Rig) -> None:
    """The whole round on one task id: x-pause (2 write units), GET paused with the prompt and the frozen budget, the
    resume (1 write unit), x-resume sends the merged envelope on under the same id and deletes the file."""
    task_id, _ = _pause(rig)

    view = rig.view(task_id)
    assert view["status"] == "paused"
    assert view["pause_metadata"] == METADATA  # GW-TASK-1, from the PAUSE item
    assert view["remaining_seconds"] == 590  # the flow's 600 s less the 10 s spent (P-PAUSE-4)
    assert view["deadline_at"] is None  # frozen: the backstop cannot fire (GW-BACK-5)
    assert view["message"] == "Publish this text?"
    assert view["data"]["remaining_seconds"] == 590 and view["data"]["pause_metadata"] == METADATA
    assert rig.writes("x-pause") == 2, "pause item + paused claim (GW-DATA-8 budget: at most 2)"
    assert drain(rig.mesh.aws.sqs, rig.url("x-sink")) == []  # P-PAUSE-6: it sends nothing

    document = rig.paused_file(task_id)
    assert document is not None
    assert document["id"] == task_id
    assert document["route"] == {"prev": [*PREV_AT_PAUSE, "x-pause"], "curr": "", "next": ["publish"]}
    assert "x-asya-pause" not in document["headers"] and "x-asya-route-resolved" not in document["headers"]  # P-HDR-4
    assert document["headers"]["x-asya-flow"] == FLOW
    assert document["pause"]["remaining_seconds"] == 590
    assert document["pause"]["metadata"] == METADATA
    assert document["payload"]["review"] == {"by": "bot"}

    rig.clock.advance(3600)  # an hour of human thinking costs nothing of the budget
    answer = rig.resume_task(task_id, {"input": {"approved": True, "note": "fine", "ignored": 1}})
    assert answer.status_code == 202, answer.text
    deadline = format_ts(rig.clock() + timedelta(seconds=590))
    assert answer.json() == {"id": task_id, "status": "running", "deadline_at": deadline}
    write_units, sends = rig.last_resume
    assert write_units == 1, "the paused -> running write (GW-DATA-8 budget: at most 2)"
    assert sends == 2, "the new deadline's timer (GW-BACK-1) and the envelope to x-resume"
    running = rig.view(task_id)
    assert (running["status"], running["deadline_at"], running["message"]) == ("running", deadline, "Resumed")

    [resume_message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert resume_message["route"] == {"prev": [], "curr": "x-resume", "next": []}
    assert resume_message["headers"]["x-asya-resume-task"] == task_id
    assert resume_message["headers"]["x-asya-resume-timeout"] == "590"
    assert rig.run("x-resume", resume_message) == []
    assert rig.writes("x-resume") == 0, "x-resume claims nothing: the gateway's resume is its fence (P-RESUME-2)"

    [restored] = drain(rig.mesh.aws.sqs, rig.url("publish"))
    assert restored["id"] == task_id  # P-RESUME-6: the same task id
    assert restored["route"] == {"prev": [*PREV_AT_PAUSE, "x-pause", "x-resume"], "curr": "publish", "next": []}
    assert restored["payload"] == {
        "text": "a good day",
        "sentiment": "positive",
        "review": {"by": "bot", "note": "fine"},  # payload_key /review/note (P-RESUME-4)
        "approved": True,
    }
    assert restored["status"]["deadline_at"] == deadline
    assert restored["status"]["created_at"] == "2026-03-01T10:00:00Z"
    assert restored["headers"]["x-asya-flow"] == FLOW
    assert "x-asya-resume-task" not in restored["headers"]
    assert rig.paused_file(task_id) is None  # P-RESUME-6


def test_p_resume_6_a_second_pause_stored_before_x_resume_deletes_the_first_file_is_kept(rig: Rig) -> None:
    """The restored envelope may reach the flow's next x-pause (here: its file stored by a hook right before
    x-resume's delete) before x-resume deletes the file it loaded: the delete names that file's ETag, so the new
    pause's file stays and its resume can run."""
    task_id, _ = _pause(rig)
    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    [resume_message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    bucket, key = rig.mesh.resources.bucket, f"paused/{task_id}.json"
    second = {**(rig.paused_file(task_id) or {}), "payload": {"second": "pause"}}

    def second_pause_lands(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key") == key:
            rig.mesh.aws.session.client("s3").put_object(Bucket=bucket, Key=key, Body=json.dumps(second).encode())

    rig.mesh.aws.s3.meta.events.register("before-parameter-build.s3.DeleteObject", second_pause_lands)
    try:
        assert rig.run("x-resume", resume_message) == []
    finally:
        rig.mesh.aws.s3.meta.events.unregister("before-parameter-build.s3.DeleteObject", second_pause_lands)
    assert len(drain(rig.mesh.aws.sqs, rig.url("publish"))) == 1  # the first resume went on
    kept = rig.paused_file(task_id)
    assert kept is not None and kept["payload"] == {"second": "pause"}


def test_gw_resume_1_bad_input_answers_400_naming_the_field(rig: Rig) -> None:
    task_id, _ = _pause(rig)
    cases = [
        ({"input": {"note": "x"}}, "missing required field 'approved'"),
        ({"input": {"approved": "yes"}}, "field 'approved' must be boolean"),
        ({"input": {"approved": True, "score": 1.5}}, "field 'score' must be integer"),
        ({"input": {"approved": True, "note": 3}}, "field 'note' must be string"),
        ({"input": [1]}, "input must be an object"),
        ({}, "input is required"),
        ({"input": {"approved": True}, "timeout": 0}, "timeout must be an integer number of seconds between 1"),
        ({"input": {"approved": True}, "extra": 1}, "unknown field 'extra'"),
    ]
    for body, message in cases:
        response = rig.resume_task(task_id, body)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"].startswith(message), response.json()
        assert rig.last_resume == (0, 0)
    assert rig.view(task_id)["status"] == "paused"  # nothing changed


def test_gw_resume_2_unknown_not_paused_and_no_stored_envelope(rig: Rig) -> None:
    missing = rig.resume_task("no-such-task", {"input": {}})
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})

    pending_id, _ = rig.create()
    pending = rig.resume_task(pending_id, {"input": {"approved": True}})
    assert (pending.status_code, pending.json()) == (409, {"error": "task is not paused (status: pending)"})

    # between the paused write and the file (P-PAUSE-5 step 3) a resume answers 409, which the client retries
    task_id, _ = _pause(rig)
    rig.mesh.aws.s3.delete_object(Bucket=rig.mesh.resources.bucket, Key=f"paused/{task_id}.json")
    early = rig.resume_task(task_id, {"input": {"approved": True}})
    assert (early.status_code, early.json()) == (409, {"error": "task has no stored envelope to resume"})
    assert rig.view(task_id)["status"] == "paused"

    # a second resume after the first won: 409 with the status found
    rig2_id, _ = _pause(rig)
    assert rig.resume_task(rig2_id, {"input": {"approved": True}}).status_code == 202
    again = rig.resume_task(rig2_id, {"input": {"approved": True}})
    assert (again.status_code, again.json()) == (409, {"error": "task is not paused (status: running)"})


def test_p_pause_5_redelivery_with_the_same_fence_completes_a_missing_file(rig: Rig) -> None:
    task_id, body = _pause(rig)
    rig.mesh.aws.s3.delete_object(Bucket=rig.mesh.resources.bucket, Key=f"paused/{task_id}.json")
    before = rig.writes("x-pause")
    assert rig.run("x-pause", body) == []
    assert rig.writes("x-pause") == before, "the redelivery writes no item: the task already holds its fence"
    document = rig.paused_file(task_id)
    assert document is not None and document["pause"]["remaining_seconds"] == 590


def test_p_resume_1_a_duplicate_x_pause_after_the_resume_writes_nothing(rig: Rig) -> None:
    """The resume raised the fence to (h_pause, maximum): the redelivered x-pause is a duplicate (P-ACK-8)."""
    task_id, body = _pause(rig)
    assert rig.resume_task(task_id, {"input": {"approved": False}}).status_code == 202
    before = rig.writes("x-pause")
    assert rig.run("x-pause", body) == []
    assert rig.writes("x-pause") == before, "no pause item, no paused write"
    assert rig.view(task_id)["status"] == "running"
    assert rig.paused_file(task_id) is not None, "the file x-resume still needs is left as it is"
    # and a later attempt of the same hop (a retry's redelivery) is a duplicate too
    assert rig.run("x-pause", rig.at_pause({**body, "status": body["status"]}, attempt=7)) == []
    assert rig.view(task_id)["status"] == "running"
    assert rig.writes("x-pause") == before


def test_gw_back_5_the_backstop_never_times_out_a_paused_task(rig: Rig) -> None:
    task_id, created = rig.create(timeout=60)
    deadline = created["status"]["deadline_at"]
    rig.clock.advance(10)
    assert rig.run("x-pause", rig.at_pause(created)) == []
    timer = {"id": task_id, "deadline_at": deadline}  # the create's timer (GW-BACK-1), as it comes due

    rig.clock.advance(3600)  # long past the deadline
    backstop = Backstop(rig.store, namespace="demo", timers=DeadlineTimers(namespace="demo"), metric=None)
    result = backstop.handle_timers([{"messageId": "m1", "body": json.dumps(timer)}])
    assert (result.timed_out, result.dropped, result.failed) == (0, 1, ())
    view = rig.view(task_id)  # the read-path backstop (GW-BACK-3) does not fire either: no deadline while paused
    assert (view["status"], view["remaining_seconds"]) == ("paused", 50)

    # resumed, the task gets now + 50 s and a new timer; the old one stays harmless
    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    renewed = format_ts(rig.clock() + timedelta(seconds=50))
    assert rig.view(task_id)["deadline_at"] == renewed
    assert backstop.handle_timers([{"messageId": "m2", "body": json.dumps(timer)}]).timed_out == 0
    rig.clock.advance(51)
    new_timer = {"id": task_id, "deadline_at": renewed}
    assert backstop.handle_timers([{"messageId": "m3", "body": json.dumps(new_timer)}]).timed_out == 1
    assert rig.view(task_id)["status"] == "failed"


def test_gw_resume_3_a_timeout_replaces_the_frozen_budget(rig: Rig) -> None:
    task_id, _ = _pause(rig)
    answer = rig.resume_task(task_id, {"input": {"approved": True}, "timeout": 30})
    assert answer.json()["deadline_at"] == format_ts(rig.clock() + timedelta(seconds=30))
    [message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert message["headers"]["x-asya-resume-timeout"] == "30"


def test_gw_cancel_2_cancel_while_paused_deletes_the_paused_envelope(rig: Rig) -> None:
    task_id, _ = _pause(rig)
    assert rig.paused_file(task_id) is not None
    assert rig.client.delete(f"/api/v1/mesh/{task_id}").status_code == 204
    assert rig.view(task_id)["status"] == "canceled"
    assert rig.paused_file(task_id) is None
    late = rig.resume_task(task_id, {"input": {"approved": True}})
    assert (late.status_code, late.json()) == (409, {"error": "task is not paused (status: canceled)"})


def test_p_pause_2_untracked_envelopes_and_bad_metadata_are_rejected_p_crew_1(rig: Rig) -> None:
    _, created = rig.create()
    stealth = rig.at_pause(created)
    stealth["headers"]["x-asya-mesh-status"] = "off"
    assert rig.run("x-pause", stealth) == []
    unknown = {**rig.at_pause(created), "id": "never-created"}
    assert rig.run("x-pause", unknown) == []
    [first, second] = drain(rig.mesh.aws.sqs, rig.url("x-sink"))
    for rejected in (first, second):
        assert rejected["status"]["phase"] == "failed" and rejected["status"]["reason"] == "RuntimeError"
        assert rejected["status"]["error"]["message"] == NOT_TRACKED
        assert rejected["route"]["curr"] == "x-pause"  # route unchanged

    task_id, created = rig.create()
    bad = rig.at_pause(created, metadata={"prompt": "ok", "fields": [{"name": "a", "type": "date"}]})
    assert rig.run("x-pause", bad) == []
    [failed] = drain(rig.mesh.aws.sqs, rig.url("x-sink"))
    assert failed["status"]["error"]["message"].startswith("x-asya-pause.fields[0].type: must be one of")
    assert rig.paused_file(task_id) is None
    assert rig.view(task_id)["status"] == "pending", "nothing written: x-sink fails the task"


def test_p_pause_3_default_metadata_and_no_deadline(rig: Rig) -> None:
    response = rig.client.post("/api/v1/mesh/?actor=request-review", json={"payload": {"text": "x"}})
    task_id = response.json()["id"]
    [created] = drain(rig.mesh.aws.sqs, rig.url("request-review"))
    assert rig.run("x-pause", rig.at_pause(created, metadata=None)) == []
    view = rig.view(task_id)
    assert view["pause_metadata"] == {"prompt": "Task paused", "fields": []}
    assert view["remaining_seconds"] is None
    answer = rig.resume_task(task_id, {"input": {"anything": 1}})
    assert answer.status_code == 202 and answer.json()["deadline_at"] is None
    [message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert "x-asya-resume-timeout" not in message["headers"]


def test_p_resume_2_header_must_name_the_task_and_stale_resumes_are_dropped(rig: Rig) -> None:
    task_id, _ = _pause(rig)
    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    [message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))

    forged = {**message, "headers": {**message["headers"], "x-asya-resume-task": "other"}}
    assert rig.run("x-resume", forged) == []
    [rejected] = drain(rig.mesh.aws.sqs, rig.url("x-sink"))
    assert "x-asya-resume-task must equal the envelope id" in rejected["status"]["error"]["message"]

    assert rig.run("x-resume", message) == []
    assert len(drain(rig.mesh.aws.sqs, rig.url("publish"))) == 1
    # P-RESUME-3: a redelivered resume finds no file: acked, nothing sent
    assert rig.run("x-resume", message) == []
    assert drain(rig.mesh.aws.sqs, rig.url("publish")) == []


def test_gw_data_8_a_resume_with_a_long_deadline_stays_within_2_write_units_gw_back_1(rig: Rig) -> None:
    """A renewed deadline over 900 s away enters the sparse ``long_deadlines`` index instead of getting a timer."""
    task_id, _ = _pause(rig)
    answer = rig.resume_task(task_id, {"input": {"approved": True}, "timeout": 3600})
    assert answer.status_code == 202
    assert rig.last_resume == (2, 1), "the task item and its long_deadlines entry; only the x-resume send"
    due = format_ts(rig.clock() + timedelta(seconds=3600))
    rig.clock.advance(3601)
    assert {"id": task_id, "deadline_at": due} in [e for page in rig.store.long_deadline_pages() for e in page]


def _a2a_send(rig: Rig, task_id: str, data: dict[str, Any]) -> dict[str, Any]:
    message = {"kind": "message", "role": "user", "messageId": "m", "taskId": task_id}
    message["parts"] = [{"kind": "data", "data": data}]
    send = {"jsonrpc": "2.0", "id": 7, "method": "message/send"}
    send["params"] = {"message": message, "configuration": {"blocking": False}}
    answer: dict[str, Any] = rig.client.post("/a2a/", json=send).json()
    return answer


def test_gw_a2a_7_a_message_with_the_task_id_resumes_the_paused_task(rig: Rig) -> None:
    task_id, _ = _pause(rig)
    refused = _a2a_send(rig, task_id, {"note": "no verdict"})
    assert refused["error"]["code"] == -32602
    assert refused["error"]["message"].endswith("missing required field 'approved'")

    task = _a2a_send(rig, task_id, {"approved": True})["result"]
    assert task["id"] == task_id, "the same task goes on: no new task is created"
    assert task["status"]["state"] == "working"
    [message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert message["payload"] == {"approved": True}
    again = _a2a_send(rig, task_id, {"approved": True})
    assert again["error"]["code"] == -32004


def test_p_ack_8_a_hop_held_under_another_runs_live_lease_fails_the_record_and_writes_no_status(rig: Rig) -> None:
    task_id, created = rig.create()
    body = rig.at_pause(created)
    hop = len(PREV_AT_PAUSE) + 1
    far = int((START + timedelta(hours=1)).timestamp() * 1000)
    claimed = rig.store.running(
        task_id,
        step="processing",
        actor="x-pause",
        route_prev=PREV_AT_PAUSE,
        route_curr="x-pause",
        route_next=["publish"],
        claim=(hop, 1, far),
    )
    assert claimed.accepted
    assert len(rig.run("x-pause", body)) == 1, "the record comes back once that lease ends"
    assert rig.view(task_id)["status"] == "running"
    assert rig.paused_file(task_id) is None


# --------------------------------------------------------------------------- S3 as IAM answers it (issue 24)


class _NoBucketListing:
    """S3 as it answers a role without an unconditioned ``s3:ListBucket`` (every mesh role, ``asya_deploy.access``): a
    ``GetObject``/``HeadObject`` of a missing key is 403 ``AccessDenied``, never 404; reads of ``denied`` keys are
    403 whether they exist or not. moto answers 404 to everyone, so the rig's S3 client is made to answer this way."""

    def __init__(self, rig: Rig, denied: tuple[str, ...] = ()) -> None:
        self.s3 = rig.mesh.aws.s3
        self.bucket = rig.mesh.resources.bucket
        self.probe = rig.mesh.aws.session.client("s3")
        self.denied = denied

    def __enter__(self) -> _NoBucketListing:
        for operation in ("GetObject", "HeadObject"):
            self.s3.meta.events.register(f"before-parameter-build.s3.{operation}", self._answer)
        return self

    def __exit__(self, *_: object) -> None:
        for operation in ("GetObject", "HeadObject"):
            self.s3.meta.events.unregister(f"before-parameter-build.s3.{operation}", self._answer)

    def _answer(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        from botocore.exceptions import ClientError

        key = str(params.get("Key"))
        listed = self.probe.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1).get("Contents", [])
        if key.startswith(self.denied) or not any(entry["Key"] == key for entry in listed):
            code = "403" if model.name == "HeadObject" else "AccessDenied"
            raise ClientError({"Error": {"Code": code, "Message": "Forbidden"}}, model.name)


def test_p_resume_3_a_redelivered_resume_acks_when_s3_answers_403_for_the_deleted_file(rig: Rig) -> None:
    """P-RESUME-3 under IAM: the file x-resume deleted reads as 403 (no bucket-wide ListBucket); ``asya.missingkey``
    lists the key under the prefix-conditioned grant, finds nothing, and the redelivery is acked without a send.
    Before issue 24 the 403 failed the record until it reached the DLQ."""
    task_id, _ = _pause(rig)
    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    [resume_message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    with _NoBucketListing(rig):
        assert rig.run("x-resume", resume_message) == []
        assert rig.paused_file(task_id) is None
        assert len(drain(rig.mesh.aws.sqs, rig.url("publish"))) == 1
        assert rig.run("x-resume", resume_message) == [], "the redelivery finds no file: acked"
    assert drain(rig.mesh.aws.sqs, rig.url("publish")) == []


def test_gw_resume_2_no_stored_envelope_is_409_when_s3_answers_403(rig: Rig) -> None:
    """GW-RESUME-2 under IAM: the gateway's HeadObject of a missing paused file is 403; it still answers 409."""
    task_id, _ = _pause(rig)
    rig.mesh.aws.s3.delete_object(Bucket=rig.mesh.resources.bucket, Key=f"paused/{task_id}.json")
    with _NoBucketListing(rig):
        early = rig.resume_task(task_id, {"input": {"approved": True}})
    assert (early.status_code, early.json()) == (409, {"error": "task has no stored envelope to resume"})


def test_p_pause_5_redelivery_never_reads_the_paused_file(rig: Rig) -> None:
    """P-PAUSE-5 without a read grant on paused/ (x-pause's role has none): a redelivery keeps a stored file by a
    conditional write, and completes a missing one."""
    task_id, body = _pause(rig)
    stored = rig.paused_file(task_id)
    with _NoBucketListing(rig, denied=("paused/",)):
        assert rig.run("x-pause", body) == []
    assert rig.paused_file(task_id) == stored
    rig.mesh.aws.s3.delete_object(Bucket=rig.mesh.resources.bucket, Key=f"paused/{task_id}.json")
    with _NoBucketListing(rig, denied=("paused/",)):
        assert rig.run("x-pause", body) == []
    assert rig.paused_file(task_id) is not None


def test_p_flowv_4_a_paused_task_keeps_its_payload_past_the_expiry_of_payloads(rig: Rig) -> None:
    """x-pause stores the payload itself, read back from its ``payloads/`` reference, in ``paused/{id}.json``: the
    reference's 15-day expiry (P-LARGE-6) never limits how long a task may stay paused."""
    task_id, created = rig.create()
    body = rig.at_pause(created)
    key = f"payloads/{task_id}/0003-x-pause-0a1b2c3d.json"
    s3, bucket = rig.mesh.aws.s3, rig.mesh.resources.bucket
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(body["payload"]))
    body["payload"] = {"__ref__": f"s3://{bucket}/{key}"}
    assert rig.run("x-pause", body) == []
    document = rig.paused_file(task_id)
    assert document is not None and document["payload"]["review"] == {"by": "bot"}
    s3.delete_object(Bucket=bucket, Key=key)  # as the lifecycle rule does after 15 days
    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    [resume_message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert rig.run("x-resume", resume_message) == []
    [restored] = drain(rig.mesh.aws.sqs, rig.url("publish"))
    assert restored["payload"]["sentiment"] == "positive" and restored["payload"]["approved"] is True


def test_gw_task_10_a_paused_task_view_shows_the_state_at_the_pause(rig: Rig) -> None:
    """The route's actors changed the payload before x-pause stored it: the view keeps the original input in
    ``payload`` and shows the stored state in ``paused_state``; it is gone once the task is resumed."""
    task_id, body = _pause(rig)
    view = rig.view(task_id)
    assert view["payload"] == {"text": "a good day"}
    assert (
        view["paused_state"]
        == body["payload"]
        == {
            "text": "a good day",
            "sentiment": "positive",
            "review": {"by": "bot"},
        }
    )
    assert "paused_state" not in view["data"], "the status data object stays small (SSE frames)"

    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    assert "paused_state" not in rig.view(task_id)


def test_gw_task_10_the_view_omits_the_paused_state_until_x_pause_stored_it(rig: Rig) -> None:
    """x-pause writes the paused status before its file: a view in between has no ``paused_state`` (not a null)."""
    task_id, _ = _pause(rig)
    rig.mesh.aws.s3.delete_object(Bucket=rig.mesh.resources.bucket, Key=f"paused/{task_id}.json")
    view = rig.view(task_id)
    assert view["status"] == "paused"
    assert "paused_state" not in view and "paused_state_url" not in view


def test_gw_task_10_a_paused_state_over_4_mib_is_a_presigned_url_of_the_paused_envelope(rig: Rig) -> None:
    """Above the view's inline limit the state is not read back: the view names the paused envelope instead."""
    task_id, _ = _pause(rig)
    document = rig.paused_file(task_id)
    assert document is not None
    document["payload"] = {"text": "x" * (4 * 1024 * 1024 + 1)}
    key = f"paused/{task_id}.json"
    rig.mesh.aws.s3.put_object(Bucket=rig.mesh.resources.bucket, Key=key, Body=json.dumps(document).encode())
    view = rig.view(task_id)
    assert "paused_state" not in view
    url = urlsplit(view["paused_state_url"])  # moto runs in process: the URL is checked, not fetched
    assert url.path.endswith(f"/{key}") or url.path == f"/{rig.mesh.resources.bucket}/{key}"
    assert "Signature" in url.query


def _expiry_message(rig: Rig, task_id: str, seconds: int) -> dict[str, Any]:
    """The expiry x-pause sent for the task's pause at hop 4 (its fence), as x-resume receives it once due."""
    from asya import pausing

    due = pausing.expiry_due(rig.clock(), seconds)
    envelope = pausing.expiry_envelope(
        task_id, pausing.PauseExpiry(fence=(len(PREV_AT_PAUSE) + 1, 1), seconds=seconds, due_at=due), now=rig.clock()
    )
    message: dict[str, Any] = json.loads(envelope.to_json())
    return message


def test_p_wait_2_a_pause_nobody_resumes_times_out_and_a_late_resume_is_409(rig: Rig) -> None:
    task_id, created = rig.create()
    rig.clock.advance(10)
    assert rig.run("x-pause", rig.at_pause(created, {**METADATA, "timeout": 60})) == []
    assert rig.sends("x-pause") == 1, "the pause's expiry, sent to x-resume with a delay"
    assert rig.view(task_id)["pause_metadata"]["timeout"] == 60
    expiry = _expiry_message(rig, task_id, 60)

    rig.clock.advance(61)
    assert rig.run("x-resume", expiry) == []
    view = rig.view(task_id)
    assert (view["status"], view["message"]) == ("running", "Pause timed out after 60 s")
    assert view["deadline_at"] == format_ts(rig.clock() + timedelta(seconds=590))  # the frozen budget, as a resume
    assert isinstance(view["pause_timed_out_at"], str)
    # a static route has no except clause: the task fails with reason Timeout at the pause
    [failed] = drain(rig.mesh.aws.sqs, rig.url("x-sink"))
    assert failed["id"] == task_id
    assert (failed["status"]["phase"], failed["status"]["reason"]) == ("failed", "Timeout")
    assert failed["status"]["error"]["type"] == "TimeoutError"
    assert failed["status"]["error"]["message"] == "pause timed out after 60 s: nobody resumed the task"
    assert failed["payload"]["original_payload"]["review"] == {"by": "bot"}
    assert rig.paused_file(task_id) is None
    assert drain(rig.mesh.aws.sqs, rig.url("publish")) == []

    late = rig.resume_task(task_id, {"input": {"approved": True}})
    assert late.status_code == 409
    assert late.json()["error"] == (
        f"the pause timed out at {view['pause_timed_out_at']}: task is not paused (status: running)"
    )

    # a copy of the expiry after its write sends the failure again (x-sink keeps the first terminal write)
    rig.mesh.aws.s3.put_object(
        Bucket=rig.mesh.resources.bucket, Key=f"paused/{task_id}.json", Body=json.dumps(_document(task_id)).encode()
    )
    assert rig.run("x-resume", expiry) == []
    assert len(drain(rig.mesh.aws.sqs, rig.url("x-sink"))) == 1


def _document(task_id: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "route": {"prev": [*PREV_AT_PAUSE, "x-pause"], "curr": "", "next": ["publish"]},
        "headers": {"x-asya-flow": FLOW},
        "status": {"created_at": "2026-03-01T10:00:00Z"},
        "payload": {"text": "a good day"},
        "pause": {"metadata": {**METADATA, "timeout": 60}, "paused_at": "2026-03-01T10:00:10Z"},
    }


def test_p_wait_2_a_resume_in_time_wins_and_the_expiry_comes_to_nothing(rig: Rig) -> None:
    task_id, created = rig.create()
    rig.clock.advance(10)
    assert rig.run("x-pause", rig.at_pause(created, {**METADATA, "timeout": 60})) == []
    expiry = _expiry_message(rig, task_id, 60)
    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    [resume_message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    rig.clock.advance(61)
    assert rig.run("x-resume", expiry) == []
    view = rig.view(task_id)
    assert (view["status"], view["message"]) == ("running", "Resumed")
    assert "pause_timed_out_at" not in view
    assert drain(rig.mesh.aws.sqs, rig.url("x-sink")) == []
    assert rig.paused_file(task_id) is not None  # the resume's own x-resume delivery still needs it
    assert rig.run("x-resume", resume_message) == []
    assert len(drain(rig.mesh.aws.sqs, rig.url("publish"))) == 1


def test_p_wait_2_an_expiry_that_comes_early_waits_on_its_own_queue_p_res_9(rig: Rig) -> None:
    task_id, created = rig.create()
    assert rig.run("x-pause", rig.at_pause(created, {**METADATA, "timeout": 3600})) == []
    expiry = _expiry_message(rig, task_id, 3600)
    rig.clock.advance(900)
    before = rig.sends("x-resume")
    assert rig.run("x-resume", expiry) == []
    assert rig.sends("x-resume") == before + 1, "re-sent to x-resume, delayed again"
    assert rig.view(task_id)["status"] == "paused"


def test_p_wait_2_a_pause_without_timeout_sends_no_expiry(rig: Rig) -> None:
    _pause(rig)
    assert rig.sends("x-pause") == 0


WAIT = {"prompt": "Waiting for event 'approved'", "fields": [], "event": "approved", "path": "/review/decision"}


def _signal(rig: Rig, task_id: str, body: dict[str, Any]) -> httpx.Response:
    return rig.client.post(f"/api/v1/mesh/{task_id}/signal", json=body)


def test_gw_signal_1_a_signal_ends_the_wait_for_its_event_and_x_resume_sets_its_data_at_the_path(rig: Rig) -> None:
    task_id, created = rig.create()
    rig.clock.advance(10)
    assert rig.run("x-pause", rig.at_pause(created, WAIT)) == []
    refused = rig.resume_task(task_id, {"input": {"approved": True}})
    assert refused.status_code == 409
    assert refused.json()["error"] == (
        f"task waits for event 'approved': send it with POST /api/v1/mesh/{task_id}/signal"
    )
    other = _signal(rig, task_id, {"event": "other", "data": 1})
    assert other.status_code == 202 and other.json()["delivered"] is False  # buffered: it waits for another event

    answer = _signal(rig, task_id, {"event": "approved", "data": {"by": "ann", "ok": True}})
    assert answer.status_code == 202, answer.text
    deadline = format_ts(rig.clock() + timedelta(seconds=590))
    assert answer.json() == {
        "id": task_id,
        "event": "approved",
        "delivered": True,
        "status": "running",
        "deadline_at": deadline,
    }
    assert rig.view(task_id)["message"] == "Signal 'approved' delivered"
    [message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert message["payload"] == {"by": "ann", "ok": True}
    assert rig.run("x-resume", message) == []
    [restored] = drain(rig.mesh.aws.sqs, rig.url("publish"))
    assert restored["payload"]["review"] == {"by": "bot", "decision": {"by": "ann", "ok": True}}
    again = _signal(rig, task_id, {"event": "approved", "data": 2})
    assert again.status_code == 202 and again.json()["delivered"] is False  # for a later wait of the event


def test_gw_signal_2_a_signal_before_the_wait_is_buffered_once_and_taken_by_x_pause(rig: Rig) -> None:
    task_id, created = rig.create()
    first = _signal(rig, task_id, {"event": "approved", "data": {"ok": True}})
    assert first.status_code == 202, first.text
    assert first.json() == {"id": task_id, "event": "approved", "delivered": False, "status": "pending"}
    duplicate = _signal(rig, task_id, {"event": "approved", "data": {"ok": False}})
    assert duplicate.status_code == 409
    assert duplicate.json()["error"] == "a signal of event 'approved' is already buffered for the task"

    rig.clock.advance(10)
    assert rig.run("x-pause", rig.at_pause(created, WAIT)) == []
    view = rig.view(task_id)
    assert (view["status"], view["message"]) == ("running", "Signal 'approved' delivered")
    [message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert message["payload"] == {"ok": True}  # the first signal, not the refused duplicate
    assert rig.run("x-resume", message) == []
    [restored] = drain(rig.mesh.aws.sqs, rig.url("publish"))
    assert restored["payload"]["review"]["decision"] == {"ok": True}
    # taken: the next signal of the event is buffered again
    assert _signal(rig, task_id, {"event": "approved", "data": 3}).json()["delivered"] is False


def test_gw_signal_3_bad_events_references_and_ended_tasks(rig: Rig) -> None:
    task_id, _ = rig.create()
    for body, status, text in (
        ({"event": "a b"}, 400, "event: must be 1 to 64 letters"),
        ({"data": 1}, 400, "event: must be 1 to 64 letters"),
        ({"event": "e", "data": {"__ref__": "s3://bucket/key"}}, 400, "data"),
        ({"event": "e", "extra": 1}, 400, "unknown field 'extra'"),
        ({"event": "e", "data": "x" * 70_000}, 400, "over the limit of 65536"),
    ):
        answer = _signal(rig, task_id, body)
        assert answer.status_code == status, (body, answer.text)
        assert text in answer.json()["error"]
    assert _signal(rig, "no-such-task", {"event": "e"}).status_code == 404
    assert rig.client.delete(f"/api/v1/mesh/{task_id}").status_code == 204
    ended = _signal(rig, task_id, {"event": "e"})
    assert ended.status_code == 409 and ended.json()["error"] == "task has ended (status: canceled)"


def test_gw_signal_1_a2a_tasks_signal_is_the_rest_signal(rig: Rig) -> None:
    task_id, created = rig.create()
    assert rig.run("x-pause", rig.at_pause(created, WAIT)) == []

    def call(params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/signal", "params": params}
        answer = rig.client.post("/a2a/", json=body)
        assert answer.status_code == 200, answer.text
        reply: dict[str, Any] = answer.json()
        return reply

    bad = call({"id": task_id, "event": "a b"})
    assert bad["error"]["code"] == -32602 and "event: must be 1 to 64 letters" in bad["error"]["message"]
    assert call({"id": "no-such-task", "event": "approved"})["error"]["code"] == -32001
    done = call({"id": task_id, "event": "approved", "data": {"ok": True}})
    assert done["result"]["delivered"] is True and done["result"]["status"] == "running"
    [message] = drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    assert message["payload"] == {"ok": True}


def test_p_wait_2_an_early_leg_of_the_expiry_of_a_resumed_pause_stops_the_chain(rig: Rig) -> None:
    task_id, created = rig.create()
    assert rig.run("x-pause", rig.at_pause(created, {**METADATA, "timeout": 3600})) == []
    expiry = _expiry_message(rig, task_id, 3600)
    assert rig.resume_task(task_id, {"input": {"approved": True}}).status_code == 202
    drain(rig.mesh.aws.sqs, rig.url("x-resume"))
    rig.clock.advance(900)
    before = rig.sends("x-resume")
    assert rig.run("x-resume", expiry) == []
    assert rig.sends("x-resume") == before, "the pause is over: the expiry is not sent on"
