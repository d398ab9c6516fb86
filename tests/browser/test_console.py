"""The web console in a real headless chromium against a local mesh (issue 21): create from the generated form, watch
progress and FLY text over SSE (GW-SSE-4..7), success with its result and checkpoint (GW-TASK-1), a failing task with
its error and details (P-ERR-3), cancel (GW-CANCEL-1), the list with filters (GW-LIST-1), a DLQ entry on the mesh page
(GW-OPS-3), and task data that carries markup rendered as inert text.

Setup shortcut, said here: the DLQ entry is sent to the DLQ with boto3 (against the mesh's moto) rather than by
crashing an actor ``max_receive_count`` times, which takes minutes of visibility timeouts; the page reads the real
queue attributes either way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from asya.store import StatusUpdate, TaskStore
from tests.browser.pages import Console, screenshot
from tests.history import recorded_history
from tests.waiting import wait_for

pytestmark = pytest.mark.browser

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


def _open(page: Any, console: Console, fragment: str) -> None:
    page.goto(console.url + fragment)


def _wait_status(page: Any, status: str) -> None:
    page.locator(f"main h1 .badge[data-status={status}]").wait_for()


def test_gw_create_4_task_from_generated_form_streams_fly_and_succeeds(page: Any, console: Console) -> None:
    """The form is generated from the flow's input_schema (GW-CREATE-4); the task page follows the SSE stream: running
    with the current actor, the FLY text as it arrives (GW-SSE-11), then the result and checkpoint (GW-TASK-1)."""
    _open(page, console, "#/new/write")
    form = page.locator("#create-form")
    form.wait_for()
    assert page.locator("#field-topic").get_attribute("required") is not None  # required: [topic]
    assert page.locator("#field-words").get_attribute("type") == "number"
    assert page.locator("#field-fail").get_attribute("type") == "checkbox"
    assert page.locator("#field-tone option").all_text_contents() == ["—", '"plain"', '"bold"']
    page.fill("#field-topic", "console")
    page.fill("#field-words", "16")
    page.select_option("#field-tone", label='"bold"')
    screenshot(page, "new-task")
    page.click("#create")

    page.wait_for_url(re.compile(r"#/task/[0-9a-f-]{36}$"))
    task_id = page.url.rsplit("/", 1)[1]
    _wait_status(page, "running")
    page.locator('#fly:has-text("word3")').wait_for()
    assert page.locator('[data-testid=pipeline] .stage.current[data-actor="draft"]').count() == 1
    screenshot(page, "task-running")

    _wait_status(page, "succeeded")
    expected = "console " + " ".join(f"word{n}" for n in range(1, 16))
    page.locator(f'#fly:text-is("{expected}")').wait_for()
    result = json.loads(page.locator("#result pre").text_content())
    # an unchecked optional boolean is sent as false; an optional enum left at "—" is left out
    expected_result = {"topic": "console", "words": 16, "fail": False, "tone": "bold", "draft": expected}
    assert result == {**expected_result, "reviewed": True}
    view = console.view(task_id)
    assert page.locator("#checkpoint").text_content().count(view["checkpoint_uri"]) == 1
    assert page.locator("[data-testid=pipeline] .stage.done").count() == 2
    assert page.locator("#cancel").is_disabled()
    screenshot(page, "task-succeeded")

    page.reload()  # FLY text is replayed from the event log (GW-SSE-5)
    page.locator(f'#fly:text-is("{expected}")').wait_for()
    page.click("#raw summary")
    assert json.loads(page.locator("#raw-json").text_content())["id"] == task_id


def test_gw_create_4_form_reports_the_gateways_400_and_raw_json_fallback(page: Any, console: Console) -> None:
    """A payload the schema refuses shows the gateway's message; the raw JSON fallback sends any JSON value."""
    _open(page, console, "#/new/write")
    page.click("#use-raw")
    page.fill("#raw-payload", '{"topic": ""}')
    page.click("#create")
    message = page.locator("#create-error")
    message.filter(has_text="payload does not match input_schema").wait_for()
    assert "topic" in message.text_content()
    page.fill("#raw-payload", "{not json")
    page.click("#create")
    message.filter(has_text="payload: invalid JSON").wait_for()


