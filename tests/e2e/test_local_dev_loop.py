"""``asya dev`` as a dev loop (issue 20, point 2): an edited handler runs at the next invocation without a restart,
and a manifest change restarts the mesh on the same URL against the same moto, so every task survives."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.e2e

_MANIFEST = """\
namespace: loop
actors:
  shout: {handler: loop_actors.shout}
flows:
  loud: {route: [shout], timeout: 60}
"""
_V1 = "def shout(payload):\n    return {'said': payload['text'].upper(), 'version': 1}\n"
_V2 = (
    "def shout(payload):\n    return {'said': payload['text'].upper() + '!', 'version': 2}\n"
    "def echo(payload):\n    return {**payload, 'echoed': True}\n"
)


def _run_task(url: str, flow: str, payload: Any) -> dict[str, Any]:
    created = httpx.post(f"{url}/api/v1/mesh/", params={"flow": flow}, json={"payload": payload}, timeout=10)
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    deadline = time.monotonic() + 60  # a failure guard, not a timing bound
    while True:
        view = httpx.get(f"{url}/api/v1/mesh/{task_id}", timeout=10).json()
        if view["status"] in ("succeeded", "failed") or time.monotonic() > deadline:
            return dict(view)
        time.sleep(0.1)


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _write(path: Path, text: str) -> None:
    """Write ``text`` so that a poll by modification time and size always sees a change."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    stat = path.stat()
    if stat.st_mtime_ns == before:
        os.utime(path, ns=(stat.st_atime_ns, before + 1_000_000))


def test_an_edited_handler_runs_at_the_next_invocation_and_a_manifest_change_keeps_the_state(
    tmp_path: Path, run_dev: Any
) -> None:
    (tmp_path / "functions").mkdir()
    code = tmp_path / "functions" / "loop_actors.py"
    _write(code, _V1)
    manifest = tmp_path / "asya.yaml"
    _write(manifest, _MANIFEST)
    with run_dev(manifest, cwd=tmp_path, log=tmp_path / "dev.stderr") as dev:
        first = _run_task(dev.url, "loud", {"text": "hi"})
        assert first["result"] == {"said": "HI", "version": 1}

        _write(code, _V2)
        _wait_for(lambda: "code changed (functions/loop_actors.py): reloading loop_actors" in dev.stderr(), "reload")
        second = _run_task(dev.url, "loud", {"text": "hi"})
        assert second["result"] == {"said": "HI!", "version": 2}

        _write(manifest, _MANIFEST.replace("route: [shout]", "route: [nope]"))
        _wait_for(lambda: "cannot be used; still serving the previous one" in dev.stderr(), "refusal")
        assert (
            f"asya: {manifest} changed but cannot be used; still serving the previous one:\n"
            f"{manifest}: invalid manifest:\n  flows.loud.route[0]: unknown actor 'nope'; actors: shout\n"
        ) in dev.stderr()
        assert _run_task(dev.url, "loud", {"text": "still"})["result"]["said"] == "STILL!"

        # a flow that crashed the parser killed asya dev and moto with it; now it is refused like any error (P-FLOW-22)
        deep = "\n".join(
            ["def deep(state):", "    state = shout(state)"]
            + [f"    {'if' if i == 0 else 'elif'} state['k'] == {i}:\n        state['v'] = {i}" for i in range(5000)]
        )
        _write(tmp_path / "deep.py", deep + "\n")
        _write(manifest, _MANIFEST + "  deep: {source: deep.py}\n")
        _wait_for(lambda: "nested too deeply" in dev.stderr(), "the deep flow's refusal")
        assert "flows.deep.source: the flow does not compile" in dev.stderr()
        assert _run_task(dev.url, "loud", {"text": "alive"})["result"]["said"] == "ALIVE!"

        _write(
            manifest,
            _MANIFEST.replace("flows:", "  echo: {handler: loop_actors.echo}\nflows:")
            + "  twice: {route: [shout, echo], timeout: 60}\n",
        )
        _wait_for(lambda: "restarted at" in dev.stderr(), "restart")
        assert f"asya dev: mesh 'loop' restarted at {dev.url}; moto's state was kept" in dev.stderr()
        again = httpx.get(f"{dev.url}/api/v1/mesh/{first['id']}", timeout=10).json()
        assert (again["status"], again["result"]) == ("succeeded", {"said": "HI", "version": 1})
        twice = _run_task(dev.url, "twice", {"text": "a"})  # a new actor: its queue was created at the restart
        assert twice["result"] == {"said": "A!", "version": 2, "echoed": True}, json.dumps(twice)
        history = httpx.get(f"{dev.url}/api/v1/mesh/{first['id']}/history", timeout=10)
        assert history.status_code == 200  # the run history (in the bucket, P-HIST-10) survives the restart
        assert history.json()["steps"][0]["actor"] == "shout"


