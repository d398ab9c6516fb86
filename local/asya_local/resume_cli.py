"""``asya resume``, ``asya signal`` and what ``asya call``/``asya status`` show of a paused task (GW-RESUME-1..4,
GW-SIGNAL-1..4, P-PAUSE-3).

::

    asya resume ID (--input JSON | --input-file PATH) [--timeout S] [--url URL]
    asya signal ID EVENT [--data JSON | --data-file PATH] [--url URL]

``--input`` is the resume input, a JSON object (GW-RESUME-1); ``--input-file -`` reads it from stdin. ``--timeout``
replaces the task's frozen budget (``remaining_seconds``). The gateway's answer is printed as JSON; its errors (404
unknown id, 409 not paused or not stored yet, 400 naming a field) exit 2 with the gateway's message. ``asya signal``
delivers event ``EVENT`` with ``--data`` (any JSON, default ``null``) to the task's ``wait_for``, or has the gateway
buffer it until one waits (P-WAIT-5); it prints the answer, whose ``delivered`` says which.

:func:`describe_pause` renders the prompt and the fields of ``pause_metadata`` (P-PAUSE-3) for a human;
:func:`ask_input` reads the input field by field from a terminal: ``boolean`` takes y/n/yes/no/true/false,
``integer``/``number`` a number, ``object``/``array`` JSON, ``string`` the text as typed; an empty answer skips an
optional field and asks again for a required one. Without fields it asks for one JSON object.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TextIO

from asya_local.client import GatewayClient

if TYPE_CHECKING:
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["add_resume_parser", "add_signal_parser", "ask_input", "describe_pause", "handle_pause"]

_YES: Final = frozenset({"y", "yes", "true"})
_NO: Final = frozenset({"n", "no", "false"})


class _Io(Protocol):
    out: TextIO
    err: TextIO

    def print_json(self, value: Any) -> None: ...


def add_resume_parser(commands: _Commands, remote: argparse.ArgumentParser) -> None:
    """Add ``resume`` to the CLI's sub-commands; ``remote`` is the parent parser holding ``--url``."""
    resume = commands.add_parser("resume", parents=[remote], help="resume a paused task with its input")
    resume.add_argument("id", help="task id")
    given = resume.add_mutually_exclusive_group(required=True)
    given.add_argument("--input", dest="input_json", help="the input as a JSON object")
    given.add_argument("--input-file", help="a file holding the input as a JSON object ('-': stdin)")
    resume.add_argument("--timeout", type=int, default=None, help="new task timeout in seconds (default: the rest)")
    resume.set_defaults(run=_resume)


def _resume(args: argparse.Namespace, io: _Io) -> int:
    try:
        text = args.input_json if args.input_json is not None else _read(args.input_file)
        value = json.loads(text)
    except (OSError, ValueError) as exc:
        io.err.write(f"asya: --input: not a JSON object: {exc}\n")
        return 2
    if not isinstance(value, dict):
        io.err.write(f"asya: --input: must be a JSON object, got {type(value).__name__}\n")
        return 2
    with args.client() as client:
        io.print_json(client.resume(args.id, value, timeout=args.timeout))
    return 0


def add_signal_parser(commands: _Commands, remote: argparse.ArgumentParser) -> None:
    """Add ``signal`` to the CLI's sub-commands; ``remote`` is the parent parser holding ``--url``."""
    signal = commands.add_parser("signal", parents=[remote], help="deliver a named event to a task's wait_for")
    signal.add_argument("id", help="task id")
    signal.add_argument("event", help="the event's name")
    given = signal.add_mutually_exclusive_group()
    given.add_argument("--data", dest="data_json", help="the event's data as JSON (default: null)")
    given.add_argument("--data-file", help="a file holding the data as JSON ('-': stdin)")
    signal.set_defaults(run=_signal)


