"""The task commands of the CLI against a local mesh that records its run history, found the way a user's shell
finds it: through the state file of the running mesh in the working directory (GW-LIST-1/2, GW-CANCEL-1,
GW-CREATE-5, GW-TASK-1 ``checkpoint_*``, P-FAN-2, P-CKPT-3), the run history recorded in S3 and ``asya retry --from``
(P-HIST-1..6, GW-HIST-1/2), and what a dead moto does to ``/health`` and to ``asya dev``."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.cli import main
from asya_local.localstate import dev_state, state_path
from asya_local.mesh import LocalMesh
from tests.history import recorded_history

pytestmark = pytest.mark.e2e

TASKS_DIR = Path(__file__).resolve().parent / "tasks"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("project")


@pytest.fixture(scope="module")
def tasks_mesh(workdir: Path) -> Iterator[LocalMesh]:
    """The task-commands mesh with a run history, announced by a state file in ``workdir`` as ``asya dev`` does."""
    manifest = load_manifest(TASKS_DIR / "asya.yaml")
    with (
        LocalMesh(manifest, port=0, record_history=True) as mesh,
        dev_state(mesh, state_path(workdir / "asya.yaml")),
    ):
        yield mesh


def _run(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env=env or {}, stdout=out, stderr=err, cwd=cwd)
    return code, out.getvalue(), err.getvalue()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _create(mesh: LocalMesh, flow: str, payload: Any) -> str:
    response = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"flow": flow}, json={"payload": payload}, timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _create_at(mesh: LocalMesh, actor: str, payload: Any) -> str:
    """A task sent to one actor (``?actor=``), not a flow."""
    response = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"actor": actor}, json={"payload": payload}, timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _wait_status(mesh: LocalMesh, task_id: str, statuses: set[str], timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        view = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
        if view["status"] in statuses or time.monotonic() > deadline:
            assert view["status"] in statuses, view
            return dict(view)
        time.sleep(0.1)


def test_the_running_mesh_is_found_from_its_state_file_before_asya_url(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """Discovery order: the running ``asya dev``'s state file, then ``ASYA_URL``, then the default; ``--url`` wins."""
    task_id = _create(tasks_mesh, "fanned", {"parts": 1})
    dead = f"http://127.0.0.1:{_closed_port()}"
    code, out, err = _run("status", task_id, cwd=workdir, env={"ASYA_URL": dead})
    assert (code, err) == (0, "")
    assert json.loads(out)["id"] == task_id
    code, _, err = _run("status", task_id, "--url", dead, cwd=workdir)
    assert (code, err) == (2, f"asya: no gateway at {dead}: start one with `asya dev`\n")
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    code, _, err = _run("status", task_id, cwd=elsewhere, env={"ASYA_URL": dead})
    assert (code, err) == (2, f"asya: no gateway at {dead}: start one with `asya dev`\n")


def test_call_brief_prints_status_result_and_id(tasks_mesh: LocalMesh, workdir: Path) -> None:
    code, out, _ = _run("call", "napping", "--payload", '{"seconds": 0}', "--brief", cwd=workdir)
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == ["status: succeeded", 'result: {"seconds": 0, "rested": true}']
    assert lines[2].startswith("id: ") and len(lines) == 3


def test_call_without_view_leaves_out_the_repeated_status_data(tasks_mesh: LocalMesh, workdir: Path) -> None:
    code, out, _ = _run("call", "napping", "--payload", '{"seconds": 0}', cwd=workdir)
    assert code == 0
    short = json.loads(out)
    assert "data" not in short and None not in short.values()
    assert short["result"] == {"seconds": 0, "rested": True}
    code, out, _ = _run("call", "napping", "--payload", '{"seconds": 0}', "--view", cwd=workdir)
    assert code == 0
    assert json.loads(out)["data"]["status"] == "succeeded"


