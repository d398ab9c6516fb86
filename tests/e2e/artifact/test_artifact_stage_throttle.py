"""The stage throttle of a synthesized mesh on the artifact mesh (docs/http.md GW-OVL-6): a manifest's
``gateway.edge.throttle`` becomes the stage's method settings, the API front plays them as API Gateway's token bucket,
and a request over them gets the template's ``THROTTLED`` Gateway Response: 429 with ``Retry-After`` and the
gateway's error shape, without reaching a gateway function."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.overload import DEFAULT_RETRY_AFTER_SECONDS
from asya_local.artifact.mesh import ArtifactMesh

pytestmark = pytest.mark.artifact

REPO = Path(__file__).resolve().parents[3]
BURST = 3


def _manifest() -> dict[str, Any]:
    return {
        "namespace": "throttled",
        "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
        "flows": {"echoing": {"route": ["echo"]}},
        # a burst of 3 that refills once in 1,000 s: the fourth request of the test is over the limit
        "gateway": {"edge": {"throttle": {"rate_limit": 0.001, "burst_limit": BURST}}},
    }


@pytest.fixture(scope="module")
def mesh(own_mesh: Callable[[dict[str, Any], str], AbstractContextManager[ArtifactMesh]]) -> Iterator[ArtifactMesh]:
    with own_mesh(_manifest(), "throttled") as running:
        yield running


def test_gw_ovl_6_requests_over_the_stage_throttle_get_429_with_retry_after(mesh: ArtifactMesh) -> None:
    with httpx.Client(base_url=mesh.url, timeout=60) as client:
        passed = [client.get("/health").status_code for _ in range(BURST)]
        relayed = len(mesh.relayed())
        throttled = client.get("/health")
    assert passed == [200] * BURST
    assert throttled.status_code == 429, throttled.text
    assert throttled.headers["retry-after"] == str(DEFAULT_RETRY_AFTER_SECONDS)
    assert "overloaded" in throttled.json()["error"]
    assert len(mesh.relayed()) == relayed, "a throttled request reached a gateway function"
