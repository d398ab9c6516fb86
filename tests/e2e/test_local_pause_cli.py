"""``asya call`` on a flow that pauses, ``asya status`` of a paused task and ``asya resume``, against the local mesh
(GATEWAY section 9, PROTOCOL 12.4; the CLI's ``asya_local.resume_cli``)."""

from __future__ import annotations

import io
import json
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