def test_call_brief_of_a_failed_task_prints_the_error(tasks_mesh: LocalMesh, workdir: Path) -> None:
    code, out, err = _run("call", "doomed", "--payload", '{"n": 1}', "--brief", cwd=workdir)
    assert code == 1
    assert out.splitlines()[:2] == ["status: failed", "error: boom on 1 (at explode)"]
    assert "failed  boom on 1 (at explode)" in err  # the progress line names the error too


def test_gw_task_9_call_and_watch_print_a_childs_retry_and_a_childs_failure_labelled_with_the_child(
    tasks_mesh: LocalMesh, workdir: Path
) -> None:
    """GW-TASK-9 (R3), issue 28 build item 3: ``asya call`` and ``asya watch`` show a fan-out child's retry and another
    child's failure, each labelled with the child, read from the task view's child tree (P-FAN-7). The task's own
    lineage waits at ``gate`` until the tree shows both (tests/e2e/tasks/asya.yaml, flow ``brood``)."""
    payload = json.dumps({"parts": 3, "view_url": tasks_mesh.url})
    code, out, err = _run("call", "brood", "--payload", payload, "--brief", cwd=workdir)
    assert code == 0, err
    task_id = out.splitlines()[-1].removeprefix("id: ")
    tree = _wait_status(tasks_mesh, task_id, {"succeeded"})["children"]
    children = {child["status"]: child["id"] for child in tree}
    assert set(children) == {"retrying", "failed"}, tree
    retried, failed = children["retrying"], children["failed"]
    retry_line = f"child {retried}: retrying attempt 2 at picky: ConnectionError: upstream blinked"
    failure_line = f"child {failed}: failed at picky: part 2 is malformed"
    assert retry_line in err.splitlines() and failure_line in err.splitlines(), err
    assert "children: 1 failed, 1 still running" in err.splitlines()

    code, out, _ = _run("watch", task_id, cwd=workdir)
    assert code == 0
    assert f": {retry_line}" in out.splitlines() and f": {failure_line}" in out.splitlines(), out


