"""``retry --from`` a fan-out slice on the local mesh (P-HIST-9, GW-HIST-2): ``ACTOR#n`` counts a map's slices, and
a child's id names one. The new task runs that slice again with its recorded input and flow state, reuses its
siblings' recorded results (their actors do not run again), merges at the aggregator, and the flow goes on as after
the original fan-out, under the new task's id. The same holds for a slice of an actor declared ``fan_in`` on a
static route."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.cli import main
from asya_local.mesh import LocalMesh
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

_MANIFEST = """\
namespace: slices
actors:
  split: {handler: slice_actors.split, code: functions}
  summarize-chunk: {handler: slice_actors.summarize, code: functions}
  join: {handler: slice_actors.join, code: functions}
  grammar: {handler: slice_actors.grammar, code: functions}
  tone: {handler: slice_actors.tone, code: functions}
  splitter: {handler: slice_actors.splitter, code: functions, fan_in: {key: /summaries}}
flows:
  static: {route: [splitter, summarize-chunk, x-fanin-splitter, join], timeout: 600, history: steps}
  document: {source: flows/document.py, timeout: 600, history: steps}
  checks: {source: flows/checks.py, timeout: 600, history: steps}
  digest: {source: flows/digest.py, timeout: 600, history: steps}
"""
# summarize-chunk fails on the chunk "two" and tone fails, until the file `fixed` exists beside them; every run of
# either is logged, so a test sees which slices ran again
_ACTORS = """\
from pathlib import Path

_HERE = Path(__file__).parent


def _run(name):
    with (_HERE / "runs.log").open("a", encoding="utf-8") as log:
        log.write(name + "\\n")
    return (_HERE / "fixed").exists()


def split(payload):
    return {**payload, "parts": payload["text"].split()}


def summarize(part):
    if not _run("summarize:" + part) and part == "two":
        raise ValueError("chunk two is unreadable")
    return part.upper()


def splitter(payload):
    yield from payload["text"].split()


def join(payload):
    return {**payload, "summary": " ".join(payload["summaries"])}


def grammar(payload):
    _run("grammar")
    return {"ok": True, "of": payload["text"]}


def tone(payload):
    if not _run("tone"):
        raise ValueError("tone model unavailable")
    return {"tone": "calm"}
"""
_DOCUMENT = """\
# ruff: noqa: F821
from asya.flows import flow


@flow
async def document(state):
    state = await split(state)
    state["summaries"] = [summarize_chunk(part) for part in state["parts"]]
    state = await join(state)
    return state
"""
_CHECKS = """\
# ruff: noqa: F821
from asya.flows import flow


@flow
async def checks(state):
    state["reviews"] = [grammar(state), tone(state)]
    state["done"] = True
    return state
"""
_DIGEST = """\
# ruff: noqa: F821
from asya.flows import flow


@flow
async def digest(state):
    state["summaries"] = [summarize_chunk(part) for part in state["parts"]]
    state = await join(state)
    return state
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("slices")
    (root / "functions").mkdir()
    (root / "flows").mkdir()
    (root / "asya.yaml").write_text(_MANIFEST, encoding="utf-8")
    (root / "functions" / "slice_actors.py").write_text(_ACTORS, encoding="utf-8")
    (root / "flows" / "document.py").write_text(_DOCUMENT, encoding="utf-8")
    (root / "flows" / "checks.py").write_text(_CHECKS, encoding="utf-8")
    (root / "flows" / "digest.py").write_text(_DIGEST, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def mesh(project: Path) -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(project / "asya.yaml"), port=0) as running:
        yield running


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


def _ended(mesh: LocalMesh, task_id: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        view: dict[str, Any] = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
        return view if view["status"] in ("succeeded", "failed", "canceled") else None

    return check


def _steps(mesh: LocalMesh, task_id: str, actor: str, count: int) -> list[dict[str, Any]]:
    """The recorded steps of ``actor`` in the task's tree, once ``count`` of them (each with its outputs) are there:
    slices may finish after their task failed."""

    def found() -> list[dict[str, Any]] | None:
        answer = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}/history", timeout=10)
        steps = [s for s in answer.json().get("steps", []) if s["actor"] == actor] if answer.status_code == 200 else []
        done = [s for s in steps if s["outputs"]]
        return done if len(done) >= count else None

    steps: list[dict[str, Any]] = wait_for(found, f"{count} recorded steps of {actor} in {task_id}")
    return steps


