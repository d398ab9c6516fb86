"""``asya_local.serving.UvicornThread``: the in-process HTTP server of the local gateway and the artifact mesh's API.

Every connection ends with ``stop()``: a socket left open would be collected later, unclosed, inside whatever test
runs then (pyproject's ``filterwarnings = error`` makes that test fail), which is how a CI run failed once.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

import pytest

from asya_local.exceptions import LocalModeError
from asya_local.serving import UvicornThread

pytestmark = pytest.mark.functional


async def _endless_stream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
    await asyncio.Event().wait()  # a stream that never ends on its own: stop() must cut it


def _read_until_eof(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks)


def test_stop_cuts_an_open_stream_and_leaves_no_connection_behind() -> None:
    server = UvicornThread(_endless_stream, name="test-serving", grace_seconds=0)
    server.start()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as client:
        client.sendall(b"GET /events HTTP/1.1\r\nHost: test\r\n\r\n")
        first = client.recv(4096)
        while b"data: first" not in first:
            first += client.recv(4096)
        server.stop()
        rest = _read_until_eof(client)  # returns only when the server closed the connection
    assert b"200 OK" in first
    assert b"data: first" not in rest
    assert not server.is_alive()
    del server
    gc.collect()  # a transport left open warns here (ResourceWarning), which filterwarnings makes a failure


def test_a_busy_port_is_named_in_the_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with pytest.raises(LocalModeError) as caught:
            UvicornThread(_endless_stream, port=busy, label="the gateway")
        assert str(caught.value) == (
            f"cannot serve the gateway on 127.0.0.1:{busy}: Address already in use "
            "(pick another port; 0 picks a free one)"
        )
        fallback = UvicornThread(_endless_stream, port=busy, fallback=True)
        try:
            assert fallback.port_was_busy
            assert fallback.port != busy
        finally:
            fallback.stop()