def test_fix_the_actor_then_redrive_its_dlq_and_the_new_code_runs(tmp_path: Path) -> None:
    """The guide's "fix the actor first, and redrive" (docs/guide.md), locally: a task's envelope sits in the
    actor's DLQ (moved there through SQS as a redrive policy does), the handler file is fixed, ``asya dlq redrive
    --local`` sends it back, and the reloaded code finishes the task (no restart, the task kept)."""
    import io as text_io

    from asya.manifest import load_manifest
    from asya_local.cli import main
    from asya_local.localstate import dev_state, state_path
    from asya_local.mesh import LocalMesh
    from asya_local.reload import CodeWatcher

    (tmp_path / "functions").mkdir()
    code = tmp_path / "functions" / "redrive_actors.py"
    _write(code, "def shout(payload):\n    raise SystemExit('v1 crashes the container')\n")
    manifest_path = tmp_path / "asya.yaml"
    _write(manifest_path, _MANIFEST.replace("loop_actors", "redrive_actors"))
    manifest = load_manifest(manifest_path)
    watcher = CodeWatcher([tmp_path / "functions"])
    with LocalMesh(manifest, port=0, watcher=watcher) as mesh, dev_state(mesh, state_path(manifest_path)):
        shout = mesh.esms["shout"]
        shout.stop(timeout=30)  # hold the envelope where the test can move it, as repeated crashes would
        created = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"flow": "loud"}, json={"payload": {"text": "hi"}})
        task_id = created.json()["id"]
        sqs, queue, dlq = mesh.clients.sqs, mesh.resources.queue_urls["shout"], mesh.resources.dlq_urls["shout"]
        (message,) = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=5)["Messages"]
        sqs.send_message(QueueUrl=dlq, MessageBody=message["Body"])
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])

        _write(code, _V2.replace("def echo", "def unused"))
        change = watcher.poll()
        assert change is not None and change.files == (code.resolve(),)
        shout.start()
        out, err = text_io.StringIO(), text_io.StringIO()
        status = main(
            ["dlq", "redrive", "shout", "--local", "--manifest", str(manifest_path)], env={}, stdout=out, stderr=err
        )
        assert status == 0, err.getvalue()
        _wait_for(
            lambda: httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()["status"] == "succeeded",
            "the redriven task",
        )
        view = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
        assert view["result"] == {"said": "HI!", "version": 2}


_DROPPED = """\
namespace: drop
actors:
  shout: {handler: drop_actors.shout}
  hold: {handler: drop_actors.hold, batch_size: 1}
flows:
  loud: {route: [shout], timeout: 60}
"""
_HOLD = (
    "import pathlib, time\n"
    "def shout(payload):\n    return {'said': payload['text'].upper()}\n"
    "def hold(payload):\n"
    "    while not pathlib.Path(payload['gate']).exists():\n        time.sleep(0.05)\n"
    "    return payload\n"
)


