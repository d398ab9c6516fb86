"""The ``asya`` CLI against a running local mesh (in-process ``main(argv, env=...)``), and ``asya dev`` / ``asya demo``
as the processes users start (GW-CREATE-1/2/9, GW-TASK-1, GW-SSE-2, GW-OPS-1, GW-AUTH-4)."""

from __future__ import annotations

import io
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.manifest import parse_manifest
from asya_local.cli import main
from asya_local.mesh import LocalMesh

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent.parent


def _run(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    """The CLI in-process, looking for a running ``asya dev`` in this directory (none runs here)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env=env, stdout=out, stderr=err, cwd=Path(__file__).resolve().parent)
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


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_call_on_a_terminal_draws_the_progress_bar_from_the_sse_stream(local_mesh: LocalMesh) -> None:
    """On a TTY, ``call`` redraws one progress line per SSE event (GW-TASK-2 ``progress_percent``, FLY text) on
    stderr, ends it with the terminal status, and prints only the final task view on stdout."""
    out, err = io.StringIO(), _Terminal()
    payload = json.dumps({"text": "Hello World"})
    code = main(
        ["call", "text-pipeline", "--payload", payload, "--url", local_mesh.url], env={}, stdout=out, stderr=err
    )
    assert code == 0
    assert json.loads(out.getvalue())["status"] == "succeeded"
    frames = err.getvalue().split("\r\x1b[K")
    assert frames[0] == ""
    # status changes closer together than the gateway's 250 ms poll coalesce (GW-SSE-3), so which running states a
    # client sees varies; the FLY text always streams onto the bar before the terminal line
    assert any("  processing  | " in frame or "  pending  | " in frame for frame in frames[1:-1])
    assert frames[-1] == (
        "[########################] 100.0%  succeeded\n"
        "partial output: A positive text of 2 words starting with 'hello world'.\n"
    )


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
    if len(blocks) > 1:  # followed live: the stream ends with the final status event, with its id (GW-SSE-7)
        assert last[0].startswith("id: ")
        last = last[1:]
    # else the task had ended before `watch` connected: the catch-up alone, then the stream closed (GW-SSE-6)
    assert last[-2] == "event: status"
    assert json.loads(last[-1].removeprefix("data: "))["status"] == "succeeded"

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
    assert err == (
        "asya: flow not found: no-such-flow (flows: documents, reviewed-text, sentences, text-pipeline, triage) "
        f"(HTTP 404 from {local_mesh.url}/api/v1/mesh/)\n"
    )
    task_id = "00000000-0000-4000-8000-000000000000"
    code, _, err = _run("status", task_id, "--url", local_mesh.url, env={})
    assert code == 2
    assert (
        err == f"asya: task {task_id} not found at {local_mesh.url} (HTTP 404): check the id, or the mesh with --url\n"
    )


def test_gw_auth_4_cli_sends_the_asya_api_key() -> None:
    """Against an ``api_key`` gateway the CLI is refused without ``ASYA_API_KEY`` (401, the gateway's message) and
    calls, follows the SSE stream and reads the task with it."""
    manifest = parse_manifest(
        {
            "namespace": "keyed",
            "actors": {"normalize": {"handler": "text.normalize", "code": str(REPO / "functions")}},
            "flows": {"tidy": {"route": ["normalize"]}},
            "gateway": {"auth": {"mode": "api_key", "api_key_secret": "unused-locally"}},
        },
        base_dir=REPO,
    )
    with LocalMesh(manifest, port=0, gateway_env={"ASYA_API_KEYS": "k-1,k-2"}) as mesh:
        code, out, err = _run("call", "tidy", "--payload", '{"text": "A  B"}', env={"ASYA_URL": mesh.url})
        assert (code, out, err) == (2, "", "asya: authentication required\n")
        env = {"ASYA_URL": mesh.url, "ASYA_API_KEY": "k-2"}
        code, out, err = _run("call", "tidy", "--payload", '{"text": "A  B"}', env=env)
        assert code == 0, err
        view = json.loads(out)
        assert view["result"] == {"text": "A  B", "normalized": "a b"}
        code, out, _ = _run("watch", view["id"], env=env)
        assert code == 0
        assert '"status":"succeeded"' in out
        code, _, err = _run("status", view["id"], env={**env, "ASYA_API_KEY": "wrong"})
        assert (code, err) == (2, "asya: invalid credentials\n")


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


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["call", "x", "--url", "notaurl"], {}, "argument --url: 'notaurl' is not an http(s) URL with a host"),
        (["status", "x"], {"ASYA_URL": "localhost:8080"}, "ASYA_URL: 'localhost:8080' is not an http(s) URL"),
        (["dev", "--port", "99999"], {}, "argument --port: '99999' is not a port: use 0..65535"),
        (["demo", "--port", "-1"], {}, "argument --port: '-1' is not a port"),
        (["dlq", "list", "--endpoint-url", "nowhere"], {}, "argument --endpoint-url: 'nowhere' is not an http(s) URL"),
    ],
)
def test_bad_urls_and_ports_are_usage_errors(argv: list[str], env: dict[str, str], message: str) -> None:
    code, out, err = _run(*argv, env=env)
    assert code == 2
    assert out == ""
    assert message in err and "Traceback" not in err


def test_asya_dev_refuses_a_missing_code_directory_before_starting(tmp_path: Path) -> None:
    manifest = tmp_path / "asya.yaml"
    manifest.write_text(
        "namespace: demo\nactors:\n  prep:\n    handler: text.normalize\n    code: nope/\n", encoding="utf-8"
    )
    code, out, err = _run("dev", "--manifest", str(manifest), "--port", "0", env={})
    assert code == 2
    assert out == ""
    assert err.startswith(
        f"asya: {manifest}: 1 problem, nothing started:\n  actors.prep.code: directory {(tmp_path / 'nope').resolve()} "
        "does not exist"
    ), err


def test_dlq_endpoint_from_the_environment_is_checked() -> None:
    code, _, err = _run("dlq", "list", "--manifest", str(REPO / "asya.yaml"), env={"AWS_ENDPOINT_URL": "nowhere"})
    assert code == 2
    assert err.startswith("asya: AWS_ENDPOINT_URL: 'nowhere' is not an http(s) URL")


@pytest.mark.parametrize("command", [["status", "x"], ["watch", "x"], ["call", "text-pipeline"]])
def test_a_server_that_does_not_speak_http_is_one_readable_line(command: list[str]) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        stop = threading.Event()

        def hang_up() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except OSError:
                    continue
                conn.close()

        worker = threading.Thread(target=hang_up, daemon=True)
        worker.start()
        try:
            code, out, err = _run(*command, env={"ASYA_URL": url})
        finally:
            stop.set()
            worker.join(5)
    assert code == 2
    assert out == "" and "Traceback" not in err
    assert err.startswith("asya: ") and url in err, err


def test_asya_dev_serves_until_interrupted_and_logs_each_request_with_its_id(tmp_path: Path, run_dev: Any) -> None:
    """GW-GEN-4 locally: the gateway's JSON access line of every request, with the id its answer carried in
    ``X-Request-Id``, goes to ``asya dev``'s stderr (stdout stays the URL line and the actors' logs)."""
    # a copy of the example project: a running asya dev announces itself next to its manifest, where the CLI of
    # tests running meanwhile (from the repository root) would find it before their ASYA_URL
    shutil.copytree(REPO / "functions", tmp_path / "functions")
    shutil.copytree(REPO / "flows", tmp_path / "flows")  # the example's flow written as Python (flows/triage.py)
    shutil.copy(REPO / "asya.yaml", tmp_path / "asya.yaml")
    with run_dev("asya.yaml", cwd=tmp_path, log=tmp_path / "dev.stderr") as dev:
        health = httpx.get(f"{dev.url}/health", timeout=5)
        assert health.json()["status"] == "ok"
        missing = httpx.get(f"{dev.url}/api/v1/mesh/no-such-task", timeout=5)
        assert missing.status_code == 404
        dev.proc.send_signal(signal.SIGINT)
        assert dev.proc.wait(timeout=60) == 0, dev.stderr()
    assert "press Ctrl-C to stop" in dev.stderr()
    lines = [json.loads(line) for line in dev.stderr().splitlines() if line.startswith("{")]
    access = {line.get("request_id"): line for line in lines if line["logger"] == "asya_gateway.access"}
    for response, path in ((health, "/health"), (missing, "/api/v1/mesh/no-such-task")):
        line = access[response.headers["x-request-id"]]
        assert (line["method"], line["path"], line["status"]) == ("GET", path, response.status_code)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{dev.url}/health", timeout=5)


def test_asya_dev_on_a_busy_port_is_one_readable_line() -> None:
    """``asya dev`` serves on exactly ``--port`` (unlike the demo): a busy port is an error naming it, exit 2."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "asya_local", "dev", "--port", str(port)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == (
        f"asya: cannot serve the gateway on 127.0.0.1:{port}: Address already in use "
        "(pick another port; 0 picks a free one)"
    )


