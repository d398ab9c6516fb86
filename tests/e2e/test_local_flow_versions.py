"""``asya dev`` keeps tasks on the flow program they started with (P-FLOWV-1..3, docs/local.md): a task paused on
version 1 of a flow file, resumed after the file was edited (statements inserted before the pause) and the mesh
restarted, finishes as version 1 says; a task created after the restart follows version 2."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya_local.cli import main
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

_MANIFEST = """\
namespace: versions
actors:
  mark: {handler: version_actors.mark}
flows:
  edited: {source: flows/edited.py, timeout: 300}
"""
_ACTORS = "def mark(payload):\n    return {**payload, 'marks': payload.get('marks', 0) + 1}\n"
_V1 = """\
from asya.flows import flow, pause


@flow
async def edited(state):
    state = await mark(state)
    state = await pause(state, prompt="Go on?", fields=[{"name": "go", "type": "boolean"}])
    state["after"] = "v1"
    state = await mark(state)
    return state
"""
# version 2 inserts a mutation and a call before the pause: version 1's position after the pause (instruction 2)
# is a call of mark followed by the pause again in version 2
_V2 = _V1.replace(
    "    state = await mark(state)\n    state = await pause(",
    '    state["v2"] = True\n    state = await mark(state)\n    state = await mark(state)\n    state = await pause(',
).replace('"v1"', '"v2"')


def _write(path: Path, text: str) -> None:
    """Write ``text`` so that a poll by modification time and size always sees a change."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    stat = path.stat()
    if stat.st_mtime_ns == before:
        os.utime(path, ns=(stat.st_atime_ns, before + 1_000_000))


def _create(url: str, payload: Any) -> str:
    created = httpx.post(f"{url}/api/v1/mesh/", params={"flow": "edited"}, json={"payload": payload}, timeout=10)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _in(url: str, task_id: str, status: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        view: dict[str, Any] = httpx.get(f"{url}/api/v1/mesh/{task_id}", timeout=10).json()
        if view["status"] in ("failed", "canceled") and status != view["status"]:
            raise AssertionError(f"task {task_id} ended {view['status']}: {view.get('error')}")
        return view if view["status"] == status else None

    return check


def _resume(url: str, task_id: str) -> None:
    answer = httpx.post(f"{url}/api/v1/mesh/{task_id}/resume", json={"input": {"go": True}}, timeout=10)
    assert answer.status_code in (200, 202), answer.text


def _paused_stored(url: str, task_id: str) -> bool:
    # the gateway's resume needs x-pause's stored envelope (GW-RESUME-2): it answers 409 until it is there
    return bool(httpx.get(f"{url}/api/v1/mesh/{task_id}", timeout=10).json().get("pause_metadata"))


def test_a_task_paused_before_the_flow_file_changed_finishes_as_version_1(tmp_path: Path, run_dev: Any) -> None:
    _write(tmp_path / "functions" / "version_actors.py", _ACTORS)
    _write(tmp_path / "flows" / "edited.py", _V1)
    manifest = tmp_path / "asya.yaml"
    _write(manifest, _MANIFEST.replace("mark: {handler", "mark: {code: functions, handler"))
    with run_dev(manifest, cwd=tmp_path, log=tmp_path / "dev.stderr") as dev:
        old = _create(dev.url, {"text": "old"})
        wait_for(_in(dev.url, old, "paused"), "the version 1 task to pause")
        wait_for(lambda: _paused_stored(dev.url, old), "x-pause to store the paused task")

        _write(tmp_path / "flows" / "edited.py", _V2)
        wait_for(lambda: "restarted at" in dev.stderr(), "the mesh to restart on the edited flow")

        _resume(dev.url, old)
        done = wait_for(_in(dev.url, old, "succeeded"), "the version 1 task to finish")
        assert done["result"] == {"text": "old", "marks": 2, "go": True, "after": "v1"}

        new = _create(dev.url, {"text": "new"})
        wait_for(_in(dev.url, new, "paused"), "the version 2 task to pause")
        wait_for(lambda: _paused_stored(dev.url, new), "x-pause to store the paused task")
        _resume(dev.url, new)
        done = wait_for(_in(dev.url, new, "succeeded"), "the version 2 task to finish")
        assert done["result"] == {"text": "new", "v2": True, "marks": 3, "go": True, "after": "v2"}

        # the collection keeps version 2 (the manifest's) and would retire version 1: no paused task needs it now
        out, err = io.StringIO(), io.StringIO()
        status = main(
            ["flow", "gc", "--local", "--manifest", str(manifest), "--dry-run"], env={}, stdout=out, stderr=err
        )
        assert status == 0, err.getvalue()
        collected = json.loads(out.getvalue())
        assert (len(collected["kept"]), len(collected["retired"]), collected["deleted"]) == (1, 1, []), collected