def test_p_err_3_failing_task_shows_error_and_details(page: Any, console: Console) -> None:
    _open(page, console, "#/new/write")
    page.fill("#field-topic", "doomed")
    page.check("#field-fail")
    page.click("#create")
    _wait_status(page, "failed")
    page.locator("#error-text").filter(has_text="rejected draft about doomed").wait_for()
    assert "review" in page.locator("#error").text_content()  # failed_actor
    details = json.loads(page.locator("#error-details > pre").first.text_content())
    assert details["type"].endswith("ReviewRejectedError")
    # the traceback reads as text with its line breaks, not as a JSON string of \n escapes (issue 28, item 4)
    traceback = page.locator('#error-details pre.traceback[data-detail="traceback"]').text_content()
    assert traceback.startswith("Traceback (most recent call last):\n") and "\\n" not in traceback
    assert "traceback" not in details
    # a failed task says where it failed, not the percentage and step it was at before (issue 28, item 4)
    page.locator("#progress-text").filter(has_text="failed · at review").wait_for()
    assert "%" not in page.locator("#progress-text").text_content()
    assert page.locator("#fly").get_attribute("data-ended") == "true"  # "no live output", not "... yet"
    assert page.locator('[data-testid=pipeline] .stage.failed[data-actor="review"]').count() == 1
    screenshot(page, "task-failed")


def test_gw_cancel_1_cancel_button_cancels_a_running_task(page: Any, console: Console, gate: Path) -> None:
    """A flow without input_schema gets the raw JSON form only; the cancel button ends the task as canceled."""
    _open(page, console, "#/new/slow")
    assert page.locator("#schema-fields").is_hidden()
    page.fill("#raw-payload", json.dumps({"topic": "patience", "seconds": 25, "gate": str(gate)}))
    page.click("#create")
    _wait_status(page, "running")  # linger holds the task until the test ends
    page.click("#cancel")
    _wait_status(page, "canceled")
    task_id = page.url.rsplit("/", 1)[1]
    assert console.view(task_id)["status"] == "canceled"
    assert page.locator("#cancel").is_disabled()


def test_p_retry_task_page_marks_the_retrying_actor(page: Any, console: Console, gate: Path) -> None:
    """A handler error with a retry policy shows the actor as retrying with its attempt, then the task succeeds."""
    task_id = console.create("bumpy", {"topic": "retry me", "gate": str(gate)})
    _open(page, console, f"#/task/{task_id}")
    # wobble's first call fails only once the page follows it running: the 3 s retry delay is then on screen
    page.locator('[data-testid=pipeline] .stage.current[data-actor="wobble"]').wait_for()
    gate.touch()
    retrying = page.locator('[data-testid=pipeline] .stage.retrying[data-actor="wobble"]')
    retrying.wait_for()
    assert "retrying (attempt 2)" in retrying.text_content()
    screenshot(page, "task-retrying")
    _wait_status(page, "succeeded")
    assert json.loads(page.locator("#result pre").text_content())["wobbled"] is True


def test_gw_list_1_tasks_page_lists_newest_first_and_filters(page: Any, console: Console) -> None:
    first = console.create("write", {"topic": "older", "words": 1})
    second = console.create("write", {"topic": "newer", "words": 1, "fail": True})
    _open(page, console, "#/tasks")
    rows = page.locator("#tasks tbody tr[data-task-row]")
    page.locator(f'[data-task-row="{second}"]').wait_for()  # the list is eventually consistent (GW-LIST-4)
    page.locator(f'[data-task-row="{first}"]').wait_for()
    ids = [row.get_attribute("data-task-row") for row in rows.all()]
    assert ids.index(second) < ids.index(first)  # newest first
    page.locator(f'[data-task-row="{second}"] .badge[data-status=failed]').wait_for()  # refreshes while tasks run
    screenshot(page, "tasks")
    page.select_option("#filter-status", "failed")
    page.wait_for_url(re.compile(r"#/tasks\?status=failed$"))
    page.locator(f'[data-task-row="{second}"]').wait_for()
    assert page.locator(f'[data-task-row="{first}"]').count() == 0
    assert {badge.text_content() for badge in page.locator("#tasks .badge").all()} == {"failed"}