_ELSEWHERE_MANIFEST = """\
namespace: elsewhere
actors:
  shout:
    handler: shouting.shout
flows:
  loud:
    route: [shout]
"""
_ELSEWHERE_ACTOR = """\
def shout(payload):
    return {**payload, "shouted": payload["text"].upper()}
"""


def test_asya_dev_with_a_manifest_elsewhere_loads_code_relative_to_it(tmp_path: Path, run_dev: Any) -> None:
    """``asya dev --manifest /elsewhere/asya.yaml`` from another directory: actor ``code`` (default ``functions/``) is
    relative to the manifest's directory; ``asya call``/``status`` reach it through ``ASYA_URL``; SIGTERM stops it."""
    mesh_dir = tmp_path / "elsewhere"
    (mesh_dir / "functions").mkdir(parents=True)
    (mesh_dir / "asya.yaml").write_text(_ELSEWHERE_MANIFEST, encoding="utf-8")
    (mesh_dir / "functions" / "shouting.py").write_text(_ELSEWHERE_ACTOR, encoding="utf-8")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    with run_dev(mesh_dir / "asya.yaml", cwd=cwd, log=tmp_path / "dev.stderr") as dev:
        code, out, err = _run("call", "loud", "--payload", '{"text": "hi there"}', env={"ASYA_URL": dev.url})
        assert code == 0, err
        view = json.loads(out)
        assert view["status"] == "succeeded"
        assert view["result"] == {"text": "hi there", "shouted": "HI THERE"}
        code, out, _ = _run("status", view["id"], env={"ASYA_URL": dev.url})
        assert code == 0
        assert json.loads(out)["checkpoint_key"].startswith("succeeded/")
        dev.proc.send_signal(signal.SIGTERM)  # stops as cleanly as Ctrl-C
        assert dev.proc.wait(timeout=60) == 0, dev.stderr()
        logs = dev.proc.stdout.read()  # unlike the demo, dev keeps the actors' JSON log lines
        assert '"service":"asya-elsewhere-x-sink"' in logs
    assert f"mesh 'elsewhere' is up at {dev.url}" in dev.stderr()
    assert f"(web console: {dev.url}/console/)" in dev.stderr()  # issue 21
    assert "asya dev: stopping" in dev.stderr()


