"""The console's drawing of a flow written as Python (console/flowgraph.js, docs/flows.md "The console") for a flow
with a loop, a pause and a call after it (tests/browser/mesh/flows/revise.py): the path a task took goes on past the
pause, a drawing taller than its box can be shown whole, and the loop's way back runs clear of every node."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser.pages import Console, screenshot

pytestmark = pytest.mark.browser

FLOW = "revise"
#: The revise task's input: one word, no wait in linger, two rounds of the loop.
INPUT = {"topic": "spring", "words": 1, "seconds": 0, "round": 0}


def _graph(console: Console) -> dict[str, Any]:
    flows = httpx.get(f"{console.mesh.url}/api/v1/system/mesh", headers=console.headers).json()["flows"]
    graph: dict[str, Any] = next(f for f in flows if f["name"] == FLOW)["graph"]
    return graph


def _labels(drawing: Any, graph: dict[str, Any], visited: bool) -> set[str]:
    label = {node["id"]: node["label"] for node in graph["nodes"]}
    # read in one evaluation: the console redraws the graph as the task's events arrive, and a locator list taken
    # before a redraw can name a node the new drawing no longer has at that index
    nodes = drawing.locator(f'g[data-node][data-visited="{str(visited).lower()}"]')
    return {label[node] for node in nodes.evaluate_all("els => els.map(e => e.getAttribute('data-node'))")}


def test_gw_mesh_1_the_path_goes_through_the_pause_to_the_end(page: Any, console: Console) -> None:
    """The recorded history (``history: steps``) holds the layer's hops, not x-pause's or x-resume's, and the path
    stopped at the last ``review``: the pause was never passed. While the task is paused the path ends at the pause;
    once it is resumed and done, it goes on through the mutation and ``linger`` to the end."""
    from playwright.sync_api import expect  # the tier skips, not errors, where playwright is missing (conftest)

    task_id = console.create(FLOW, INPUT)
    page.goto(console.url + f"#/task/{task_id}")
    page.locator("main h1 .badge[data-status=paused]").wait_for()
    drawing = page.locator("#flow svg[data-testid=flow-graph]")
    graph = _graph(console)
    pause = next(node["id"] for node in graph["nodes"] if node["kind"] == "pause")
    expect(drawing.locator(f'g[data-node="{pause}"][data-visited="true"]')).to_have_count(1)
    assert "linger" in _labels(drawing, graph, visited=False)

    page.select_option("#field-approved", "true")
    page.click("#resume-form button[type=submit]")
    page.locator("main h1 .badge[data-status=succeeded]").wait_for()
    expect(drawing.locator('g.flow-edge[data-to="done"][data-visited="true"]')).to_have_count(1)
    assert _labels(drawing, graph, visited=True) == {node["label"] for node in graph["nodes"]}
    screenshot(page, "task-flow-path-through-pause")


def test_gw_mesh_1_a_tall_drawing_can_be_shown_whole(page: Any, console: Console) -> None:
    """The drawing's box is at most 640 px high and scrolls; a taller drawing gets a button that shows it whole (and
    one that folds it back)."""
    page.goto(console.url + "#/mesh")
    card = page.locator(f'[data-flow="{FLOW}"]')
    svg = card.locator("svg[data-testid=flow-graph]")
    svg.wait_for()
    box = card.locator(".flow-drawing")
    tall = svg.bounding_box()["height"]
    assert tall > 640 and box.bounding_box()["height"] <= 640
    toggle = card.locator("button.flow-expand")
    assert toggle.text_content() == "Show the whole flow"
    toggle.click()
    assert box.bounding_box()["height"] >= tall
    assert toggle.text_content() == "Fold the flow"
    screenshot(page, "mesh-flow-whole")
    toggle.click()
    assert box.bounding_box()["height"] <= 640


def _crossings(path: Any, boxes: list[dict[str, float]]) -> list[dict[str, float]]:
    """The node boxes (the drawing's coordinates) that points along ``path`` fall inside, 2 px in from each side."""
    points: list[list[float]] = path.evaluate(
        "p => { const n = 200, l = p.getTotalLength(), out = [];"
        " for (let i = 0; i <= n; i++) { const q = p.getPointAtLength(l * i / n); out.push([q.x, q.y]); }"
        " return out; }"
    )
    return [
        b
        for b in boxes
        if any(
            b["x"] + 2 < x < b["x"] + b["width"] - 2 and b["y"] + 2 < y < b["y"] + b["height"] - 2 for x, y in points
        )
    ]


def test_gw_mesh_1_the_loops_way_back_runs_clear_of_every_node(page: Any, console: Console) -> None:
    page.goto(console.url + "#/mesh")
    svg = page.locator(f'[data-flow="{FLOW}"] svg[data-testid=flow-graph]')
    svg.wait_for()
    graph = _graph(console)
    review = next(node["id"] for node in graph["nodes"] if node["label"] == "review")
    back = svg.locator(f'g.flow-edge[data-from="{review}"] path')
    assert back.count() == 1
    boxes: list[dict[str, float]] = [
        shape.evaluate("s => { const b = s.getBBox(); return {x: b.x, y: b.y, width: b.width, height: b.height}; }")
        for shape in svg.locator("g[data-node] > rect, g[data-node] > polygon").all()
    ]
    assert len(boxes) == len(graph["nodes"])
    assert _crossings(back, boxes) == []
    for edge in svg.locator("g.flow-edge path").all():  # no other edge crosses a node either
        assert _crossings(edge, boxes) == [], edge.get_attribute("d")