def _create(mesh: LocalMesh, flow: str, payload: dict[str, Any]) -> str:
    created = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"flow": flow}, json={"payload": payload}, timeout=10)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _retry(mesh: LocalMesh, task_id: str, step: str) -> dict[str, Any]:
    answer = httpx.post(f"{mesh.url}/api/v1/mesh/{task_id}/retry", json={"from": step}, timeout=10)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def test_p_hist_9_retry_from_a_map_slice_runs_only_that_slice_and_the_flow_goes_on(
    mesh: LocalMesh, functions: Path
) -> None:
    old = _create(mesh, "document", {"text": "one two three"})
    view = wait_for(_ended(mesh, old), "the task to fail at chunk two")
    assert view["status"] == "failed" and "chunk two is unreadable" in str(view["error"]), view
    _steps(mesh, old, "summarize-chunk", 3)  # every slice recorded (two with its error as output)
    (functions / "fixed").write_text("", encoding="utf-8")
    before = _runs(functions)
    created = _retry(mesh, old, "summarize-chunk#2")
    assert created["from"]["slice"] == 2 and created["from"]["reused"] == 2, created
    done = wait_for(_ended(mesh, created["id"]), "the slice replay to end")
    assert done["status"] == "succeeded", done
    assert done["result"]["summaries"] == ["ONE", "TWO", "THREE"], done
    assert done["result"]["summary"] == "ONE TWO THREE"
    assert _runs(functions)[len(before) :] == ["summarize:two"]  # the siblings' results were reused
    # the replayed slice is a child of the new task, owned by it
    (replayed,) = _steps(mesh, created["id"], "summarize-chunk", 1)
    assert replayed["parent_id"] == created["id"] and replayed["input"] == "two"
    assert replayed["headers"]["x-asya-flow-state"]["owner"] == created["id"]
    assert replayed["headers"]["x-asya-fan-in"]["origin_id"] == created["id"]


def test_p_hist_9_a_child_id_names_its_slice_from_the_cli(mesh: LocalMesh, functions: Path) -> None:
    old = _create(mesh, "document", {"text": "one two three"})
    wait_for(_ended(mesh, old), "the task to fail at chunk two")
    slices = _steps(mesh, old, "summarize-chunk", 3)
    child = next(s["envelope_id"] for s in slices if s["input"] == "two")
    (functions / "fixed").write_text("", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["retry", old, "--from", child], env={"ASYA_URL": mesh.url}, stdout=out, stderr=err)
    assert (code, err.getvalue()) == (0, "")
    done = wait_for(_ended(mesh, out.getvalue().strip()), "the CLI's slice replay to end")
    assert done["status"] == "succeeded" and done["result"]["summary"] == "ONE TWO THREE", done


def test_p_hist_9_a_fan_out_the_gateway_sent_at_create_replays_from_its_slice(mesh: LocalMesh, functions: Path) -> None:
    """The flow's first statement fans out (P-FLOW-30): no actor hop recorded slice 0, and a fan-out of calls gave
    every slice the state itself, so the replay takes it from the slice."""
    old = _create(mesh, "checks", {"text": "hello"})
    view = wait_for(_ended(mesh, old), "the checks to fail at tone")
    assert view["status"] == "failed" and "tone model unavailable" in str(view["error"]), view
    _steps(mesh, old, "grammar", 1)
    (functions / "fixed").write_text("", encoding="utf-8")
    before = _runs(functions)
    created = _retry(mesh, old, "tone")
    done = wait_for(_ended(mesh, created["id"]), "the replay of tone to end")
    assert done["status"] == "succeeded", done
    assert done["result"] == {"text": "hello", "reviews": [{"ok": True, "of": "hello"}, {"tone": "calm"}], "done": True}
    assert _runs(functions)[len(before) :] == ["tone"]


def test_p_hist_9_a_map_the_gateway_sent_at_create_replays_from_its_slice(mesh: LocalMesh, functions: Path) -> None:
    """The flow's first statement is a map: no hop recorded the state it started from, and the slices got items, so
    the gateway runs the flow's first instructions again on the task's input (the same program) to get it."""
    old = _create(mesh, "digest", {"parts": ["one", "two", "three"]})
    view = wait_for(_ended(mesh, old), "the digest to fail at chunk two")
    assert view["status"] == "failed" and "chunk two is unreadable" in str(view["error"]), view
    _steps(mesh, old, "summarize-chunk", 3)
    (functions / "fixed").write_text("", encoding="utf-8")
    before = _runs(functions)
    created = _retry(mesh, old, "summarize-chunk#2")
    done = wait_for(_ended(mesh, created["id"]), "the replay of chunk two to end")
    assert done["status"] == "succeeded", done
    assert done["result"] == {
        "parts": ["one", "two", "three"],
        "summaries": ["ONE", "TWO", "THREE"],
        "summary": "ONE TWO THREE",
    }
    assert _runs(functions)[len(before) :] == ["summarize:two"]


def test_p_hist_9_a_slice_of_a_declared_fan_in_actor_replays_the_same_way(mesh: LocalMesh, functions: Path) -> None:
    """A static route through a fan-in actor (P-FANIN-3): slice 0 is the fan-in actor's input, recorded as its output
    to the aggregator; the replayed slice's result joins its siblings' recorded ones, and the route goes on."""
    old = _create(mesh, "static", {"text": "one two three"})
    view = wait_for(_ended(mesh, old), "the static route to fail at chunk two")
    assert view["status"] == "failed" and "chunk two is unreadable" in str(view["error"]), view
    _steps(mesh, old, "summarize-chunk", 3)
    (functions / "fixed").write_text("", encoding="utf-8")
    before = _runs(functions)
    created = _retry(mesh, old, "summarize-chunk#2")
    done = wait_for(_ended(mesh, created["id"]), "the replay of chunk two to end")
    assert done["status"] == "succeeded", done
    assert done["result"]["summaries"] == ["ONE", "TWO", "THREE"] and done["result"]["summary"] == "ONE TWO THREE"
    assert _runs(functions)[len(before) :] == ["summarize:two"]