def test_asya_demo_runs_the_example_flow_to_its_checkpoint() -> None:
    """``asya demo`` piped: progress lines on stderr (one per change, then the partial output), the result and the
    checkpoint on stdout, no actor JSON log lines; a busy ``--port`` falls back to a free one and says so."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "asya_local", "demo", "--manifest", "asya.yaml", "--port", str(port)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    assert "status: succeeded" in proc.stdout
    assert '"summary": "A positive text' in proc.stdout
    assert re.search(r"checkpoint: s3://asya-demo-storage/succeeded/\S+\.jsonl line 1 \(", proc.stdout)
    assert "verified in moto S3" in proc.stdout
    assert '"level"' not in proc.stdout + proc.stderr  # the actors' INFO JSON lines are quieted in the demo
    assert f"port {port} is in use; serving on a free port instead" in proc.stderr
    lines = proc.stderr.splitlines()
    bars = [line for line in lines if line.startswith("[")]
    # Every bar is a whole state of the task; the first is the SSE snapshot taken when the CLI connects, so the task
    # may be past pending by then (a half-applied update, "0.0%  normalize", would be moto's torn read, not a state).
    states = (
        "0.0%  pending",
        "16.7%  normalize  processing",
        "50.0%  analyze  processing",
        "83.3%  summarize  processing",
        "100.0%  succeeded",
    )
    assert all(bar.endswith(states) for bar in bars), bars
    percents = [float(line.split("]")[1].split("%")[0]) for line in bars]
    assert percents == sorted(percents), bars
    # hops closer together than the gateway's 250 ms poll coalesce (GW-SSE-3): which running bars show varies
    assert len(bars) >= 2
    assert bars[-1].endswith("100.0%  succeeded")
    assert "A positive text of 26 words starting with 'hello world! asya'." in lines


def test_asya_dev_refuses_a_handler_that_does_not_load_before_starting(tmp_path: Path) -> None:
    """Issue 20 point 5: a handler path that does not exist stops ``asya dev`` before moto or the gateway start,
    with every problem in one message (exit 2, nothing on stdout)."""
    (tmp_path / "functions").mkdir()
    (tmp_path / "functions" / "shop_actors.py").write_text("def ok(payload):\n    return payload\n")
    manifest = tmp_path / "asya.yaml"
    manifest.write_text(
        "namespace: shop\nactors:\n  ok: {handler: shop_actors.ok}\n  typo: {handler: shop_actors.nope}\n"
        "  gone: {handler: missing_mod.run}\n",
        encoding="utf-8",
    )
    code, out, err = _run("dev", "--manifest", str(manifest), "--port", "0", env={})
    assert (code, out) == (2, "")
    assert err == (
        f"asya: {manifest}: 2 problems, nothing started:\n"
        "  actors.typo.handler: handler 'shop_actors.nope': shop_actors has no attribute 'nope'\n"
        "  actors.gone.handler: handler 'missing_mod.run': no module could be imported; tried missing_mod "
        "(No module named 'missing_mod')\n"
    )
    assert not (tmp_path / ".asya").exists()
