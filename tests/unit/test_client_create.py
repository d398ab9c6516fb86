"""``GatewayClient.create`` sends a create again with the same ``Idempotency-Key`` after a 409 or a 5xx (GW-CREATE-R3-6,
GW-CREATE-R3-7): a gateway cut mid-create (a restart, a Lambda timeout answered 502/504 by API Gateway) never makes
the client give up on a task it may have half created, and never makes a second one."""

from __future__ import annotations

import httpx
import pytest

from asya_local.client import GatewayClient
from asya_local.exceptions import GatewayHttpError

pytestmark = pytest.mark.unit

TASK = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"


def _client(codes: list[int], keys: list[str]) -> GatewayClient:
    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        code = codes.pop(0)
        if code == 201:
            return httpx.Response(201, json={"id": TASK, "status": "pending"})
        return httpx.Response(code, json={"error": "cut"})

    return GatewayClient(
        "http://gw.test", http=httpx.Client(base_url="http://gw.test", transport=httpx.MockTransport(handler))
    )


@pytest.mark.parametrize("first", [409, 500, 502, 503, 504])
def test_gw_create_r3_7_a_cut_create_is_sent_again_with_the_same_key(first: int) -> None:
    keys: list[str] = []
    answer = _client([first, 201], keys).create(flow="text-pipeline", payload={"text": "hi"})
    assert answer["id"] == TASK
    assert len(keys) == 2 and keys[0] == keys[1]


def test_gw_create_r3_7_a_client_error_is_not_sent_again() -> None:
    keys: list[str] = []
    with pytest.raises(GatewayHttpError):
        _client([422, 201], keys).create(flow="text-pipeline", payload={"text": "hi"})
    assert len(keys) == 1
