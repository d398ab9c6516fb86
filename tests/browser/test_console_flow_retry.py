"""The console's Retry-from-here on a task of a flow written as Python (GW-HIST-2, P-HIST-8, P-HIST-9): from a step
of the task's own envelope inside a loop, and from one slice of a map. Each click asks for a confirmation, opens the
new task, and the new task succeeds under its own id once the failing actor is fixed; from the slice, only that
slice's actor runs again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.mesh import LocalMesh
from tests.browser.pages import Console, screenshot
from tests.waiting import wait_for

pytestmark = pytest.mark.browser

_MANIFEST = """\
namespace: consoleretry
actors:
  draft: {handler: retry_actors.draft, code: functions}
  polish: {handler: retry_actors.polish, code: functions}
  check: {handler: retry_actors.check, code: functions}
  publish: {handler: retry_actors.publish, code: functions}
flows:
  article: {source: flows/article.py, timeout: 120, history: steps}
"""
# check fails on the part "bad", publish on a state with "hold", until the file `fixed` exists beside them; every
# run is logged, so the test sees what ran again
_ACTORS = """\
from pathlib import Path

_HERE = Path(__file__).parent


def _fixed(name):
    with (_HERE / "runs.log").open("a", encoding="utf-8") as log:
        log.write(name + "\\n")
    return (_HERE / "fixed").exists()


def draft(payload):
    return {**payload, "text": "draft"}


def polish(payload):
    return {**payload, "text": payload["text"] + "+"}


def check(part):
    if not _fixed("check:" + part) and part == "bad":
        raise ValueError("part 'bad' does not check out")
    return {"part": part, "ok": True}


def publish(payload):
    if not _fixed("publish") and payload.get("hold"):
        raise ValueError("publishing is on hold")
    return {**payload, "published": True}
"""
_FLOW = """\
# ruff: noqa: F821
from asya.flows import flow


@flow
async def article(state):
    state = await draft(state)
    state["rounds"] = 0
    while state["rounds"] < 2:
        state["rounds"] += 1
        state = await polish(state)
    state["checks"] = [check(part) for part in state["parts"]]
    state = await publish(state)
    return state
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("consoleretry")
    (root / "functions").mkdir()
    (root / "flows").mkdir()
    (root / "asya.yaml").write_text(_MANIFEST, encoding="utf-8")
    (root / "functions" / "retry_actors.py").write_text(_ACTORS, encoding="utf-8")
    (root / "flows" / "article.py").write_text(_FLOW, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def console(project: Path) -> Iterator[Console]:
    with LocalMesh(load_manifest(project / "asya.yaml"), port=0) as mesh:
        yield Console(mesh, headers={})


@pytest.fixture
def functions(project: Path) -> Iterator[Path]:
    where = project / "functions"
    (where / "fixed").unlink(missing_ok=True)
    (where / "runs.log").unlink(missing_ok=True)
    yield where
    (where / "fixed").unlink(missing_ok=True)


def _runs(functions: Path) -> list[str]:
    log = functions / "runs.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def _ended(console: Console, task_id: str) -> dict[str, Any] | None:
    view = console.view(task_id)
    return view if view["status"] in ("succeeded", "failed", "canceled") else None


def _steps(console: Console, task_id: str, ready: Any) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]] | None:
        answer = httpx.get(f"{console.mesh.url}/api/v1/mesh/{task_id}/history", headers=console.headers)
        steps: list[dict[str, Any]] = answer.json()["steps"] if answer.status_code == 200 else []
        return steps if ready(steps) else None

    steps: list[dict[str, Any]] = wait_for(found, f"the recorded steps of {task_id}")
    return steps


def _retry_from(page: Any, console: Console, old: str, selector: str) -> str:
    """Open the failed task, click the Retry-from-here button ``selector``, accept the confirmation, and return the
    id of the task page the console opens (polled with Playwright's own wait: a plain sleep would block the dialog's
    handler)."""
    page.goto(console.url + f"#/task/{old}")
    page.locator("main h1 .badge[data-status=failed]").wait_for()
    page.locator(selector).wait_for()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(selector)
    for _ in range(600):  # a bound of about 60 s, not a timing assertion
        if "#/task/" in page.url and old not in page.url:
            return unquote(page.url.rsplit("/", 1)[-1])
        page.wait_for_timeout(100)
    raise AssertionError(f"no new task page: {page.url}, banner {page.locator('#banner').text_content()!r}")


def test_gw_hist_2_retry_from_here_on_a_flow_step_inside_a_loop_succeeds(
    page: Any, console: Console, functions: Path
) -> None:
    """publish fails; Retry-from-here on polish's second run (hop 2, inside the loop with one round counted) runs
    the rest of the flow under the new task's own flow state, and the new task succeeds."""
    old = console.create("article", {"parts": ["a"], "hold": True})
    assert wait_for(lambda: _ended(console, old), "the task to fail at publish")["status"] == "failed"
    steps = _steps(console, old, lambda s: any(step["actor"] == "publish" for step in s))
    assert [(s["actor"], s["hop"]) for s in steps if s["envelope_id"] == old][:3] == [
        ("draft", 0),
        ("polish", 1),
        ("polish", 2),
    ]
    (functions / "fixed").write_text("", encoding="utf-8")
    new = _retry_from(page, console, old, f'.retry-from[data-envelope="{old}"][data-hop="2"]')
    page.locator("main h1 .badge[data-status=succeeded]").wait_for()
    done = console.view(new)
    assert done["status"] == "succeeded", done
    assert done["result"]["rounds"] == 2 and done["result"]["text"] == "draft++" and done["result"]["published"]
    assert _runs(functions)[-1] == "publish"
    screenshot(page, "task-flow-retry-from-here")


def test_p_hist_9_retry_from_here_on_a_map_slice_runs_that_slice_and_succeeds(
    page: Any, console: Console, functions: Path
) -> None:
    """check fails on the part "bad"; its slice's Retry-from-here runs check on that part alone, reuses the other
    slices' results, and the flow goes on to publish."""
    old = console.create("article", {"parts": ["good", "bad", "fine"]})
    assert wait_for(lambda: _ended(console, old), "the task to fail at the bad part")["status"] == "failed"
    steps = _steps(console, old, lambda s: len([x for x in s if x["actor"] == "check" and x["outputs"]]) == 3)
    bad = next(s["envelope_id"] for s in steps if s["actor"] == "check" and s["input"] == "bad")
    (functions / "fixed").write_text("", encoding="utf-8")
    before = _runs(functions)
    new = _retry_from(page, console, old, f'.retry-from[data-envelope="{bad}"]')
    page.locator("main h1 .badge[data-status=succeeded]").wait_for()
    done = console.view(new)
    assert done["status"] == "succeeded", done
    assert [c["part"] for c in done["result"]["checks"]] == ["good", "bad", "fine"], done
    assert _runs(functions)[len(before) :] == ["check:bad", "publish"]