def test_list_filters_by_status_and_flow(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """GW-LIST-1/2: one line per task, newest first, with the error of a failed one."""
    failed = _create(tasks_mesh, "doomed", {"n": 2})
    _wait_status(tasks_mesh, failed, {"failed"})
    done = _create(tasks_mesh, "napping", {"seconds": 0})
    _wait_status(tasks_mesh, done, {"succeeded"})
    deadline = time.monotonic() + 60  # listing reads eventually consistent indexes (GW-LIST-4)
    while True:
        code, out, _ = _run("list", "--status", "failed", "--flow", "doomed", cwd=workdir)
        assert code == 0
        if failed in out or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    line = next(line for line in out.splitlines() if line.startswith(failed))
    assert line.split()[1:3] == ["failed", "doomed"]
    assert line.endswith("boom on 2")
    assert done not in out
    code, out, _ = _run("list", "--flow", "napping", "--limit", "1", "--json", cwd=workdir)
    assert code == 0
    page = json.loads(out)
    assert len(page["messages"]) == 1 and page["messages"][0]["flow"] == "napping"


def test_list_limit_out_of_range_is_a_usage_error(workdir: Path) -> None:
    code, _, err = _run("list", "--limit", "0", cwd=workdir)
    assert code == 2
    assert "argument --limit: must be 1..100, got '0'" in err


def test_cancel_a_running_task_then_a_terminal_one(tasks_mesh: LocalMesh, workdir: Path, gate: Path) -> None:
    """GW-CANCEL-1: a running task ends ``canceled``; a terminal one keeps its status (exit 1, said why)."""
    task_id = _create(tasks_mesh, "napping", {"seconds": 15, "gate": str(gate)})  # naps until the test ends
    _wait_status(tasks_mesh, task_id, {"running"})
    code, out, err = _run("cancel", task_id, cwd=workdir)
    assert (code, out, err) == (0, f"{task_id} canceled\n", "")
    code, out, err = _run("cancel", task_id, cwd=workdir)
    assert (code, out) == (1, f"{task_id} canceled\n")
    assert err == f"asya: task {task_id} had already ended canceled: nothing to cancel\n"


def test_p_cancel_1_cancel_reaches_a_running_generator_at_its_next_yield(tasks_mesh: LocalMesh, tmp_path: Path) -> None:
    """P-CANCEL-1..3 (R3): ``DELETE`` of a task whose generator handler is running; the handler gets
    ``TaskCanceledError`` at a yield within one read interval (5 s) and cleans up, long before its 15 s of work end,
    and the task stays ``canceled``."""
    marker = tmp_path / "drip.txt"
    task_id = _create(tasks_mesh, "dripping", {"marker": str(marker)})
    _wait_for(marker.exists)
    assert httpx.delete(f"{tasks_mesh.url}/api/v1/mesh/{task_id}", timeout=10).status_code == 204
    _wait_for(lambda: marker.read_text() in ("cleaned up", "ran to its end"))
    assert marker.read_text() == "cleaned up"
    view = httpx.get(f"{tasks_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    assert view["status"] == "canceled"


def _wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_cancel_an_unknown_task_is_the_gateways_404(tasks_mesh: LocalMesh, workdir: Path) -> None:
    task_id = "00000000-0000-4000-8000-000000000000"
    code, _, err = _run("cancel", task_id, cwd=workdir)
    assert (code, err) == (
        2,
        f"asya: task {task_id} not found at {tasks_mesh.url} (HTTP 404): check the id, or the mesh with --url\n",
    )


def test_status_of_an_unknown_task_says_the_task_was_not_found(tasks_mesh: LocalMesh, workdir: Path) -> None:
    code, _, err = _run("status", "nope", cwd=workdir)
    assert code == 2
    assert err.startswith("asya: task nope not found at ")


def test_call_without_a_payload_names_the_flag_to_give(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """A flow whose input_schema refuses null: the fix is ``--payload``, not the HTTP body's member."""
    code, _, err = _run("call", "schema-bound", cwd=workdir)
    assert code == 2
    assert err.startswith("asya: the task needs an input: give it with --payload JSON"), err


def test_list_suggests_the_next_page_with_the_same_filters(tasks_mesh: LocalMesh, workdir: Path) -> None:
    for _ in range(2):
        _wait_status(tasks_mesh, _create(tasks_mesh, "napping", {"seconds": 0}), {"succeeded"})
    code, _, err = _run("list", "--flow", "napping", "--limit", "1", cwd=workdir)
    assert code == 0
    more = next(line for line in err.splitlines() if "more:" in line)
    assert "asya list --flow napping --limit 1 --cursor " in more, more


def test_retry_runs_the_input_again_linked_by_a_non_reserved_header(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """GW-CREATE-5 reserves ``x-asya-*``: the retry carries ``retry_of: <id>``, which reaches the actors."""
    failed = _create(tasks_mesh, "doomed", {"n": 3})
    _wait_status(tasks_mesh, failed, {"failed"})
    code, out, err = _run("retry", failed, cwd=workdir)
    assert (code, err) == (0, "")
    retried = out.strip()
    assert retried != failed
    view = _wait_status(tasks_mesh, retried, {"failed"})
    assert (view["flow"], view["payload"]) == ("doomed", {"n": 3})
    history = recorded_history(tasks_mesh.url, retried)
    explode = next(step for step in history["steps"] if step["actor"] == "explode")
    assert explode["input"] == {"n": 3, "retry_of": failed}


def test_retry_refuses_a_task_that_is_still_running(tasks_mesh: LocalMesh, workdir: Path, gate: Path) -> None:
    task_id = _create(tasks_mesh, "napping", {"seconds": 15, "gate": str(gate)})  # naps until the test ends
    _wait_status(tasks_mesh, task_id, {"running", "pending"})
    code, out, err = _run("retry", task_id, cwd=workdir)
    assert (code, out) == (1, "")
    assert err.startswith(f"asya: task {task_id} is ")
    assert err.endswith(": retry a task once it has ended (or cancel it first)\n")


def test_checkpoint_prints_the_tasks_checkpoint_line(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """P-CKPT-3/4: the line the task names (the first when it names none) of the object at ``checkpoint_uri``,
    read from the running mesh's moto."""
    task_id = _create(tasks_mesh, "napping", {"seconds": 0})
    view = _wait_status(tasks_mesh, task_id, {"succeeded"})
    deadline = time.monotonic() + 60
    while "checkpoint_uri" not in view and time.monotonic() < deadline:
        time.sleep(0.1)
        view = httpx.get(f"{tasks_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    code, out, err = _run("checkpoint", task_id, cwd=workdir)
    assert (code, err) == (0, "")
    envelope = json.loads(out)
    assert envelope["payload"] == {"seconds": 0, "rested": True}
    code, out, _ = _run("checkpoint", task_id, "--raw", cwd=workdir)
    assert code == 0 and len(out.splitlines()) == 1
    assert json.loads(out) == envelope


def test_checkpoint_of_a_running_task_says_there_is_none_yet(tasks_mesh: LocalMesh, workdir: Path, gate: Path) -> None:
    task_id = _create(tasks_mesh, "napping", {"seconds": 15, "gate": str(gate)})  # naps until the test ends
    _wait_status(tasks_mesh, task_id, {"running", "pending"})
    code, out, err = _run("checkpoint", task_id, cwd=workdir)
    assert (code, out) == (1, "")
    assert err in (
        f"asya: task {task_id} (running) has no checkpoint yet\n",
        f"asya: task {task_id} (pending) has no checkpoint yet\n",
    )


def test_p_fan_9_checkpoint_of_a_fan_out_parent_lists_its_childrens_lines(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """Issue 28: the parent's own line, then each child's under a ``# child`` line, read from the child tree."""
    task_id = _create(tasks_mesh, "fanned", {"parts": 3})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    view: dict[str, Any] = {}

    def children_checkpointed() -> bool:
        view.update(httpx.get(f"{tasks_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json())
        nodes = view.get("children") or []
        return "checkpoint_uri" in view and len(nodes) == 2 and all("checkpoint_uri" in c for c in nodes)

    _wait_for(children_checkpointed, timeout=60)  # children may finish after their task (P-FAN-6)
    assert {(c["status"], c["current_actor"]) for c in view["children"]} == {("succeeded", "echo")}
    code, out, err = _run("checkpoint", task_id, "--raw", cwd=workdir)
    assert (code, err) == (0, "")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["id"] for line in lines] == [task_id, *(c["id"] for c in view["children"])]
    assert all(line["parent_id"] == task_id for line in lines[1:])
    code, out, _ = _run("checkpoint", task_id, cwd=workdir)
    assert code == 0
    for child in view["children"]:
        assert f"# child {child['id']} (succeeded) at echo\n" in out


def test_history_of_a_fan_out_task_links_children_to_their_parent(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """P-FAN-2: the first frame keeps the task id, the others are children with ``parent_id`` = the task id; the
    history lists every step under the task's id, and the fan-out step's outputs are the envelopes it sent."""
    task_id = _create(tasks_mesh, "fanned", {"parts": 3})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    # the children run on after the task's own chain has ended it (P-FAN-6)
    recorded_history(tasks_mesh.url, task_id, until=lambda steps: [s["actor"] for s in steps].count("echo") == 3)
    code, out, err = _run("history", task_id, "--json", cwd=workdir)
    assert (code, err) == (0, "")
    history = json.loads(out)
    assert history["id"] == task_id and history["truncated"] is False
    fan = next(step for step in history["steps"] if step["actor"] == "fan")
    assert (fan["envelope_id"], fan["attempt"], fan["input"], fan["error"]) == (task_id, 1, {"parts": 3}, None)
    assert fan["duration_ms"] >= 0 and fan["message_id"]
    sent = {output["envelope_id"]: output for output in fan["outputs"]}
    assert len(sent) == 3 and task_id in sent, json.dumps(history, indent=1)
    assert sorted(output["payload"]["part"] for output in sent.values()) == [0, 1, 2]
    assert {output["actor"] for output in sent.values()} == {"echo"}
    echoes = [step for step in history["steps"] if step["actor"] == "echo"]
    assert {step["envelope_id"] for step in echoes} == set(sent)
    children = [step for step in echoes if step["envelope_id"] != task_id]
    assert len(children) == 2 and all(step["parent_id"] == task_id for step in children)
    assert all(step["outputs"][0]["actor"] == "x-sink" for step in echoes)
    code, out, _ = _run("history", task_id, cwd=workdir)
    assert code == 0
    lines = out.splitlines()
    assert any(" fan  attempt 1 " in line and f"envelope {task_id}" in line for line in lines)
    assert '  out: -> echo  {"part": 0}' in lines
    indented = [line for line in lines if line.startswith("  ") and " echo  attempt 1 " in line]
    assert len(indented) == 2  # the children's steps sit under the fan-out step that sent them


def test_history_records_the_error_of_a_failed_step(tasks_mesh: LocalMesh, workdir: Path) -> None:
    task_id = _create(tasks_mesh, "doomed", {"n": 4})
    _wait_status(tasks_mesh, task_id, {"failed"})
    history = recorded_history(tasks_mesh.url, task_id)
    explode = next(step for step in history["steps"] if step["actor"] == "explode")
    assert explode["error"] == "RuntimeError: boom on 4"
    assert explode["outputs"][0]["actor"] == "x-sink"


def test_history_of_an_unknown_task_is_404(tasks_mesh: LocalMesh, workdir: Path) -> None:
    code, _, err = _run("history", "nope", cwd=workdir)
    assert (code, err) == (
        2,
        f"asya: task nope not found at {tasks_mesh.url} (HTTP 404): check the id, or the mesh with --url\n",
    )


def test_a_static_route_task_of_a_mesh_that_records_every_task_has_a_history(tasks_mesh: LocalMesh) -> None:
    """P-HIST-10: the local mesh records every task, not only flows with ``history: steps``: an ``?actor=`` task's
    history answers from S3 through the gateway's own route, as a flow's does in AWS."""
    task_id = _create_at(tasks_mesh, "echo", {"part": 7})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    steps = recorded_history(tasks_mesh.url, task_id)["steps"]
    assert [(step["actor"], step["input"]) for step in steps] == [("echo", {"part": 7})]


def test_a_mesh_that_records_no_history_answers_404_naming_the_setting(local_mesh: LocalMesh) -> None:
    """Without ``record_history`` (a deployed gateway's default), a static-route task has no history: the route
    answers 404 and says which setting records one."""
    task_id = _create_at(local_mesh, "normalize", {"text": "x"})
    _wait_status(local_mesh, task_id, {"succeeded", "failed"})
    response = httpx.get(f"{local_mesh.url}/api/v1/mesh/{task_id}/history", timeout=10)
    assert response.status_code == 404
    assert "history: steps" in response.json()["error"]


def test_health_answers_503_once_moto_is_gone(example_manifest: Any) -> None:
    """Issue 18 defect 8: the local ``/health`` checks moto's process, which holds the whole local state."""
    with LocalMesh(example_manifest, port=0, backstop_interval=None) as mesh:
        assert httpx.get(f"{mesh.url}/health", timeout=5).json()["status"] == "ok"
        pid = mesh.moto_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while mesh.moto_problem() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        response = httpx.get(f"{mesh.url}/health", timeout=5)
        assert response.status_code == 503
        assert response.json()["status"] == "unavailable"
        assert response.json()["error"] == (
            f"moto server (pid {pid}) exited with code -9: the local queues, tables and objects are gone"
        )


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_asya_dev_exits_with_a_clear_message_when_moto_dies(tmp_path: Path, run_dev: Any) -> None:
    with run_dev(TASKS_DIR / "asya.yaml", cwd=tmp_path, log=tmp_path / "dev.stderr") as dev:
        (moto_pid,) = _children(dev.proc.pid)
        os.kill(moto_pid, signal.SIGKILL)
        assert dev.proc.wait(timeout=30) == 2, dev.stderr()
    assert (
        f"asya: moto server (pid {moto_pid}) exited with code -9: the local queues, tables and objects are gone; "
        "asya dev stops (start it again for a fresh mesh)\n"
    ) in dev.stderr()
    assert not state_path(TASKS_DIR / "asya.yaml").exists()


def test_checkpoint_that_cannot_be_read_names_the_object_and_the_error(tasks_mesh: LocalMesh, workdir: Path) -> None:
    task_id = _create(tasks_mesh, "napping", {"seconds": 0})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    deadline = time.monotonic() + 60
    view = httpx.get(f"{tasks_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    while "checkpoint_uri" not in view and time.monotonic() < deadline:
        time.sleep(0.1)
        view = httpx.get(f"{tasks_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    bucket, key = view["checkpoint_uri"].removeprefix("s3://").split("/", 1)
    tasks_mesh.clients.s3.delete_object(Bucket=bucket, Key=key)
    code, out, err = _run("checkpoint", task_id, cwd=workdir)
    assert (code, out) == (2, "")
    assert err == f"asya: cannot read checkpoint {view['checkpoint_uri']}: NoSuchKey\n"


def test_the_test_client_wants_exactly_one_of_flow_and_actor(tasks_mesh: LocalMesh) -> None:
    from asya_local.client import GatewayClient
    from asya_local.testing import MeshClient

    with GatewayClient(tasks_mesh.url) as client:
        mesh = MeshClient(tasks_mesh, client)
        with pytest.raises(ValueError) as caught:
            mesh.call("napping", {}, actor="nap")
        assert str(caught.value) == "give exactly one of flow and actor, got flow='napping', actor='nap'"
        assert mesh.call(None, {"seconds": 0}, actor="nap")["result"] == {"seconds": 0, "rested": True}


# -- the run history recorded in S3 (R3: P-HIST-1..6, GW-HIST-1, GW-HIST-2): the same path as in AWS (the actors'
# one object per invocation, the hop claim's chain head, the gateway's walk); the ``recorded`` flow has it on


def _history(mesh: LocalMesh, task_id: str, *, steps: int, timeout: float = 60) -> dict[str, Any]:
    """The served history once it holds ``steps`` steps: the children and the last invocation's PUT may land after
    the task's own chain ended it (P-FAN-6, P-HIST-2)."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}/history", timeout=10)
        history = response.json()
        if (response.status_code == 200 and len(history["steps"]) >= steps) or time.monotonic() > deadline:
            assert response.status_code == 200 and len(history["steps"]) == steps, json.dumps(history, indent=1)
            return dict(history)
        time.sleep(0.1)


def test_p_hist_every_hop_is_recorded_with_children_linked_gw_hist_1(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """P-HIST-2/3/5: tag, echo, fan, echo on the task's envelope and the child's echo; the chain is walked from the
    task item's head without a listing; the fan-out step lists both envelopes it sent."""
    task_id = _create(tasks_mesh, "recorded", {"parts": 2})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    history = _history(tasks_mesh, task_id, steps=5)
    assert history["truncated"] is False and history["missing_objects"] == 0
    own = [step for step in history["steps"] if step["envelope_id"] == task_id]
    assert [(step["hop"], step["actor"]) for step in own] == [(0, "tag"), (1, "echo"), (2, "fan"), (3, "echo")]
    assert own[0]["input"] == {"parts": 2} and own[0]["outputs"][0]["payload"] == {"parts": 2, "retry_of": None}
    assert all(step["attempt"] == 1 and step["error"] is None and step["duration_ms"] >= 0 for step in own)
    (child,) = [step for step in history["steps"] if step["envelope_id"] != task_id]
    assert (child["actor"], child["parent_id"], child["input"]) == ("echo", task_id, {"part": 1})
    assert {o["envelope_id"] for o in own[2]["outputs"]} == {task_id, child["envelope_id"]}
    assert own[3]["outputs"][0]["actor"] == "x-sink"
    code, out, err = _run("history", task_id, cwd=workdir)
    assert (code, err) == (0, "")
    assert any(" hop 2  fan  attempt 1 " in line for line in out.splitlines()), out


def test_p_hist_a_body_over_the_cut_size_is_recorded_as_its_size(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """P-HIST-2: bodies over ``history_body_bytes`` (256 here) are cut; a retry from that step is refused with the
    reason, since no whole copy was stored (GW-HIST-2)."""
    task_id = _create(tasks_mesh, "recorded", {"parts": 1, "text": "x" * 400})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    history = _history(tasks_mesh, task_id, steps=4)
    tag = history["steps"][0]
    assert tag["actor"] == "tag" and tag["input"] == {"__truncated__": f"{tag['input_bytes']} bytes"}
    assert tag["input_bytes"] > 400 and tag["input_ref"] is None
    code, out, err = _run("retry", task_id, "--from", "tag", cwd=workdir)
    assert (code, out) == (2, "")
    assert "was cut at the flow's history_body_bytes" in err


def test_retry_from_a_middle_step_reruns_from_there_linked_by_retry_of(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """P-HIST-6: ``--from 2`` (fan's hop) starts the new task at fan with the input fan received; tag and the first
    echo do not run again; the new task's envelopes carry ``retry_of``."""
    task_id = _create(tasks_mesh, "recorded", {"parts": 1})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    before = _history(tasks_mesh, task_id, steps=4)
    code, out, err = _run("retry", task_id, "--from", "2", cwd=workdir)
    assert (code, err) == (0, "")
    retried = out.strip()
    view = _wait_status(tasks_mesh, retried, {"succeeded"})
    assert view["result"] == {"part": 0, "echoed": True}
    after = _history(tasks_mesh, retried, steps=2)
    assert [(step["hop"], step["actor"]) for step in after["steps"]] == [(2, "fan"), (3, "echo")]
    assert after["steps"][0]["input"] == before["steps"][2]["input"] == {"parts": 1, "retry_of": None, "echoed": True}
    assert after["steps"][0]["headers"]["retry_of"] == task_id


def test_retry_from_an_ambiguous_or_unknown_step_names_the_choices(tasks_mesh: LocalMesh, workdir: Path) -> None:
    """P-HIST-6: echo ran twice on the task's envelope: a bare ``echo`` is refused with ``echo#1, echo#2``."""
    task_id = _create(tasks_mesh, "recorded", {"parts": 1})
    _wait_status(tasks_mesh, task_id, {"succeeded"})
    _history(tasks_mesh, task_id, steps=4)
    code, _, err = _run("retry", task_id, "--from", "echo", cwd=workdir)
    assert code == 2 and "'echo' ran 2 times" in err and "(echo#1, echo#2)" in err, err
    code, _, err = _run("retry", task_id, "--from", "9", cwd=workdir)
    assert code == 2 and "has no recorded hop 9 (hops: 0, 1, 2, 3)" in err, err
    code, out, err = _run("retry", task_id, "--from", "echo#2", cwd=workdir)
    assert (code, err) == (0, "")
    _wait_status(tasks_mesh, out.strip(), {"succeeded"})


def test_history_route_of_a_flow_without_history_is_404(local_mesh: LocalMesh) -> None:
    """GW-HIST-1: on a mesh that does not record every task (P-HIST-10), a task of a flow that records nothing answers
    404 with the setting to change."""
    task_id = _create(local_mesh, "text-pipeline", {"text": "hello there"})
    _wait_status(local_mesh, task_id, {"succeeded"})
    response = httpx.get(f"{local_mesh.url}/api/v1/mesh/{task_id}/history", timeout=10)
    assert response.status_code == 404 and "history: steps" in response.json()["error"]
