"""``asya list``, ``cancel``, ``retry``, ``checkpoint`` and ``history``: the task commands of the CLI.

::

    asya list       [--status S] [--flow F] [--limit N] [--cursor C] [--json]   newest first, one line per task
    asya cancel     ID                                                            DELETE the task, print its status
    asya retry      ID [--from STEP] [--timeout S]                                a new task with ID's input
    asya checkpoint ID [--raw] [--region R]                                       the task's (and children's) lines
    asya history    ID [--json]                                                   the local run history (asya dev)

Every command takes ``--url`` and ``--manifest`` (which running ``asya dev`` to talk to; ``asya_local.discovery``).

- ``retry`` creates a task on the failed task's flow (or entry actor) with its input payload (the view's ``payload``,
  or the object behind ``payload_url`` when it was offloaded) and the header ``retry_of: <ID>``: client headers named
  ``x-asya-*`` are reserved to the mesh (GW-CREATE-5), so the link is an ordinary header that travels with the
  envelope to every actor. It retries any terminal task, not only failed ones (a replay), and refuses one that is
  still running. ``--from STEP`` (a hop index, ``ACTOR[#n]`` with a map's slices counted, or a child's id) asks the
  gateway's ``POST /api/v1/mesh/{id}/retry`` to start the new task at that recorded step, with the input it received
  (GW-HIST-2, a flow with ``history: steps``; from a fan-out slice, that slice runs again and its siblings' results
  are reused, P-HIST-9); a STEP that does not parse is a usage error before any request.
- ``checkpoint`` reads the object named by the view's ``checkpoint_uri`` and prints its line ``checkpoint_line``
  (1-based; checkpoints are JSON Lines, one envelope per line), pretty-printed, or as stored with ``--raw``. The
  object is read from the running ``asya dev``'s moto when the gateway is one, else from S3 with the default AWS
  credential chain. Then each fan-out child's line that the view's child tree names (P-FAN-9), after a
  ``# child ID (STATUS) at ACTOR`` line (with ``--raw``: the lines alone); a child without a line yet is listed as
  such. A task without a line of its own but with children's lines prints those and exits 0.
- ``history`` prints each step of a task's run: hop, actor, attempt, duration, input, outputs, error, children
  indented under the step that sent them. It reads the history recorded in S3 (``GET /api/v1/mesh/{id}/history``, a
  flow with ``history: steps``, in AWS and locally), else ``asya dev``'s in-memory one.

Exit codes: 0 done; 1 ``cancel`` found the task already terminal (it keeps its status), ``retry`` of a running task,
``checkpoint`` of a task without one; 2 usage and HTTP errors.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from asya.historyread import StepError, parse_step
from asya_local.client import GatewayClient
from asya_local.cliio import CliIo, compact_json
from asya_local.exceptions import LocalModeError
from asya_local.moto_server import make_clients
from asya_local.sse import TERMINAL_STATUSES

if TYPE_CHECKING:
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["RETRY_HEADER", "add_task_parsers", "render_history"]

#: The header linking a retried task to the one it retries (not ``x-asya-*``: reserved, GW-CREATE-5).
RETRY_HEADER: Final = "retry_of"
_STATUSES: Final = ("pending", "running", "paused", "succeeded", "failed", "canceled")
_ID_WIDTH: Final = 36

ClientFactory = Callable[[argparse.Namespace], GatewayClient]


def add_task_parsers(commands: _Commands, remote: argparse.ArgumentParser) -> None:
    """Add the task commands to the CLI; ``remote`` is the parent parser with ``--url`` and ``--manifest``."""
    listing = commands.add_parser("list", parents=[remote], help="list tasks, newest first")
    listing.add_argument("--status", choices=_STATUSES, help="only tasks with this status")
    listing.add_argument("--flow", help="only tasks of this flow")
    listing.add_argument("--limit", type=_limit, default=20, help="tasks per page, 1..100 (default 20)")
    listing.add_argument("--cursor", help="the next_cursor of the previous page")
    listing.add_argument("--json", action="store_true", help="print the gateway's answer as JSON")
    listing.set_defaults(run=_list)

    cancel = commands.add_parser("cancel", parents=[remote], help="cancel a task")
    cancel.add_argument("id", help="task id")
    cancel.set_defaults(run=_cancel)

    retry = commands.add_parser("retry", parents=[remote], help="run a finished task's input again, as a new task")
    retry.add_argument("id", help="id of the task to retry")
    retry.add_argument("--timeout", type=int, default=None, help="the new task's timeout in seconds")
    retry.add_argument(
        "--from",
        dest="step",
        type=_step,
        default=None,
        metavar="STEP",
        help="start at a recorded step (history: steps): a hop index, ACTOR[#n] for the actor's n-th run (fan-out "
        "slices count), or a child's id (a slice runs again, its siblings' results are reused)",
    )
    retry.set_defaults(run=_retry)

    checkpoint = commands.add_parser("checkpoint", parents=[remote], help="print a task's checkpoint line")
    checkpoint.add_argument("id", help="task id")
    checkpoint.add_argument("--raw", action="store_true", help="the line as stored, not pretty-printed")
    checkpoint.add_argument("--region", help="AWS region of the bucket (default: the AWS profile's)")
    checkpoint.set_defaults(run=_checkpoint)

    history = commands.add_parser("history", parents=[remote], help="what each actor got and sent, step by step")
    history.add_argument("id", help="task id")
    history.add_argument("--json", action="store_true", help="print the history as JSON")
    history.set_defaults(run=_history)


def _limit(raw: str) -> int:
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise argparse.ArgumentTypeError(f"must be 1..100, got {raw!r}")
    return int(raw)


def _list(args: argparse.Namespace, io: CliIo) -> int:
    with args.client() as client:
        page = client.list(status=args.status, flow=args.flow, limit=args.limit, cursor=args.cursor)
    if args.json:
        io.print_json(page)
        return 0
    messages = page.get("messages") or []
    for task in messages:
        target = task.get("flow") or f"actor:{task.get('actor')}"
        detail = task.get("error") if task.get("status") == "failed" else task.get("current_actor")
        io.line(
            f"{task.get('id', ''):<{_ID_WIDTH}}  {task.get('status', ''):<9}  {target:<20}  "
            f"{task.get('created_at') or '':<24}  {detail or ''}".rstrip()
        )
    if not messages:
        io.note("no tasks")
    if page.get("next_cursor"):
        # the next page of the same listing: the same filters and page size, then the cursor
        same = [
            f"--{name} {shlex.quote(str(value))}"
            for name in ("status", "flow", "limit")
            if (value := getattr(args, name))
        ]
        io.note(" ".join(["more: asya list", *same, f"--cursor {page['next_cursor']}"]))
    return 0


def _cancel(args: argparse.Namespace, io: CliIo) -> int:
    with args.client() as client:
        before = client.get(args.id)
        client.cancel(args.id)
        status = client.get(args.id).get("status")
    if before.get("status") in TERMINAL_STATUSES:
        io.line(f"{args.id} {status}")
        io.error(f"task {args.id} had already ended {before.get('status')}: nothing to cancel")
        return 1
    io.line(f"{args.id} {status}")
    return 0


def _step(raw: str) -> str:
    try:
        return str(parse_step(raw))
    except StepError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--from: ")) from None


def _retry(args: argparse.Namespace, io: CliIo) -> int:
    if args.step is not None:
        with args.client() as client:
            created = client.retry(args.id, step=args.step, timeout=args.timeout)
        io.line(str(created["id"]))
        return 0
    with args.client() as client:
        view = client.get(args.id)
        status = view.get("status")
        if status not in TERMINAL_STATUSES:
            io.error(f"task {args.id} is {status}: retry a task once it has ended (or cancel it first)")
            return 1
        if "payload_url" in view:
            payload = json.loads(client.download(str(view["payload_url"])))
        else:
            payload = view.get("payload")
        flow, actor = view.get("flow"), view.get("actor")
        created = client.create(
            flow=flow if flow else None,
            actor=None if flow else actor,
            payload=payload,
            timeout=args.timeout,
            headers={RETRY_HEADER: args.id},
        )
    io.line(str(created["id"]))
    return 0


def _checkpoint(args: argparse.Namespace, io: CliIo) -> int:
    with args.client() as client:
        view = client.get(args.id)
    children = [c for c in view.get("children") or [] if isinstance(c, dict)]
    objects: dict[str, list[str]] = {}  # children of one x-sink batch share an object: read it once
    local = args.target.local
    clients = make_clients(local.endpoint_url if local else None, region=(local.region if local else args.region))

    def show(node: dict[str, Any]) -> None:
        line = _checkpoint_line(clients, objects, str(node["checkpoint_uri"]), node.get("checkpoint_line"))
        if args.raw:
            io.line(line)
        else:
            io.print_json(json.loads(line))

    own = _has_line(view)
    if own:
        show(view)
    else:
        io.error(f"task {args.id} ({view.get('status')}) has no checkpoint yet")
    listed = 0
    for child in children:
        if not args.raw:
            at = f" at {child['current_actor']}" if child.get("current_actor") else ""
            io.line(f"# child {child.get('id')} ({child.get('status')}){at}")
        if _has_line(child):
            show(child)
            listed += 1
        elif not args.raw:
            io.line("# no checkpoint yet")
    return 0 if own or listed else 1


def _has_line(view: dict[str, Any]) -> bool:
    uri = view.get("checkpoint_uri")
    return isinstance(uri, str) and uri.startswith("s3://")


def _checkpoint_line(clients: Any, objects: dict[str, list[str]], uri: str, line_number: Any) -> str:
    """Line ``line_number`` (1-based; the first when none is named) of the checkpoint object at ``uri``."""
    number = line_number if isinstance(line_number, int) and line_number >= 1 else 1
    if uri not in objects:
        parts = urlsplit(uri)
        bucket, key = parts.netloc, parts.path.lstrip("/")
        try:
            body = clients.s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
        except ClientError as exc:
            raise LocalModeError(f"cannot read checkpoint {uri}: {exc.response['Error']['Code']}") from None
        except BotoCoreError as exc:
            raise LocalModeError(f"cannot read checkpoint {uri}: {exc}") from None
        objects[uri] = body.splitlines()
    lines = objects[uri]
    if number > len(lines):
        raise LocalModeError(f"checkpoint {uri} has {len(lines)} lines, the task names line {number}")
    return lines[number - 1]


def _history(args: argparse.Namespace, io: CliIo) -> int:
    with args.client() as client:
        history = client.history(args.id)
    if args.json:
        io.print_json(history)
    else:
        for text in render_history(history):
            io.line(text)
    return 0


def render_history(history: dict[str, Any]) -> list[str]:
    """The lines ``asya history`` prints: one block per step, children's steps indented under the step that sent
    their envelope."""
    steps = [step for step in history.get("steps") or [] if isinstance(step, dict)]
    senders: dict[str, int] = {}
    for index, step in enumerate(steps):
        for output in step.get("outputs") or []:
            senders.setdefault(str(output.get("envelope_id")), index)
    depth: dict[int, int] = {}
    lines: list[str] = []
    for index, step in enumerate(steps):
        parent = senders.get(str(step.get("envelope_id")))
        level = 0
        if parent is not None and parent < index:
            # a child sits one level under the step that forked it; the rest of its lineage stays at its level
            level = depth[parent] + (1 if _forks(steps[parent], step) else 0)
        depth[index] = level
        pad = "  " * level
        hop = f"hop {step['hop']}  " if isinstance(step.get("hop"), int) else ""
        head = f"{pad}{step.get('started_at', '')}  {hop}{step.get('actor')}  attempt {step.get('attempt')}"
        lines.append(f"{head}  {step.get('duration_ms')} ms  envelope {step.get('envelope_id')}")
        lines.append(f"{pad}  in:  {compact_json(step.get('input'))}")
        for output in step.get("outputs") or []:
            lines.append(f"{pad}  out: -> {output.get('actor')}  {compact_json(output.get('payload'))}")
        if step.get("error"):
            lines.append(f"{pad}  error: {step['error']}")
    if history.get("truncated"):
        lines.append("(older steps of this task were dropped: the history keeps the latest ones)")
    return lines


def _forks(sender: dict[str, Any], step: dict[str, Any]) -> bool:
    """A step is a child when the envelope it ran is not the one its sender ran (a fan-out child has its own id)."""
    return bool(step.get("envelope_id") != sender.get("envelope_id"))
