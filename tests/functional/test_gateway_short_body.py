"""A body shorter than its ``Content-Length`` is answered 400 after a bounded wait, and logged (GW-GEN-5 (R3);
issue 25, defect 8). Before, the request stayed open, unanswered and unlogged, until the client gave up."""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app

pytestmark = pytest.mark.functional


def _read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it has sent a whole response (headers and Content-Length body) or closes."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            lines = head.split(b"\r\n")
            lengths = [line.split(b":", 1)[1] for line in lines if line.lower().startswith(b"content-length:")]
            if lengths and len(body) >= int(lengths[0]):
                return data


def test_gw_gen_5_r3_a_short_body_is_answered_400_after_the_read_timeout_and_logged(
    mesh: Any, serve_asgi: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = TaskStore(table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb)
    config = GatewayConfig(body_read_timeout=0.3)
    app = create_app(config, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs)
    url = urlsplit(serve_asgi(app))
    caplog.set_level(logging.DEBUG, logger="asya_gateway")
    caplog.clear()
    with socket.create_connection((url.hostname, url.port), timeout=60) as sock:
        sock.sendall(
            b"POST /api/v1/mesh/?actor=analyze HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"payload": "'
        )
        answer = _read_answer(sock)  # waits for the server: the client keeps the connection open
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), head
    error = json.loads(body)["error"]
    assert error.startswith("request body incomplete: 13 of 100 bytes"), error
    deadline = time.monotonic() + 10
    while not [r for r in caplog.records if r.name == "asya_gateway.body"] and time.monotonic() < deadline:
        time.sleep(0.02)
    [line] = [r for r in caplog.records if r.name == "asya_gateway.body"]
    assert line.levelno == logging.WARNING and "13 of 100 bytes" in line.getMessage()
    assert store.list_tasks()["messages"] == []


def test_gw_gen_5_r3_the_body_read_timeout_is_configurable() -> None:
    assert GatewayConfig.from_env({}).body_read_timeout == 5.0
    assert GatewayConfig.from_env({"ASYA_BODY_READ_TIMEOUT": "2.5"}).body_read_timeout == 2.5
