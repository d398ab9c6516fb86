"""The subset is total on the local mesh (P-FLOW-30): flows that start with a fan-out, a map, a pause, a ``try`` or a
``return``, and a seeded sample of generated programs (tests/flowgen.py, each construct first, in the middle and
last), run over HTTP through the gateway, the layers, the flow's aggregator, x-pause/x-resume and x-sink. Each ends
as its plain-Python run does: the same result, or a failure with the same error type."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from hypothesis import strategies as st

from asya.manifest import load_manifest
from asya_local.mesh import LocalMesh
from tests.e2e.conftest import Gateway
from tests.flowgen import CONSTRUCTS, RESUME, FlowProgram, example, flow_programs, payloads
from tests.flowgen_actors import ACTORS
from tests.flowsim import plain_run
from tests.history import recorded_history
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

_TERMINAL: Final = ("succeeded", "failed", "canceled")
_PAUSE = 'state = pause(state, prompt="Go on?", fields=[{"name": "approved", "type": "boolean"}])'
#: The flows that start with each construct that a flow could not start with before, by hand.
FIRST: Final = {
    "fanout-first": 'state["r"] = [inc(state), dbl(state), add_three(state)]\n    state = inc(state)',
    "map-first": 'state["m"] = [dbl(x) for x in state["items"]]\n    state["total"] = len(state["m"])',
    "pause-first": f"{_PAUSE}\n    state = inc(state)",
    "try-first": "try:\n        state = check(state)\n    except ValueError:\n        state['caught'] = True\n"
    "    state = dbl(state)",
    "return-first": "return state\n    state = inc(state)",
    "fanout-only": 'state["r"] = [check(state), inc(state)]',
    "pause-only": _PAUSE,
    "map-fails-first": 'state["m"] = [check(x) for x in state["items"]]',
    "slice-fails-first": 'state["r"] = [inc(state), lookup(state)]\n    state = inc(state)',
    "caught-slice-first": 'try:\n        state["r"] = [check(state), dbl(state)]\n    except ValueError:\n'
    '        state["caught"] = True',
}


def _hand_written(name: str, body: str) -> FlowProgram:
    source = f"from asya.flows import flow, pause\n\n\n@flow\ndef {name.replace('-', '_')}(state):\n    {body}\n"
    return FlowProgram(name=name.replace("-", "_"), source=source, exact_calls=True, pauses="pause(" in body)


@functools.cache
def _sample() -> list[tuple[FlowProgram, dict[str, Any]]]:
    """One generated program per construct and position, with a payload: fixed seeds, so the same 33 every run.
    Drawn on first use, not at import: every xdist worker collects this module, and the draws take seconds."""
    found: list[tuple[FlowProgram, dict[str, Any]]] = []
    for construct in CONSTRUCTS:
        for position in ("lead", "middle", "tail"):
            strategy = st.tuples(
                flow_programs(name=f"{construct}_{position}", max_depth=1, max_statements=2, **{position: construct}),
                payloads(),
            )
            found.append(example(strategy, seed_value=37 + len(found)))
    return found


@functools.cache
def _cases() -> list[tuple[FlowProgram, dict[str, Any]]]:
    """The hand-written flows of :data:`FIRST`, then the sample."""
    return [
        *[(_hand_written(name, body), {"n": 3, "log": [], "items": [1, 2, 3]}) for name, body in FIRST.items()],
        *_sample(),
    ]


@pytest.fixture(scope="module")
def programs_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMesh]:
    root = tmp_path_factory.mktemp("flowgen")
    (root / "flows").mkdir()
    (root / "functions").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "flowgen_actors.py", root / "functions" / "flowgen_actors.py")
    lines = ["namespace: e2egen", "defaults:", "  timeout: 10s", "actors:"]
    for actor in ACTORS:
        lines += [f"  {actor}:", f"    handler: flowgen_actors.{actor.replace('-', '_')}"]
    lines.append("flows:")
    for program, _ in _cases():
        (root / "flows" / f"{program.name}.py").write_text(program.source)
        lines += [f"  {_flow(program)}:", f"    source: flows/{program.name}.py", "    timeout: 300"]
    (root / "asya.yaml").write_text("\n".join(lines) + "\n")
    manifest = load_manifest(root / "asya.yaml")
    with LocalMesh(manifest, port=0, record_history=True) as mesh:
        yield mesh


def _flow(program: FlowProgram) -> str:
    return program.name.replace("_", "-")


def _finish(mesh: LocalMesh, client: Gateway, task_id: str) -> dict[str, Any]:
    """Resume the task with :data:`RESUME` at every pause until it ends; its final view."""

    def settled() -> dict[str, Any] | None:
        task = client.get(task_id)
        return task if task["status"] in (*_TERMINAL, "paused") else None

    url = f"{mesh.url}/api/v1/mesh/{task_id}/resume"
    while True:
        task = wait_for(settled, f"task {task_id} to pause or end", limit=240)
        if task["status"] in _TERMINAL:
            return task
        # the paused status comes before the stored envelope (P-PAUSE-5): 409 until it is stored
        wait_for(
            lambda: httpx.post(url, json={"input": RESUME}, timeout=10).status_code == 202,
            f"the resume of task {task_id} to be accepted",
        )


def _expected(program: FlowProgram, payload: dict[str, Any]) -> Any:
    """The plain run; a flow that falls off its end returns its state (docs/flows.md), where Python returns None."""
    oracle = replace(program, source=program.source.rstrip("\n") + "\n    return state\n")
    return plain_run(oracle.namespace(), oracle.name, ACTORS, payload, resume=RESUME)


def test_the_sample_covers_every_construct_in_every_position() -> None:
    sample = _sample()
    assert len(sample) == 3 * len(CONSTRUCTS)
    assert len({p.source for p, _ in sample}) == len(sample)


def test_programs_agree_with_plain_python_on_the_local_mesh(programs_mesh: LocalMesh) -> None:
    client = Gateway(programs_mesh.url)
    started = [(program, payload, client.create(flow=_flow(program), payload=payload)) for program, payload in _cases()]
    mismatches = []
    for program, payload, task_id in started:
        task = _finish(programs_mesh, client, task_id)
        plain = _expected(program, payload)
        got: tuple[Any, ...] = (task["status"], task.get("result"))
        want: tuple[Any, ...] = ("succeeded", plain.result)
        if not plain.ok:
            got = (task["status"], (task.get("error_details") or {}).get("type"))
            want = ("failed", plain.error_type)
        if got != want:
            mismatches.append((program.name, payload, got, want, program.source))
    assert not mismatches, mismatches


def test_a_fan_out_first_is_sent_by_the_create_and_merged_by_the_aggregator(programs_mesh: LocalMesh) -> None:
    """P-FLOW-30: the create sends the three slices and slice 0; the aggregator merges them in order, the flow goes
    on with the call after it."""
    client = Gateway(programs_mesh.url)
    task_id = client.create(flow="fanout-first", payload={"n": 4, "log": [], "items": []})
    task = _finish(programs_mesh, client, task_id)
    assert task["status"] == "succeeded", task
    assert [r["n"] for r in task["result"]["r"]] == [5, 8, 7]
    assert task["result"]["n"] == 5 and task["result"]["log"] == ["inc"]
    names = [step["actor"] for step in recorded_history(programs_mesh.url, task_id)["steps"]]
    # the three slices first, in any order (the aggregator that merges them is crew and records no step)
    assert sorted(names[:3]) == sorted(["inc", "dbl", "add-three"]), names


def test_a_pause_first_pauses_the_task_before_any_actor(programs_mesh: LocalMesh) -> None:
    client = Gateway(programs_mesh.url)
    task_id = client.create(flow="pause-first", payload={"n": 1, "log": [], "items": []})
    paused = wait_for(lambda: (t := client.get(task_id))["status"] == "paused" and t, "the task to pause at create")
    assert paused["pause_metadata"]["prompt"] == "Go on?"
    done = _finish(programs_mesh, client, task_id)
    assert done["status"] == "succeeded", done
    assert done["result"] == {"n": 2, "log": ["inc"], "items": [], "approved": True}


def test_a_return_first_completes_without_an_actor(programs_mesh: LocalMesh) -> None:
    client = Gateway(programs_mesh.url)
    task_id = client.create(flow="return-first", payload={"n": 1, "log": [], "items": []})
    done = _finish(programs_mesh, client, task_id)
    assert done["status"] == "succeeded" and done["result"] == {"n": 1, "log": [], "items": []}


@pytest.mark.parametrize("items", [[], [3]], ids=["empty", "one"])
def test_a_map_first_over_zero_or_one_items(programs_mesh: LocalMesh, items: list[int]) -> None:
    client = Gateway(programs_mesh.url)
    task_id = client.create(flow="map-first", payload={"n": 0, "log": [], "items": items})
    done = _finish(programs_mesh, client, task_id)
    assert done["status"] == "succeeded", done
    assert done["result"]["m"] == [2 * i for i in items] and done["result"]["total"] == len(items)