def test_gw_list_2_tasks_page_pages_with_the_cursor(page: Any, console: Console) -> None:
    """Older and Newer walk the list with ``next_cursor`` (GW-LIST-2), two tasks a page here. (The page's CSP refuses
    string evaluation, so Playwright's ``wait_for_function`` cannot run there: rows are polled from Python.)"""
    for index in range(3):
        console.create("write", {"topic": f"page {index}", "words": 1})
    _open(page, console, "#/tasks?limit=2")
    rows = page.locator("#tasks tbody tr[data-task-row]")

    def shown() -> list[str]:
        return [str(row.get_attribute("data-task-row")) for row in rows.all()]

    first = wait_for(lambda: shown() if len(shown()) == 2 else None, "the first page", limit=30)
    assert page.locator("#tasks-newer").is_disabled()
    page.click("#tasks-older")
    second = wait_for(lambda: (ids := shown()) and not set(ids) & set(first) and ids, "the second page", limit=30)
    assert len(second) <= 2
    page.click("#tasks-newer")
    wait_for(lambda: shown() == first, "the first page again", limit=30)


def test_gw_ops_3_mesh_page_shows_a_dlq_with_messages_and_the_commands(page: Any, console: Console) -> None:
    failed = console.create("write", {"topic": "mesh page", "words": 1, "fail": True})
    wait_for(lambda: console.view(failed)["status"] == "failed", "the failing task")
    sqs = console.mesh.clients.sqs
    url = sqs.get_queue_url(QueueName="asya-console-review-dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"id": "dead-letter", "payload": {}}))
    try:
        _open(page, console, "#/mesh")
        alert = page.locator('[data-dlq="review"]')
        alert.wait_for()
        assert alert.locator(".dlq-count").text_content() == "1"
        assert alert.locator(".dlq-commands").text_content() == (
            "asya dlq show review --local\nasya dlq redrive review --local"
        )
        assert page.locator("[data-dlq]").count() == 1
        assert page.locator('[data-queue="review"] td.dlq-count').text_content() == "1"
        last_error = page.locator('[data-queue="review"]').locator(f'[data-task="{failed}"]')
        last_error.wait_for()  # the newest failed task of the actor, linked (GW-LIST-4: the list lags a little)
        assert "rejected draft about mesh page" in page.locator('[data-queue="review"]').text_content()
        assert page.locator('[data-flow="write"] .stage').all_text_contents() == ["draft", "review"]
        screenshot(page, "mesh")
    finally:
        sqs.purge_queue(QueueUrl=url)


def test_untrusted_task_data_renders_as_inert_text(page: Any, console: Console) -> None:
    """Markup in a payload, FLY text, an error and the list renders as text: no element is created, no script runs."""
    task_id = console.create("write", {"topic": XSS, "words": 2, "fail": True})
    _open(page, console, f"#/task/{task_id}")
    _wait_status(page, "failed")
    page.locator("#fly").filter(has_text=XSS).wait_for()
    assert XSS in page.locator("#error-text").text_content()
    assert json.loads(page.locator("#payload").text_content())["topic"] == XSS
    _open(page, console, "#/tasks")
    page.locator(f'[data-task-row="{task_id}"]').wait_for()
    assert XSS in page.locator(f'[data-task-row="{task_id}"]').text_content()
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img, main script").count() == 0
    screenshot(page, "xss-inert")


def test_gw_task_1_children_of_a_fan_out_are_listed(page: Any, console: Console) -> None:
    """The child tree (P-FAN-7 (R3)): one row per child with its status, current actor and attempt."""
    task_id = console.create("fanout", {"text": "one\ntwo\nthree"})
    _open(page, console, f"#/task/{task_id}")
    _wait_status(page, "succeeded")
    view = console.view(task_id)
    assert len(view["children"]) == 2, view  # three lines: frame 0 carries the task on, two children
    page.reload()  # the children may have finished after the task: the page shows the view as read
    _wait_status(page, "succeeded")
    view = console.view(task_id)
    for child in view["children"]:
        row = page.locator(f'#children [data-child="{child["id"]}"]')
        row.wait_for()
        assert row.locator("[data-status]").get_attribute("data-status") == child["status"]
        assert child["current_actor"] in row.text_content()


def test_history_timeline_of_a_local_task(page: Any, console: Console) -> None:
    task_id = console.create("write", {"topic": "timeline", "words": 1})
    _open(page, console, f"#/task/{task_id}")
    _wait_status(page, "succeeded")
    answer = recorded_history(console.mesh.url, task_id)
    timeline = page.locator("[data-testid=timeline]")
    timeline.wait_for()
    from playwright.sync_api import expect  # the tier skips, not errors, where playwright is missing (conftest)

    steps = answer["steps"]
    # the page loads its timeline on open and again after the terminal status: wait for the latter
    expect(timeline.locator("tbody tr")).to_have_count(len(steps))
    assert [row.locator("td strong").text_content() for row in timeline.locator("tbody tr").all()] == [
        step["actor"] for step in steps
    ]


def test_gw_evt_3_paused_task_shows_a_resume_form_built_from_pause_metadata(
    page: Any, console: Console, gate: Path
) -> None:
    """A paused task (paused by the crew's store write: the producer route refuses ``paused``, GW-EVT-3 R3) gets a
    resume form with one input per P-PAUSE-3 field;
    until pause/resume is built the gateway's answer to the form's POST .../resume is shown as is."""
    # linger holds the task while the test pauses it, however slow the box is
    task_id = console.create("slow", {"topic": "pause me", "seconds": 25, "gate": str(gate)})
    pause = {
        "prompt": "Approve <b>this</b> draft?",
        "fields": [
            {"name": "approved", "type": "boolean", "required": True, "prompt": "Ship it"},
            {"name": "note", "type": "string"},
            {"name": "copies", "type": "integer"},
            {"name": "extra", "type": "object"},
        ],
    }
    store = TaskStore(
        table=console.mesh.resources.table,
        bucket=console.mesh.resources.bucket,
        dynamodb=console.mesh.clients.dynamodb,
        s3=console.mesh.clients.s3,
    )
    assert store.apply(
        task_id, StatusUpdate(status="paused", actor="linger", pause_metadata=pause, remaining_seconds=60)
    ).accepted
    _open(page, console, f"#/task/{task_id}")
    _wait_status(page, "paused")
    form = page.locator("#resume-form")
    form.wait_for()
    assert "Approve <b>this</b> draft?" in form.text_content()
    # a required boolean is an explicit choice, never an unchecked box read as false (issue 28, item 3)
    assert page.locator("#field-approved").evaluate("node => node.tagName") == "SELECT"
    assert page.locator("#field-approved").input_value() == ""
    assert page.locator("#field-note").get_attribute("type") == "text"
    assert page.locator("#field-copies").get_attribute("type") == "number"
    assert page.locator("#field-extra").evaluate("node => node.tagName") == "TEXTAREA"
    assert page.locator("[data-testid=pipeline]").count() == 1  # paused before any claim: no stage is current
    screenshot(page, "task-paused")
    page.fill("#field-copies", "1.5")
    assert page.locator("#field-copies").evaluate("node => node.validity.valid") is False  # integer: step 1
    page.fill("#field-copies", "2")
    page.click("#resume-form button[type=submit]")
    if not _serves_resume(console):
        page.locator("#resume-error").filter(has_text="not found").wait_for()


def _serves_resume(console: Console) -> bool:
    document = httpx.get(f"{console.mesh.url}/openapi.json").json()
    return any(path.endswith("/resume") for path in document["paths"])


def test_gw_resume_1_paused_task_resumes_from_the_form(page: Any, console: Console) -> None:
    """A task that reaches x-pause shows its prompt and a form from its pause fields; submitting it resumes the task
    under the same id (POST .../resume, GW-RESUME-1, P-RESUME-1), which then succeeds with the reviewer's input."""
    assert _serves_resume(console)
    task_id = console.create("approve", {"topic": "spring"})
    _open(page, console, f"#/task/{task_id}")
    _wait_status(page, "paused")
    form = page.locator("#resume-form")
    form.wait_for()
    assert "Approve the text about spring?" in form.text_content()
    state = page.locator("#paused-state")  # what is approved: the state at the pause, not the input (GW-TASK-10)
    state.wait_for()
    assert "The text about spring." in state.text_content()
    assert "The text about spring." not in page.locator("#payload").text_content()
    page.click("#resume-form button[type=submit]")  # nothing chosen: the browser refuses the form, nothing is sent
    assert page.locator("#field-approved").evaluate("node => node.validity.valueMissing") is True
    assert httpx.get(f"{console.mesh.url}/api/v1/mesh/{task_id}").json()["status"] == "paused"
    page.select_option("#field-approved", "true")
    screenshot(page, "task-resume")
    page.click("#resume-form button[type=submit]")
    _wait_status(page, "succeeded")
    view = httpx.get(f"{console.mesh.url}/api/v1/mesh/{task_id}").json()
    assert view["status"] == "succeeded" and view["id"] == task_id
    assert view["result"]["approved"] is True and view["result"]["reviewed"] is True


def test_relative_times_keep_counting_while_the_page_stays_open(page: Any, console: Console) -> None:
    """The tasks page's "Created" column is not frozen at the first render (issue 28, item 4)."""
    page.clock.install()
    task_id = console.create("write", {"topic": "clock", "words": 1})
    _open(page, console, "#/tasks")
    cell = page.locator(f'[data-task-row="{task_id}"] .age')
    cell.wait_for()
    before = cell.text_content()
    page.clock.fast_forward("02:05")
    wait_for(lambda: cell.text_content() != before and cell.text_content().endswith("m ago"), "the age to move on")


def test_tasks_page_lists_rows_before_the_mesh_description_arrives(page: Any, console: Console) -> None:
    """The listing does not wait for the mesh description (queue attributes), and the queue table says it is loading
    until the diagnostic answers (issue 28, item 4)."""
    task_id = console.create("write", {"topic": "early rows", "words": 1})
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route("**/api/v1/system/mesh", hold)
    _open(page, console, "#/tasks")
    page.locator(f'[data-task-row="{task_id}"]').wait_for()
    assert held, "the page never asked for the mesh description"
    for route in held:
        route.continue_()
    page.unroute("**/api/v1/system/mesh")
    page.route("**/api/v1/system/mq-diagnostic", hold)
    _open(page, console, "#/mesh")
    page.locator("#queues tr.loading").wait_for()
    assert page.locator("#queues tr.loading").text_content() == "loading…"


def test_gw_mesh_1_mesh_page_draws_a_flow_written_as_python(page: Any, console: Console) -> None:
    """The mesh page draws a compiled flow as inline SVG (flowgraph.js, no CDN) from GET /api/v1/system/mesh's graph:
    one node per node of the render model, both arms of the branch; a static route keeps its pipeline row."""
    graph = httpx.get(f"{console.mesh.url}/api/v1/system/mesh").json()
    drawn = next(flow for flow in graph["flows"] if flow["name"] == "route")["graph"]
    _open(page, console, "#/mesh")
    drawing = page.locator('[data-flow="route"] svg[data-testid=flow-graph]')
    drawing.wait_for()
    assert drawing.locator("g[data-node]").count() == len(drawn["nodes"])
    assert drawing.locator("g.flow-edge").count() == len(drawn["edges"])
    labels = [node.text_content() for node in drawing.locator("g[data-node] > text").all()]
    assert {"draft", "linger", "review", "state['topic'] == 'long'"} <= set(labels)
    test_node = next(node["id"] for node in drawn["nodes"] if node["kind"] == "test")
    arms = drawing.locator(f'g.flow-edge[data-from="{test_node}"] text')
    assert sorted(arm.text_content() for arm in arms.all()) == ["no", "yes"]
    assert page.locator('[data-flow="write"] svg').count() == 0  # a static route: its pipeline row
    assert page.locator('[data-flow="write"] .pipeline').count() == 1
    screenshot(page, "mesh-flow-graph")


def test_gw_mesh_1_task_page_highlights_the_path_a_finished_task_took(page: Any, console: Console) -> None:
    """A finished task of a compiled flow: the drawing marks the nodes and edges it went through (from its run
    history): draft, the test, the `else` mutation, review and the end; the `linger` arm stays unmarked."""
    task_id = console.create("route", {"topic": "short", "words": 1})
    _open(page, console, f"#/task/{task_id}")
    _wait_status(page, "succeeded")
    drawing = page.locator("#flow svg[data-testid=flow-graph]")
    from playwright.sync_api import expect  # the tier skips, not errors, where playwright is missing (conftest)

    # the path is drawn once the history has loaded after the terminal status: wait for its last edge
    expect(drawing.locator('g.flow-edge[data-to="done"][data-visited="true"]')).to_have_count(1)
    graph = next(f for f in httpx.get(f"{console.mesh.url}/api/v1/system/mesh").json()["flows"] if f["name"] == "route")
    label = {node["id"]: node["label"] for node in graph["graph"]["nodes"]}
    node_ids = "els => els.map(e => e.getAttribute('data-node'))"  # one read: a redraw cannot shift the list under it
    visited = {label[n] for n in drawing.locator('g[data-node][data-visited="true"]').evaluate_all(node_ids)}
    assert visited == {
        "route",
        "draft",
        "state['topic'] == 'long'",
        "state['length'] = 'short'",
        "review",
        "return state",
    }
    unvisited = {label[n] for n in drawing.locator('g[data-node][data-visited="false"]').evaluate_all(node_ids)}
    assert unvisited == {"linger", "state['length'] = 'long'"}
    test_node = next(node["id"] for node in graph["graph"]["nodes"] if node["kind"] == "test")
    taken = drawing.locator(f'g.flow-edge[data-from="{test_node}"][data-visited="true"] text')
    assert [arm.text_content() for arm in taken.all()] == ["no"]
    screenshot(page, "task-flow-path")


def _recorded_steps(console: Console, task_id: str, count: int) -> list[dict[str, Any]]:
    def ready() -> bool:
        answer = httpx.get(f"{console.mesh.url}/api/v1/mesh/{task_id}/history", headers=console.headers)
        return answer.status_code == 200 and len(answer.json()["steps"]) >= count

    wait_for(ready, "the recorded history")
    steps: list[dict[str, Any]] = httpx.get(
        f"{console.mesh.url}/api/v1/mesh/{task_id}/history", headers=console.headers
    ).json()["steps"]
    return steps


def _new_task_opened(page: Any, old: str) -> str:
    """The id of the task page the console opened after a retry. Polled with Playwright's own wait, which lets the
    confirmation dialog's handler run (a plain sleep would leave ``confirm`` blocking the page); no eval: the
    console's CSP forbids it."""
    for _ in range(600):  # a bound of about 60 s, not a timing assertion
        if "#/task/" in page.url and old not in page.url:
            return unquote(page.url.rsplit("/", 1)[-1])
        page.wait_for_timeout(100)
    raise AssertionError(f"no new task page: {page.url}, banner {page.locator('#banner').text_content()!r}")


def test_gw_hist_2_retry_buttons_of_a_failed_task_start_new_linked_tasks(page: Any, console: Console) -> None:
    """Retry and Retry-from-here POST /api/v1/mesh/{id}/retry after a confirmation, then open the new task; the
    retry from review's step runs review alone, with the input review received (P-HIST-6)."""
    failed = console.create("recorded", {"topic": "again", "words": 1, "fail": True})
    wait_for(lambda: console.view(failed)["status"] == "failed", "the failing task")
    steps = _recorded_steps(console, failed, 2)
    _open(page, console, f"#/task/{failed}")
    _wait_status(page, "failed")
    page.locator('.retry-from[data-hop="1"]').wait_for()
    assert page.locator(".retry-from").count() == 2
    page.once("dialog", lambda dialog: dialog.accept())
    page.click('.retry-from[data-hop="1"]')
    retried = _new_task_opened(page, failed)
    wait_for(lambda: console.view(retried)["status"] == "failed", "the retried task")
    (review,) = _recorded_steps(console, retried, 1)
    assert (review["actor"], review["hop"], review["input"]) == ("review", 1, steps[1]["input"])
    assert review["headers"]["retry_of"] == failed
    _open(page, console, f"#/task/{failed}")
    _wait_status(page, "failed")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#retry")
    again = _new_task_opened(page, failed)
    assert again not in (failed, retried) and console.view(again)["payload"]["topic"] == "again"


def test_gw_dlq_1_redrive_button_moves_the_dlq_back_after_a_confirmation(page: Any, console: Console) -> None:
    sqs = console.mesh.clients.sqs
    dlq = sqs.get_queue_url(QueueName="asya-console-linger-dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"id": "dead-letter", "payload": {}}))
    _open(page, console, "#/mesh")
    button = page.locator('.redrive[data-actor="linger"]')
    button.wait_for()
    page.once("dialog", lambda dialog: dialog.dismiss())
    button.click()  # dismissed: nothing moves
    assert sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
        "ApproximateNumberOfMessages"] == "1"  # fmt: skip
    page.once("dialog", lambda dialog: dialog.accept())
    button.click()
    page.locator("#banner").filter(has_text="redrive: 1 message(s) moved back to linger").wait_for()
    page.locator('[data-dlq="linger"]').wait_for(state="detached")