def _signal(args: argparse.Namespace, io: _Io) -> int:
    try:
        text = args.data_json if args.data_json is not None else _read(args.data_file) if args.data_file else "null"
        value = json.loads(text)
    except (OSError, ValueError) as exc:
        io.err.write(f"asya: --data: not JSON: {exc}\n")
        return 2
    with args.client() as client:
        io.print_json(client.signal(args.id, args.event, value))
    return 0


def _read(path: str) -> str:
    if path == "-":
        import sys

        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def describe_pause(view: Mapping[str, Any]) -> str:
    """The prompt, the fields and the frozen budget of a paused task view, for a terminal."""
    metadata = view.get("pause_metadata") if isinstance(view.get("pause_metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    lines = [f"paused: {metadata.get('prompt', 'Task paused')}"]
    for field in metadata.get("fields") or []:
        if not isinstance(field, Mapping):
            continue
        kind = field.get("type", "string")
        required = ", required" if field.get("required") else ""
        prompt = f": {field['prompt']}" if field.get("prompt") else ""
        lines.append(f"  {field.get('name')} ({kind}{required}){prompt}")
    remaining = view.get("remaining_seconds")
    if remaining is not None:
        lines.append(f"  {remaining} s of the task's time remain once resumed")
    if isinstance(metadata.get("event"), str):
        lines.append(f"signal with: asya signal {view.get('id')} {metadata['event']} --data '...'")
    else:
        lines.append(f"resume with: asya resume {view.get('id')} --input '{{...}}'")
    return "\n".join(lines) + "\n"


def ask_input(metadata: Mapping[str, Any], ask: Callable[[str], str], say: Callable[[str], object]) -> dict[str, Any]:
    """Read the resume input interactively, one field at a time (``ask(prompt)`` returns the line typed)."""
    fields = [f for f in metadata.get("fields") or [] if isinstance(f, Mapping) and isinstance(f.get("name"), str)]
    if not fields:
        while True:
            try:
                value = json.loads(ask("input (a JSON object, empty for {}): ") or "{}")
            except ValueError as exc:
                say(f"not JSON: {exc}\n")
                continue
            if isinstance(value, dict):
                return value
            say("the input must be a JSON object\n")
    answers: dict[str, Any] = {}
    for field in fields:
        name, kind = str(field["name"]), str(field.get("type", "string"))
        label = field.get("prompt") or name
        while True:
            raw = ask(f"{label} ({kind}{', required' if field.get('required') else ''}): ").strip()
            if not raw:
                if field.get("required"):
                    say(f"{name} is required\n")
                    continue
                break
            try:
                answers[name] = _typed(raw, kind)
                break
            except ValueError as exc:
                say(f"{exc}\n")
    return answers


def _typed(raw: str, kind: str) -> Any:
    if kind == "boolean":
        if raw.lower() in _YES:
            return True
        if raw.lower() in _NO:
            return False
        raise ValueError("answer y or n")
    if kind == "integer":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"not an integer: {raw!r}") from None
    if kind == "number":
        try:
            number = float(raw)
        except ValueError:
            raise ValueError(f"not a number: {raw!r}") from None
        return int(number) if number.is_integer() and "." not in raw else number
    if kind in ("object", "array"):
        value = json.loads(raw)
        if not isinstance(value, dict if kind == "object" else list):
            raise ValueError(f"not a JSON {kind}: {raw!r}")
        return value
    return raw


def handle_pause(client: GatewayClient, view: Mapping[str, Any], *, stdin: TextIO, err: TextIO) -> bool:
    """``asya call`` met a paused task: show the prompt and fields; on a terminal read the input and resume (True),
    else leave it paused (False)."""
    err.write(describe_pause(view))
    err.flush()
    if not stdin.isatty():
        return False

    def ask(prompt: str) -> str:
        err.write(prompt)
        err.flush()
        return stdin.readline().rstrip("\n")

    metadata = view.get("pause_metadata") if isinstance(view.get("pause_metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    answers = ask_input(metadata, ask, err.write)
    client.resume(str(view["id"]), answers)
    err.write("resumed\n")
    return True
