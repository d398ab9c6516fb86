"""Unencodable output on the local mesh (P-ABI-19 R3, issue 25 defect 2): a task created with ``?actor=`` and no
timeout, whose handler returns an integer over Python's digit limit, reaches a terminal state (``failed``, naming the
SerializationError) instead of staying ``running`` with nothing in flight."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.mesh import LocalMesh

pytestmark = pytest.mark.e2e

_ACTORS = """
from typing import Any, Iterator


def huge(payload: Any) -> Any:
    return {"x": 10**5000}


def surrogate(payload: Any) -> Iterator[Any]:
    yield {"x": "a\\ud800b"}
"""


@pytest.fixture(scope="module")
def mesh_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("unencodable")
    (tmp / "unencodable_actors.py").write_text(_ACTORS, encoding="utf-8")
    manifest = tmp / "asya.yaml"
    manifest.write_text(
        f"""namespace: e2eunenc
actors:
  huge: {{handler: unencodable_actors.huge, code: {tmp}}}
  surrogate: {{handler: unencodable_actors.surrogate, code: {tmp}}}
""",
        encoding="utf-8",
    )
    with LocalMesh(load_manifest(manifest), port=0) as mesh:
        yield mesh.url


def _wait_terminal(url: str, task_id: str, *, bound: float = 90.0) -> dict[str, Any]:
    """Poll the task view until it is terminal; a generous bound, never a timing assertion."""
    give_up = time.monotonic() + bound
    while True:
        view: dict[str, Any] = httpx.get(f"{url}/api/v1/mesh/{task_id}", timeout=10).json()
        if view["status"] in ("succeeded", "failed", "canceled") or time.monotonic() > give_up:
            return view
        time.sleep(0.2)


@pytest.mark.parametrize(("actor", "message"), [("huge", "digits"), ("surrogate", "lone surrogate")])
def test_p_abi_19_r3_unencodable_output_ends_a_task_without_timeout(mesh_url: str, actor: str, message: str) -> None:
    created = httpx.post(f"{mesh_url}/api/v1/mesh/", params={"actor": actor}, json={"payload": {}}, timeout=10)
    assert created.status_code == 201, created.text
    assert created.json().get("deadline_at") is None, "no timeout: only the fix ends this task"
    view = _wait_terminal(mesh_url, created.json()["id"])
    assert view["status"] == "failed"
    assert message in view["error"]
    assert view["error_details"]["type"] == "asya.exceptions.SerializationError"
