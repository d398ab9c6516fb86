"""The ``asya`` CLI against a running local mesh (in-process ``main(argv, env=...)``), and ``asya dev`` / ``asya demo``
as the processes users start (GW-CREATE-1/2/9, GW-TASK-1, GW-SSE-2, GW-OPS-1)."""

from __future__ import annotations

import io
import json
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from asya_local.cli import main
from asya_local.mesh import LocalMesh

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent.parent


def _run(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env=env, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_call_follows_the_task_and_prints_the_final_view(local_mesh: LocalMesh) -> None:
    payload = json.dumps({"text": "What a wonderful tool"})
    code, out, _ = _run(
        "call", "text-pipeline", "--payload", payload, "--timeout", "60", env={"ASYA_URL": local_mesh.url}
    )
    assert code == 0
    view = json.loads(out)
    assert view["status"] == "succeeded"
    assert view["result"]["sentiment"] == "positive"
    assert view["result"]["summary"].startswith("A positive text of 4 words")


def test_call_actor_no_wait_then_status_and_watch(local_mesh: LocalMesh) -> None:
    code, out, _ = _run(
        "call", "--actor", "normalize", "--payload", '{"text": "A  B"}', "--no-wait", "--url", local_mesh.url, env={}
    )
    assert code == 0
    task_id = out.strip()
    assert len(task_id) == 36

    code, out, _ = _run("watch", task_id, "--url", local_mesh.url, env={})
    assert code == 0
    blocks = [block for block in out.split("\n\n") if block.strip()]
    assert blocks[0].startswith("retry: 1000\nevent: status\ndata: ")  # GW-SSE-4 catch-up: no id line
    last = blocks[-1].splitlines()
    assert last[0].startswith("id: ")
    assert last[1] == "event: status"
    assert json.loads(last[2].removeprefix("data: "))["status"] == "succeeded"

    code, out, _ = _run("status", task_id, "--url", local_mesh.url, env={})
    assert code == 0
    assert out.startswith("{\n  ")  # pretty JSON
    view = json.loads(out)
    assert view["id"] == task_id
    assert view["actor"] == "normalize"
    assert view["flow"] is None
    assert view["result"] == {"text": "A  B", "normalized": "a b"}


def test_http_errors_print_the_error_message(local_mesh: LocalMesh) -> None:
    code, out, err = _run("call", "no-such-flow", "--url", local_mesh.url, env={})
    assert code == 2
    assert out == ""
    assert err == "asya: flow not found: no-such-flow\n"
    code, _, err = _run("status", "00000000-0000-4000-8000-000000000000", "--url", local_mesh.url, env={})
    assert code == 2
    assert err == "asya: not found\n"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [["status", "x"], ["watch", "x"], ["call", "text-pipeline"]])
def test_no_gateway_is_one_readable_line(command: list[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, out, err = _run(*command, env={"ASYA_URL": url})
    assert code == 2
    assert out == ""
    assert err == f"asya: no gateway at {url}: start one with `asya dev`\n"


def test_asya_dev_serves_until_interrupted(tmp_path: Path) -> None:
    log = tmp_path / "dev.stderr"
    with (
        log.open("w") as stderr,
        subprocess.Popen(
            [sys.executable, "-m", "asya_local", "dev", "--manifest", "asya.yaml", "--port", "0"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        ) as proc,
    ):
        watchdog = threading.Timer(120, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), log.read_text()
            assert httpx.get(f"{url}/health", timeout=5).json()["status"] == "ok"
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 0, log.read_text()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
    assert "press Ctrl-C to stop" in log.read_text()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health", timeout=5)


def test_asya_demo_runs_the_example_flow_to_its_checkpoint() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "asya_local", "demo", "--manifest", "asya.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "status: succeeded" in proc.stdout
    assert '"summary": "A positive text' in proc.stdout
    assert "checkpoint: s3://asya-demo-storage/succeeded/" in proc.stdout
    assert "verified in moto S3" in proc.stdout
