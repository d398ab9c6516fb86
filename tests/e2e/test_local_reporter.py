"""The HTTP reporter (P-STAT-18) in the local mesh: the first actor, ``stream``, runs with ``ASYA_REPORTER=http`` and no
URL of its own, so it reports only to the gateway the envelope names, which the gateway stamps as
``x-asya-gateway-url`` from ``gateway.callback_url`` (GW-CREATE-7). Its FLY values reach the SSE stream through the
producer route, which records them with ``actor`` null and the task id as ``envelope_id`` (GW-EVT-4), while
``summarize`` (store reporter) writes its own with its name: that is how the test tells the two paths apart."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from asya.manifest import load_manifest
from asya_local.mesh import LocalMesh
from tests.e2e.conftest import Gateway

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


_STREAM = """
from typing import Any, Iterator


def stream(payload: dict[str, Any]) -> Iterator[Any]:
    yield "FLY", "one"
    yield "FLY", "two"
    yield {**payload, "normalized": payload["text"].lower()}
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def reporter_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    port = _free_port()
    tmp = tmp_path_factory.mktemp("reporter")
    (tmp / "reporting_actors.py").write_text(_STREAM, encoding="utf-8")
    manifest = tmp / "asya.yaml"
    code = REPO / "functions"
    manifest.write_text(
        f"""namespace: e2ereport
defaults: {{timeout: 10s}}
actors:
  stream:
    handler: reporting_actors.stream
    code: {tmp}
    env: {{ASYA_REPORTER: http}}
  analyze: {{handler: text.Analyzer.process, code: {code}}}
  summarize: {{handler: text.summarize, code: {code}}}
flows:
  text-pipeline: {{route: [stream, analyze, summarize], timeout: 60}}
gateway: {{callback_url: "http://127.0.0.1:{port}"}}
""",
        encoding="utf-8",
    )
    with LocalMesh(load_manifest(manifest), port=port) as mesh:
        yield Gateway(mesh.url)


def test_p_stat_18_an_actor_reports_through_the_gateway_the_envelope_names(reporter_gateway: Gateway) -> None:
    task_id = reporter_gateway.create(flow="text-pipeline", payload={"text": "Hello  World"})
    events = reporter_gateway.follow(task_id)
    fly = [e.json() for e in events if e.event == "fly"]
    posted = [f["payload"] for f in fly if (f["actor"], f["envelope_id"]) == (None, task_id)]
    assert posted == ["one", "two"]  # through the producer route, in order
    summary = "A positive text of 2 words starting with 'hello world'."
    written = [f["payload"] for f in fly if f["actor"] == "summarize"]
    assert "".join(written) == summary  # the store reporter's, for contrast
    statuses = [e.json() for e in events if e.event == "status"]
    assert statuses[-1]["status"] == "succeeded"
    view = reporter_gateway.get(task_id)
    assert (view["status"], view["progress_percent"]) == ("succeeded", 100)
    assert view["result"]["summary"] == summary
