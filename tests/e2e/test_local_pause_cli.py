"""``asya call`` on a flow that pauses, ``asya status`` of a paused task and ``asya resume``, against the local mesh
(GATEWAY section 9, PROTOCOL 12.4; the CLI's ``asya_local.resume_cli``)."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest

from asya_local.cli import main
from asya_local.mesh import LocalMesh
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

FLOW = "reviewed-text"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(*argv: str, url: str, stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env={"ASYA_URL": url}, stdout=out, stderr=err, stdin=stdin or io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _view(url: str, task_id: str) -> dict[str, Any]:
    code, out, _ = _run("status", task_id, url=url)
    assert code == 0
    view: dict[str, Any] = json.loads(out)
    return view


def test_call_shows_the_prompt_then_status_and_resume_finish_the_task(local_mesh: LocalMesh) -> None:
    url = local_mesh.url
    code, out, err = _run("call", FLOW, "--payload", json.dumps({"text": "A GREAT day"}), url=url)
    assert code == 1, "paused is not success: the task waits for `asya resume`"
    view = json.loads(out)
    task_id = view["id"]
    assert view["status"] == "paused"
    assert "paused: Publish this positive text?" in err
    assert "  approved (boolean, required): Publish it?" in err
    assert "  note (string): A note for the record" in err
    assert f"resume with: asya resume {task_id} --input '{{...}}'" in err

    code, out, err = _run("status", task_id, url=url)
    assert code == 0 and json.loads(out)["status"] == "paused"
    assert err.startswith("paused: Publish this positive text?")

    code, _, err = _run("resume", task_id, "--input", "[1]", url=url)
    assert (code, err) == (2, "asya: --input: must be a JSON object, got list\n")
    code, _, err = _run("resume", task_id, "--input", '{"note": "x"}', url=url)
    assert (code, err) == (2, "asya: missing required field 'approved'\n")
    code, out, _ = _run("resume", task_id, "--input", '{"approved": false}', url=url)
    assert code == 0 and json.loads(out)["status"] == "running"
    done = wait_for(lambda: (v := _view(url, task_id))["status"] == "succeeded" and v, "the task to succeed")
    assert done["result"]["published"] is False

    code, _, err = _run("resume", "no-such-task", "--input", "{}", url=url)
    assert code == 2 and err.startswith("asya: task no-such-task not found at ")


def test_call_on_a_terminal_asks_for_the_input_and_follows_to_the_end(local_mesh: LocalMesh) -> None:
    answers = _Terminal("maybe\ny\nshipped it\n")  # "maybe" is no boolean: asked again
    code, out, err = _run(
        "call", FLOW, "--payload", json.dumps({"text": "nice work"}), url=local_mesh.url, stdin=answers
    )
    assert code == 0, err
    view = json.loads(out)
    assert view["status"] == "succeeded"
    assert view["result"]["published"] is True
    assert view["result"]["review"] == {"note": "shipped it"}
    assert "Publish it? (boolean, required): answer y or n\nPublish it? (boolean, required): " in err
    assert "resumed\n" in err


def _sse_blocks(out: str) -> tuple[list[str], list[str]]:
    """``(the comment lines before the first event, the event blocks)`` of a watch transcript."""
    blocks = [block for block in out.split("\n\n") if block.strip()]
    comments = []
    while blocks and all(line.startswith(":") for line in blocks[0].splitlines()):
        comments.extend(blocks.pop(0).splitlines())
    return comments, blocks


def test_watch_of_a_paused_task_returns_saying_how_to_resume(local_mesh: LocalMesh) -> None:
    """``paused`` is not terminal (GW-SSE-7): the stream stays open until someone resumes the task, so ``asya watch``
    never returned. It ends at the paused status event, with the prompt and the resume command, as ``asya call``
    does."""
    url = local_mesh.url
    code, out, _ = _run("call", FLOW, "--payload", json.dumps({"text": "A GREAT day"}), "--no-wait", url=url)
    assert code == 0
    task_id = out.strip()
    wait_for(lambda: _view(url, task_id)["status"] == "paused", "the task to pause")
    result: dict[str, Any] = {}
    watcher = threading.Thread(
        target=lambda: result.update(zip(("code", "out", "err"), _run("watch", task_id, url=url), strict=True))
    )
    watcher.start()
    try:
        wait_for(lambda: not watcher.is_alive(), "asya watch to return on the paused task")
    finally:
        if watcher.is_alive():  # the defect: end the task, which ends the stream, so the thread can be joined
            _run("resume", task_id, "--input", '{"approved": false}', url=url)
        watcher.join()
    assert result["code"] == 0, result["err"]
    _, blocks = _sse_blocks(result["out"])
    assert json.loads(blocks[-1].splitlines()[-1].removeprefix("data: "))["status"] == "paused"
    assert "paused: Publish this positive text?" in result["err"]
    assert f"resume with: asya resume {task_id} --input '{{...}}'" in result["err"]
    assert _view(url, task_id)["status"] == "paused"  # watching changed nothing


def test_watch_replays_the_steps_before_it_connected(local_mesh: LocalMesh) -> None:
    """The stream starts at the task as it is now (GW-SSE-4): a watch of a task well under way showed none of its
    earlier steps. ``asya watch`` first prints the run history so far (``history: steps``, or ``asya dev``'s), as SSE
    comment lines, so the transcript stays a valid event stream."""
    url = local_mesh.url
    code, out, err = _run("call", "sentences", "--payload", json.dumps({"text": "One. Two."}), url=url)
    assert code == 0, err
    task_id = json.loads(out)["id"]
    code, out, err = _run("watch", task_id, url=url)
    assert code == 0, err
    comments, blocks = _sse_blocks(out)
    assert comments[0] == f": the run of {task_id} before this watch (asya history {task_id}):"
    steps = [line for line in comments if "  attempt " in line]
    assert [line.split()[4] for line in steps[:1]] == ["split"]
    assert any(" analyze " in line for line in steps)
    assert blocks[0].startswith("retry: 1000\nevent: status\ndata: ")  # then the stream as before

    code, out, err = _run("call", FLOW, "--payload", json.dumps({"text": "fine"}), "--no-wait", url=url)
    task_id = out.strip()
    wait_for(lambda: _view(url, task_id)["status"] == "paused", "the task to pause")
    code, out, err = _run("watch", task_id, url=url)
    comments, _ = _sse_blocks(out)
    assert comments == []  # a flow without history: steps, outside asya dev: nothing recorded to replay
    assert f"no run history of {task_id} to replay" in err
    _run("resume", task_id, "--input", '{"approved": false}', url=url)