def _gateway_down(url: str) -> bool:
    try:
        httpx.get(f"{url}/health", timeout=1)
    except httpx.TransportError:
        return True
    return False


def _status(url: str, task_id: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/api/v1/mesh/{task_id}", timeout=10).json())


def test_local_orphan_1_a_restart_that_drops_an_actor_fails_the_tasks_waiting_in_its_queue(
    tmp_path: Path, run_dev: Any
) -> None:
    """``hold`` runs one task at a time (one poller, batches of one); two more wait in its queue when the manifest
    drops it. The restarted mesh fails those two at once (they have no deadline: they would have stayed ``running``
    for ever), and the diagnostic reports the actor as undeclared and gone (LOCAL-ORPHAN-1, GW-OPS-5)."""
    (tmp_path / "functions").mkdir()
    _write(tmp_path / "functions" / "drop_actors.py", _HOLD)
    manifest = tmp_path / "asya.yaml"
    _write(manifest, _DROPPED)
    gate = tmp_path / "gate"
    with run_dev(manifest, cwd=tmp_path, log=tmp_path / "dev.stderr") as dev:
        ids = []
        for _ in range(3):
            created = httpx.post(
                f"{dev.url}/api/v1/mesh/", params={"actor": "hold"}, json={"payload": {"gate": str(gate)}}, timeout=10
            )
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        _wait_for(lambda: sum(_status(dev.url, i)["status"] == "running" for i in ids) == 1, "hold to take one task")
        held = next(i for i in ids if _status(dev.url, i)["status"] == "running")
        _write(manifest, _DROPPED.replace("  hold: {handler: drop_actors.hold, batch_size: 1}\n", ""))
        # the held call may finish once the old gateway is down: the restart asked the pollers to stop before it
        # stopped the gateway, so they take nothing more from the queue
        _wait_for(lambda: _gateway_down(dev.url), "the old mesh to stop")
        gate.touch()
        _wait_for(lambda: "restarted at" in dev.stderr(), "restart")
        waiting = [i for i in ids if i != held]
        _wait_for(lambda: all(_status(dev.url, i)["status"] == "failed" for i in waiting), "the waiting tasks to fail")
        for task_id in waiting:
            assert "actor 'hold' is no longer in the manifest" in _status(dev.url, task_id)["error"]
        [hold] = httpx.post(f"{dev.url}/api/v1/system/mq-diagnostic", json={"actors": ["hold"]}, timeout=10).json()[
            "queues"
        ]
        assert (hold["declared"], hold["exists"]) == (False, False)
        assert _run_task(dev.url, "loud", {"text": "on"})["result"] == {"said": "ON"}


def test_local_orphan_1_a_stopping_mesh_takes_no_new_message_while_its_gateway_drains(tmp_path: Path) -> None:
    """A restart begins with ``LocalMesh.stop()``. Its gateway stops first and lets requests under way run for up to
    3 s, so pollers that were still polling could take the next waiting message: an actor the new manifest drops
    would run it on the old manifest, and the sweeper (LOCAL-ORPHAN-1) would fail only what the pollers had left.
    Which one happened depended on the gateway's shutdown. Once ``stop()`` begins, the pollers take nothing new: the
    call under way finishes, and the two waiting envelopes stay in the queue for the next mesh."""
    import socket
    import threading

    from asya.manifest import load_manifest
    from asya_local.mesh import LocalMesh
    from asya_local.moto_server import MotoServer

    (tmp_path / "functions").mkdir()
    _write(tmp_path / "functions" / "stopping_actors.py", _HOLD)
    manifest_path = tmp_path / "asya.yaml"
    _write(manifest_path, _DROPPED.replace("drop", "stopping"))
    gate = tmp_path / "gate"
    with (
        MotoServer(host="127.0.0.1", port=0) as moto,
        LocalMesh(load_manifest(manifest_path), port=0, endpoint_url=moto.endpoint_url) as mesh,
    ):
        sqs, queue, hold = mesh.clients.sqs, mesh.resources.queue_urls["hold"], mesh.esms["hold"]
        ids = []
        for _ in range(3):
            created = httpx.post(
                f"{mesh.url}/api/v1/mesh/", params={"actor": "hold"}, json={"payload": {"gate": str(gate)}}, timeout=10
            )
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        _wait_for(lambda: sum(_status(mesh.url, i)["status"] == "running" for i in ids) == 1, "hold to take one task")
        held = next(i for i in ids if _status(mesh.url, i)["status"] == "running")
        host, port = mesh.url.removeprefix("http://").split(":")

        def depth() -> int:
            attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
            return int(attributes["Attributes"]["ApproximateNumberOfMessages"])

        # a request under way keeps the stopping gateway in its grace period: its body never comes
        with socket.create_connection((host, int(port))) as request:
            request.sendall(
                f"POST /api/v1/mesh/?actor=hold HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                "Content-Length: 64\r\nExpect: 100-continue\r\n\r\n".encode()
            )
            assert request.recv(64).startswith(b"HTTP/1.1 100 Continue"), "the gateway reads the body"
            stopper = threading.Thread(target=mesh.stop, name="stop-mesh")
            stopper.start()
            _wait_for(lambda: _gateway_down(f"http://{host}:{port}"), "the gateway to stop listening")
            gate.touch()  # the call under way finishes: its poller must not take another message
            _wait_for(lambda: not hold.running or depth() < 2, "hold's poller to stop or take another message")
        stopper.join()
        assert depth() == 2, "the stopping mesh took a waiting message"
        waiting = sorted(json.loads(m["Body"])["id"] for m in _received(sqs, queue))
        assert waiting == sorted(i for i in ids if i != held)


def _received(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages"):
        messages.extend(batch)
    return messages


_FLOW_MANIFEST = """\
namespace: flowloop
actors:
  shout: {handler: loop_actors.shout}
flows:
  loud: {source: flows/loud.py, timeout: 60}
"""
_FLOW_V1 = "def loud(state):\n    state = shout(state)\n    return state\n"
_FLOW_V2 = "def loud(state):\n    state = shout(state)\n    state['edited'] = True\n    return state\n"


def test_an_edited_flow_file_is_recompiled_and_served_and_a_broken_one_refused(tmp_path: Path, run_dev: Any) -> None:
    """A flow written as Python compiles when the manifest loads (docs/flows.md), so an edit of its file alone left
    the old program running, silently. ``asya dev`` watches the flow files with the manifest and says which one
    changed."""
    (tmp_path / "functions").mkdir()
    _write(tmp_path / "functions" / "loop_actors.py", _V1)
    (tmp_path / "flows").mkdir()
    flow = tmp_path / "flows" / "loud.py"
    _write(flow, _FLOW_V1)
    manifest = tmp_path / "asya.yaml"
    _write(manifest, _FLOW_MANIFEST)
    with run_dev(manifest, cwd=tmp_path, log=tmp_path / "dev.stderr") as dev:
        assert _run_task(dev.url, "loud", {"text": "hi"})["result"] == {"said": "HI", "version": 1}

        _write(flow, _FLOW_V2)
        _wait_for(lambda: "restarted at" in dev.stderr(), "the restart")
        assert f"asya dev: flows/loud.py changed (flow 'loud'): recompiling it with {manifest}" in dev.stderr()
        assert _run_task(dev.url, "loud", {"text": "hi"})["result"] == {"said": "HI", "version": 1, "edited": True}

        _write(flow, _FLOW_V2.replace("state = shout(state)", "state = whisper(state)"))
        _wait_for(lambda: "cannot be used; still serving the previous one" in dev.stderr(), "the refusal")
        assert "'whisper' is not an actor of the manifest" in dev.stderr()
        assert _run_task(dev.url, "loud", {"text": "ok"})["result"]["edited"] is True
