"""Argument handling of the ``asya`` CLI and its progress rendering (no gateway needed)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from asya_local.cli import main
from asya_local.progress import ProgressView, render_bar
from asya_local.sse import SseEvent

pytestmark = pytest.mark.unit


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env={}, stdout=out, stderr=err, cwd=Path(__file__).resolve().parent)
    return code, out.getvalue(), err.getvalue()


def test_help_goes_to_stdout_and_exits_0() -> None:
    code, out, _ = _run("--help")
    assert code == 0
    for command in ("dev", "call", "status", "watch", "demo"):
        assert command in out


@pytest.mark.parametrize(
    "command",
    [["dev"], ["call"], ["status"], ["watch"], ["demo"], ["dlq", "list"], ["dlq", "show"], ["dlq", "redrive"]],
)
def test_every_argument_has_help_text(command: list[str]) -> None:
    """``asya dev --help`` used to list ``--host HOST`` (and ``demo`` its options) with no word on what they do."""
    code, out, _ = _run(*command, "--help")
    assert code == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(":") and not line.startswith(" ") and i > 0)
    entries = [i for i in range(start, len(lines)) if re.match(r"^  \S", lines[i])]
    assert entries
    undocumented = [
        lines[i].strip()
        for i in entries
        if not re.search(r"\S\s{2,}\S", lines[i].strip())
        and not (i + 1 < len(lines) and re.match(r"^ {3,}\S", lines[i + 1]))
    ]
    assert undocumented == []


def test_missing_command_is_a_usage_error() -> None:
    code, _, err = _run()
    assert code == 2
    assert "usage: asya" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["call", "text-pipeline", "--payload", "{not json"], "invalid JSON '{not json'"),
        (["call", "text-pipeline", "--timeout", "0"], "must be >= 1, got '0'"),
        (["call", "text-pipeline", "--timeout", "soon"], "must be an integer number of seconds, got 'soon'"),
        (["dev", "--port", "http"], "argument --port: 'http' is not a port: use 0..65535"),
        (["dlq", "show", "a", "--max", "0"], "argument --max: must be >= 1, got '0'"),
        (["dlq", "show", "a", "--max", "ten"], "argument --max: must be an integer, got 'ten'"),
        (["dlq", "redrive", "a", "--wait", "soon"], "--wait: must be an integer number of seconds, got 'soon'"),
    ],
)
def test_bad_arguments_name_the_value(argv: list[str], message: str) -> None:
    code, _, err = _run(*argv)
    assert code == 2
    assert message in err


@pytest.mark.parametrize("argv", [["call"], ["call", "text-pipeline", "--actor", "normalize"]])
def test_call_needs_exactly_one_of_flow_and_actor(argv: list[str]) -> None:
    code, _, err = _run(*argv, "--url", "http://127.0.0.1:1")
    assert code == 2
    assert "give exactly one of FLOW and --actor NAME" in err


def test_missing_manifest_is_one_readable_line() -> None:
    code, _, err = _run("dev", "--manifest", "/nonexistent/asya.yaml")
    assert code == 2
    assert err.strip() == "asya: manifest not found: /nonexistent/asya.yaml (pass --manifest PATH)"


def test_render_bar_clamps_and_formats() -> None:
    assert render_bar(50, width=10) == "[#####-----]  50.0%"
    assert render_bar(150, width=4) == "[####] 100.0%"
    assert render_bar(-3, width=4) == "[----]   0.0%"


def _event(name: str, data: object) -> SseEvent:
    return SseEvent(event=name, data=json.dumps(data))


def test_progress_view_on_a_tty_redraws_the_bar_with_partial_output() -> None:
    out = io.StringIO()
    view = ProgressView(out, tty=True, columns=120)
    view.on_event(
        _event(
            "status", {"status": "running", "progress_percent": 50.0, "current_actor": "analyze", "step": "processing"}
        )
    )
    view.on_event(_event("fly", {"payload": "A friendly", "actor": "summarize"}))
    view.on_event(_event("fly", {"payload": " greeting.", "actor": "summarize"}))
    view.on_event(_event("status", {"status": "succeeded", "progress_percent": 100}))
    view.finish()
    text = out.getvalue()
    assert "\r\x1b[K[" in text
    assert "50.0%  analyze  processing" in text
    assert "| A friendly greeting." in text
    assert text.endswith("100.0%  succeeded\npartial output: A friendly greeting.\n")
    assert view.partial_output == "A friendly greeting."


def test_progress_view_without_a_tty_writes_everything_in_event_order() -> None:
    """GW-SSE-11: FLY text is streamed as text, any other value is one JSON line; status lines come in event order,
    one per change, and text that did not end its line is ended before the next status line."""
    out = io.StringIO()
    view = ProgressView(out, tty=False)
    view.on_event(_event("status", {"status": "pending", "progress_percent": 0}))
    running = {"status": "running", "progress_percent": 50.0, "current_actor": "summarize", "step": "processing"}
    view.on_event(_event("status", running))
    view.on_event(_event("status", running))  # nothing changed: no new line
    view.on_event(_event("fly", {"payload": "Here"}))
    view.on_event(_event("fly", {"payload": " is"}))
    view.on_event(_event("fly", {"payload": {"token": "Here", "i": 0}}))
    view.on_event(_event("fly", {"payload": {"token": " is", "i": 1}}))
    view.on_event(_event("status", {"status": "succeeded", "progress_percent": 100}))
    view.on_event(_event("fly", {"payload": " late"}))
    view.finish()
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines() == [
        f"{render_bar(0)}  pending",
        f"{render_bar(50)}  summarize  processing",
        "Here is",
        '{"token": "Here", "i": 0}',
        '{"token": " is", "i": 1}',
        f"{render_bar(100)}  succeeded",
        " late",
    ]
    assert out.getvalue().endswith(" late\n")
    assert view.partial_output == 'Here is\n{"token": "Here", "i": 0}\n{"token": " is", "i": 1}\n late'


def test_progress_view_writes_each_event_as_it_arrives() -> None:
    """Outside a terminal nothing is held back: FLY text is on the stream before the next event arrives."""
    out = io.StringIO()
    view = ProgressView(out, tty=False)
    view.on_event(_event("fly", {"payload": "tok"}))
    assert out.getvalue() == "tok"


def test_progress_view_failed_line_shows_the_error_and_retry_line_the_attempt() -> None:
    """GW-TASK-2 status data: a failed status carries ``error`` and ``failed_actor``, a ``retrying`` step
    ``attempt``, ``delay_seconds`` and ``error``; the progress line shows them."""
    out = io.StringIO()
    view = ProgressView(out, tty=False)
    retrying = {
        "status": "running",
        "progress_percent": 50.0,
        "current_actor": "flaky",
        "step": "retrying",
        "attempt": 2,
        "delay_seconds": 1,
        "error": "ValueError: not yet",
    }
    view.on_event(_event("status", retrying))
    failed = {"status": "failed", "progress_percent": 50.0, "error": "RuntimeError: boom", "failed_actor": "flaky"}
    view.on_event(_event("status", failed))
    view.finish()
    assert out.getvalue().splitlines() == [
        f"{render_bar(50)}  flaky  retrying  attempt 2 in 1 s: ValueError: not yet",
        f"{render_bar(50)}  failed  RuntimeError: boom (at flaky)",
    ]
