"""A client that goes away mid-body is the client's doing (issue 18 defect 6, GW-GEN-4): one INFO access line with
status 499 (nginx's "client closed request"), no traceback, no ERROR, and no task created."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app

pytestmark = pytest.mark.functional


def _access_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "asya_gateway.access"]


def test_client_disconnect_mid_body_logs_499_at_info_gw_gen_4(
    mesh: Any, serve_asgi: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = TaskStore(table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb)
    app = create_app(GatewayConfig(), manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs)
    url = urlsplit(serve_asgi(app))
    caplog.set_level(logging.DEBUG, logger="asya_gateway")
    caplog.clear()  # the start-up warning of the local iam mode is not this test's
    with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
        sock.sendall(
            b"POST /api/v1/mesh/?actor=analyze HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100000\r\n\r\n{"payload": "'
        )
        time.sleep(0.2)  # the app is reading the body when the client leaves
    deadline = time.monotonic() + 30
    while not _access_lines(caplog) and time.monotonic() < deadline:
        time.sleep(0.02)
    [line] = _access_lines(caplog)
    assert (line.levelno, line.getMessage(), line.__dict__["status"]) == (
        logging.INFO,
        "POST /api/v1/mesh/ 499",
        499,
    )
    assert line.exc_info is None
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert store.list_tasks()["messages"] == []
