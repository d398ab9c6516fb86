"""The artifact mesh's relays (the API front and the signing client) close their keep-alive sockets when they stop.

Before, each relay's pooled connection to its upstream was left open at ``stop()`` and collected unclosed later, a
``ResourceWarning`` per socket (``make test`` had to ignore them in the artifact suite). With every warning an error
(pyproject's ``filterwarnings``), a socket collected unclosed fails this test.
"""

from __future__ import annotations

import gc
from typing import Any

import httpx
import pytest

from asya_local.artifact.apifront import SigningClient
from asya_local.serving import UvicornThread

pytestmark = pytest.mark.functional


async def _upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


def test_a_stopped_relay_leaves_no_socket_open() -> None:
    upstream = UvicornThread(_upstream, name="test-upstream")
    upstream.start()
    relay = UvicornThread(
        SigningClient(upstream.url, access_key_id="AKIDEXAMPLE", secret="secret", region="us-east-1"),
        name="test-relay",
    )
    relay.start()
    try:
        with httpx.Client(base_url=relay.url, timeout=10) as client:
            for path in ("/a", "/b"):  # the second request reuses the relay's keep-alive connection
                response = client.get(path)
                assert (response.status_code, response.text) == (200, path)
    finally:
        relay.stop()
        upstream.stop()
    del relay, upstream
    gc.collect()  # an unclosed socket warns here, which pyproject's filterwarnings turns into a failure
