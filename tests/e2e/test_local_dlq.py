"""Poison messages, the DLQ commands and the deadline backstop against ``asya dev`` as users run it (P-ACK-5,
P-ACK-6, P-TIME-9, GW-BACK-1, GW-BACK-4).

``asya dev`` serves the poison mesh (an actor that crashes its invocation until a flag file exists) from a copy in a
temporary directory; the test talks to it over HTTP and runs ``asya dlq ... --local`` in-process, which finds the
mesh through the ``.asya/dev/asya.yaml.json`` that ``asya dev`` writes. The one shortcut: the actor queue is
recreated with a visibility timeout of 0 so crashed records come back at once instead of after 90 s. Recreated, not
changed in place: moto applies the visibility timeout that was set when a receive started, so a long poll begun before
a change could still hide a record for 90 s, while one begun on the old queue can never receive from the new one.
"""

from __future__ import annotations

import io
import json
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.store import TaskStore
from asya_local.cli import main
from asya_local.moto_server import make_clients
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

POISON = Path(__file__).resolve().parent.parent / "handlers" / "poison"
#: Attributes SQS sets itself (counts, timestamps, the ARN): not carried over when a queue is recreated.
_READ_ONLY = {"QueueArn", "CreatedTimestamp", "LastModifiedTimestamp"}


def recreate_queue(sqs: Any, name: str, **changes: str) -> None:
    """Delete queue ``name`` and create it again with the same attributes but ``changes``. A receive in progress keeps
    polling the deleted queue until its wait ends, and receives nothing sent after this returns."""
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    settable = {k: v for k, v in attributes.items() if k not in _READ_ONLY and not k.startswith("Approximate")}
    sqs.delete_queue(QueueUrl=url)
    assert sqs.create_queue(QueueName=name, Attributes={**settable, **changes})["QueueUrl"] == url


class Dev:
    """A running ``asya dev`` of a copy of the poison mesh."""

    def __init__(self, root: Path, proc: subprocess.Popen[str], url: str) -> None:
        self.root = root
        self.proc = proc
        self.url = url
        self.state_file = root / ".asya" / "dev" / "asya.yaml.json"

    def dlq(self, *argv: str) -> tuple[int, Any]:
        out, err = io.StringIO(), io.StringIO()
        argv = ("dlq", *argv, "--manifest", str(self.root / "asya.yaml"), "--local", "--json")
        code = main(list(argv), env={}, stdout=out, stderr=err, cwd=Path(__file__).resolve().parent)
        assert code in (0, 1), err.getvalue()
        return code, json.loads(out.getvalue())

    def create(self, flag: Path, timeout: int) -> str:
        response = httpx.post(
            f"{self.url}/api/v1/mesh/",
            params={"flow": "brittle"},
            json={"payload": {"fixed_flag": str(flag)}, "timeout": timeout},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def view(self, task_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/api/v1/mesh/{task_id}", timeout=10)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture
def dev(tmp_path: Path, run_dev: Any) -> Iterator[Dev]:
    root = tmp_path / "poison"
    shutil.copytree(POISON, root, ignore=shutil.ignore_patterns("__pycache__", ".asya"))
    with run_dev("asya.yaml", cwd=root, log=tmp_path / "dev.stderr") as process:
        assert process.proc.stdout is not None
        # stdout carries the actors' JSON logs from here on: drain it so the pipe never fills up
        threading.Thread(target=process.proc.stdout.read, daemon=True).start()
        yield Dev(root, process.proc, process.url)


def test_poison_message_reaches_the_dlq_is_redriven_and_completes_while_the_backstop_times_out_another(
    dev: Dev, tmp_path: Path
) -> None:
    state = wait_for(lambda: dev.state_file.exists() and json.loads(dev.state_file.read_text()), "the state file")
    assert state["gateway_url"] == dev.url and state["pid"] == dev.proc.pid and state["namespace"] == "poison"
    clients = make_clients(state["endpoint_url"], region=state["region"])
    recreate_queue(clients.sqs, "asya-poison-fragile", VisibilityTimeout="0")
    raw = TaskStore(table="asya-poison-tasks", dynamodb=clients.dynamodb)

    flag = tmp_path / "fixed"
    # Created first, so its two crashed invocations (well under a second together) come before the other task's.
    # Its deadline is the one real timer here: its envelope must crash into the DLQ at least 1 s before it, or the
    # layer's own SLA check (P-TIME-3) fails the task instead; 20 s leaves ample room on a busy machine.
    hasty = dev.create(flag, timeout=20)
    patient = dev.create(flag, timeout=600)

    # P-ACK-5/6: every invocation crashes; after max_receive_count receives both envelopes are in the DLQ
    wait_for(lambda: dev.dlq("list", "fragile")[1][0]["visible"] == 2, "both envelopes in the DLQ")
    shown = {m["task_id"]: m for m in dev.dlq("show", "fragile")[1]}
    assert set(shown) == {patient, hasty}
    assert shown[patient]["receive_count"] >= 2

    # GW-BACK-1: the mesh's own backstop loop fails the overdue task (read raw: no read-path backstop involved)
    wait_for(lambda: raw.get_task(hasty, enforce_deadline=False)["status"] == "failed", "the backstop")  # type: ignore[index]
    assert raw.get_task(hasty, enforce_deadline=False)["error"] == "task timed out"  # type: ignore[index]
    assert raw.get_task(patient, enforce_deadline=False)["status"] in ("pending", "running")  # type: ignore[index]

    flag.touch()  # the fix is deployed
    code, result = dev.dlq("redrive", "fragile")
    assert code == 0
    assert (result["method"], result["moved"], result["failed"]) == ("copy", 2, 0)  # auto: copy for moto

    wait_for(lambda: dev.view(patient)["status"] == "succeeded", "the redriven task to succeed")
    assert dev.view(patient)["result"] == {"fixed_flag": str(flag), "handled": True}
    # P-STAT-2: the timed-out task stays failed although its envelope was redriven and the actor now works
    wait_for(lambda: dev.dlq("list", "fragile")[1][0]["visible"] == 0, "an empty DLQ")
    view = dev.view(hasty)
    assert (view["status"], view["error"]) == ("failed", "task timed out")

    dev.proc.send_signal(signal.SIGINT)
    assert dev.proc.wait(timeout=60) == 0
    assert not dev.state_file.exists()  # asya dev removes its state file
