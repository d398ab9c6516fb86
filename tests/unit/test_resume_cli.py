"""``asya resume`` arguments and the paused-task helpers of ``asya_local.resume_cli`` (GATEWAY GW-RESUME-1,
PROTOCOL P-PAUSE-3)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from asya_local.cli import main
from asya_local.resume_cli import ask_input, describe_pause


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env={}, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_resume_help_documents_every_option() -> None:
    code, out, _ = _run("resume", "--help")
    assert code == 0
    for option in ("--input INPUT_JSON", "--input-file INPUT_FILE", "--timeout TIMEOUT", "--url URL"):
        assert option in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["resume", "t1"], "one of the arguments --input --input-file is required"),
        (["resume", "t1", "--input", "{}", "--input-file", "x"], "not allowed with argument"),
        (["resume", "t1", "--input", "{oops"], "asya: --input: not a JSON object"),
        (["resume", "t1", "--input-file", "/no/such/file"], "asya: --input: not a JSON object"),
    ],
)
def test_resume_usage_errors_exit_2(argv: list[str], message: str) -> None:
    code, _, err = _run(*argv)
    assert code == 2
    assert message in err


def _answers(*lines: str) -> tuple[Any, list[str]]:
    said: list[str] = []
    feed: Iterator[str] = iter(lines)
    return (lambda _prompt: next(feed)), said


def test_ask_input_types_every_field_and_asks_again_on_a_bad_answer() -> None:
    metadata = {
        "prompt": "p",
        "fields": [
            {"name": "ok", "type": "boolean", "required": True},
            {"name": "i", "type": "integer"},
            {"name": "n", "type": "number"},
            {"name": "o", "type": "object"},
            {"name": "l", "type": "array"},
            {"name": "s"},
        ],
    }
    ask, said = _answers("", "no", "1.5", "3", "2.5", "[1]", '{"a": 1}', "[2]", "")
    assert ask_input(metadata, ask, said.append) == {"ok": False, "i": 3, "n": 2.5, "o": {"a": 1}, "l": [2]}
    assert said == ["ok is required\n", "not an integer: '1.5'\n", "not a JSON object: '[1]'\n"]


def test_ask_input_without_fields_takes_one_json_object() -> None:
    ask, said = _answers("nope", "[1]", '{"x": 1}')
    assert ask_input({"prompt": "p", "fields": []}, ask, said.append) == {"x": 1}
    assert said[1] == "the input must be a JSON object\n"


def test_describe_pause_shows_prompt_fields_and_budget() -> None:
    view = {
        "id": "t1",
        "status": "paused",
        "remaining_seconds": 42,
        "pause_metadata": {"prompt": "Check", "fields": [{"name": "ok", "type": "boolean", "required": True}]},
    }
    assert describe_pause(view) == (
        "paused: Check\n"
        "  ok (boolean, required)\n"
        "  42 s of the task's time remain once resumed\n"
        "resume with: asya resume t1 --input '{...}'\n"
    )


def test_gw_signal_1_a_task_waiting_for_an_event_is_shown_with_the_signal_command() -> None:
    view = {"id": "t1", "pause_metadata": {"prompt": "Waiting for event 'paid'", "fields": [], "event": "paid"}}
    text = describe_pause(view)
    assert "paused: Waiting for event 'paid'" in text
    assert "signal with: asya signal t1 paid --data '...'" in text
    assert "asya resume" not in text
