"""A create whose compiled flow's first instructions are expensive (P-FLOW-5, P-FLOW-21): they run off the event
loop under the continuation's time budget, so the gateway keeps answering other requests meanwhile, and the create
itself answers 400 with the flow error instead of hanging."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from asya.manifest import parse_manifest
from asya_gateway import GatewayConfig, create_app, creation
from tests.clocks import ManualClock
from tests.functional.test_gateway_tasks import START

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parents[2]

# every round compares two 100,000-item lists: 100,000 instructions of it would hold a CPU for many seconds
SLOW = """
@flow(max_iterations=1000000)
def slow(state):
    while state["a"] == state["b"]:
        state["i"] += 1
    state = normalize(state)
    return state
"""


@pytest.fixture
def client(mesh: Any, serve_asgi: Any, tmp_path: Path) -> Iterator[httpx.Client]:
    source = tmp_path / "slow.py"
    source.write_text(SLOW)
    data = yaml.safe_load((REPO / "asya.yaml").read_text())
    data["flows"]["slow"] = {"source": str(source)}
    manifest = parse_manifest(data, base_dir=REPO)
    clock = ManualClock(START)
    app = create_app(GatewayConfig(), manifest=manifest, store=mesh.store(clock), sqs=mesh.aws.sqs, clock=clock)
    with httpx.Client(base_url=serve_asgi(app), timeout=120) as http:
        yield http


def test_p_flow_21_an_expensive_create_never_holds_the_other_requests(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, finished = threading.Event(), threading.Event()
    real_start = creation.start

    def observed_start(*args: Any, **kwargs: Any) -> Any:
        """The real continuation at create, with events marking its beginning and end."""
        started.set()
        try:
            return real_start(*args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(creation, "start", observed_start)
    big = list(range(100_000))
    created: list[httpx.Response] = []
    creator = threading.Thread(
        target=lambda: created.append(
            client.post("/api/v1/mesh/?flow=slow", json={"payload": {"a": big, "b": big, "i": 0}})
        ),
        daemon=True,
    )
    creator.start()
    assert started.wait(timeout=120)
    assert client.get("/health").status_code == 200
    assert not finished.is_set()  # /health answered while the create's continuation still ran
    creator.join()
    (response,) = created
    assert response.status_code == 400, response.text
    assert "flow 'slow' cannot start" in response.json()["error"]
    assert "time budget" in response.json()["error"]
