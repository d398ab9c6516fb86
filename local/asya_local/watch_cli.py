"""``asya watch ID [ID...]``: a task's (or several tasks') SSE events as they arrive, as an SSE transcript on stdout.

- **Before the stream**, the run of each task so far: the stream starts at the task as it is now (GW-SSE-4, the
  ``fly`` values kept are replayed, GW-SSE-5, but no earlier status), so ``watch`` first prints the task's run history
  (``GET /api/v1/mesh/{id}/history`` of a flow with ``history: steps``, else ``asya dev``'s, as ``asya history``
  renders it) as SSE comment lines, which keeps the transcript a valid event stream. A task with no history to
  replay says so on stderr.
- **The stream**: each event as the gateway sent it; with one id, its children's retries and failures as comment
  lines (``asya_local.childwatch``, GW-TASK-9).
- **The end**: the stream ends at a terminal status (GW-SSE-7). ``paused`` is not terminal, and nothing moves until
  someone resumes the task, so ``watch`` also returns once every task it follows is terminal or paused, with each
  paused task's prompt and ``asya resume`` command on stderr (as ``asya call`` and ``asya status`` say them).

Exit status 0 (the watch ended); HTTP and connection errors are the CLI's (2).
"""

from __future__ import annotations

import argparse
from typing import Any

from asya_local.childwatch import ChildWatch
from asya_local.client import GatewayClient
from asya_local.cliio import CliIo
from asya_local.exceptions import GatewayHttpError
from asya_local.resume_cli import describe_pause
from asya_local.sse import TERMINAL_STATUSES, SseEvent
from asya_local.tasks_cli import render_history

__all__ = ["watch"]

_PAUSED = "paused"


def watch(args: argparse.Namespace, io: CliIo) -> int:
    ids: list[str] = args.id
    with args.client() as client:
        for task_id in ids:
            _replay(client, task_id, io)
        stream = client.events(ids[0]) if len(ids) == 1 else client.watch(ids)
        # one task followed: its children's retries and failures as SSE comment lines (GW-TASK-9)
        children = (
            ChildWatch(lambda: client.get(ids[0]), lambda text: io.out.writelines((": ", text, "\n\n")))
            if len(ids) == 1
            else None
        )
        statuses: dict[str, str] = {}
        for event in stream.events():
            _write(event, io)
            if children is not None:
                children.poll()
            io.out.flush()
            if event.event == "status":
                data = event.json()
                statuses[str(data.get("task_id") or ids[0])] = str(data.get("status"))
                if _all_stopped(ids, statuses):
                    break  # every task is terminal or waits for a resume: the stream would only send keepalives
        if children is not None:
            children.update(client.get(ids[0]))
            io.out.flush()
        for task_id in ids:
            if statuses.get(task_id) == _PAUSED:
                io.err.write(f"task {task_id} is paused\n" + describe_pause(client.get(task_id)))
                io.err.flush()
    return 0


def _replay(client: GatewayClient, task_id: str, io: CliIo) -> None:
    try:
        history = client.history(task_id)
    except GatewayHttpError as exc:
        # the watch goes on without the replay: the stream itself does not need the history
        why = (
            "a flow with history: steps, or asya dev, records one"
            if exc.status_code == 404
            else f"HTTP {exc.status_code}: {exc.message}"
        )
        io.note(f"asya watch: no run history of {task_id} to replay ({why}); the stream shows the task from now on")
        return
    lines = render_history(history)
    if not lines:
        return
    io.out.write(f": the run of {task_id} before this watch (asya history {task_id}):\n")
    io.out.writelines(f": {line}\n" for line in lines)
    io.out.write("\n")
    io.out.flush()


def _write(event: SseEvent, io: CliIo) -> None:
    if event.retry is not None:
        io.out.write(f"retry: {event.retry}\n")
    if event.id is not None:
        io.out.write(f"id: {event.id}\n")
    io.out.write(f"event: {event.event}\n")
    io.out.writelines(f"data: {line}\n" for line in event.data.split("\n"))
    io.out.write("\n")


def _all_stopped(ids: list[str], statuses: dict[str, Any]) -> bool:
    """Every task is terminal or paused, and one at least is paused (a stream of terminal tasks ends by itself)."""
    known = [statuses.get(task_id) for task_id in ids]
    return _PAUSED in known and all(s in TERMINAL_STATUSES or s == _PAUSED for s in known)
