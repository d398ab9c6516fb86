"""``asya dlq``: the dead-letter queue commands of the CLI (logic in :mod:`asya_local.dlq`).

::

    asya dlq list    [ACTOR]                                      DLQ depth per actor
    asya dlq show    ACTOR    [--max 10]                          peek messages (they stay in the DLQ)
    asya dlq redrive ACTOR    [--max N] [--method auto|copy|move-task] [--wait 300]

Common options: ``--manifest asya.yaml`` (queue names), ``--json`` (machine-readable output), and where the queues
are, first match wins: ``--endpoint-url URL``; ``--local`` (the moto endpoint of the running ``asya dev`` of this
manifest, from ``.asya/dev/{manifest file name}.json`` next to it); env ``AWS_ENDPOINT_URL_SQS`` /
``AWS_ENDPOINT_URL``; else AWS with the default credential chain. A loopback endpoint is moto: it gets fake
credentials. The region is ``--region``, else the ``asya dev`` state's, else env ``AWS_REGION`` /
``AWS_DEFAULT_REGION``, else the AWS profile's.

Exit codes: 0 done; 1 ``redrive`` left messages behind (failed sends, undeleted copies, a move task that did not
complete); 2 usage and AWS errors (printed as one line).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TextIO
from urllib.parse import urlsplit

import boto3
from botocore.exceptions import NoRegionError

from asya.awsclients import LOCAL_BUDGET, aws_client
from asya.manifest import load_manifest
from asya.store import TaskStore
from asya_local.cliargs import check_http_url, count, http_url, seconds
from asya_local.dlq import DeadLetters, DlqError
from asya_local.localstate import read_local_state, state_path
from asya_local.moto_server import DEFAULT_REGION, make_clients

if TYPE_CHECKING:
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["add_dlq_parser"]

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_ENDPOINT_ENV = ("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL")
_REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")


class _Io(Protocol):
    out: TextIO

    def print_json(self, value: Any) -> None: ...


def add_dlq_parser(commands: _Commands) -> None:
    """Add ``dlq`` and its actions to the CLI's sub-commands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--manifest", default="asya.yaml", help="path of asya.yaml (default ./asya.yaml)")
    where = common.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="the mesh of the running `asya dev` for this manifest")
    where.add_argument("--endpoint-url", type=http_url, help="SQS/DynamoDB endpoint (env AWS_ENDPOINT_URL)")
    common.add_argument("--region", help="AWS region (env AWS_REGION)")
    common.add_argument("--json", action="store_true", help="print JSON")

    dlq = commands.add_parser("dlq", help="inspect and redrive the actors' dead-letter queues")
    actions = dlq.add_subparsers(dest="dlq_action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="DLQ depth per actor")
    listing.add_argument("actor", nargs="?", help="one actor (default: every actor, crew included)")
    listing.set_defaults(run=_list)
    show = actions.add_parser("show", parents=[common], help="peek at an actor's DLQ messages (not consumed)")
    show.add_argument("actor", help="the actor whose DLQ to peek at")
    show.add_argument("--max", type=count, default=10, help="messages to show (default 10)")
    show.set_defaults(run=_show)
    redrive = actions.add_parser("redrive", parents=[common], help="move an actor's DLQ messages back to its queue")
    redrive.add_argument("actor", help="the actor whose DLQ to move back to its queue")
    redrive.add_argument("--max", type=count, default=None, help="move at most this many (copy method)")
    redrive.add_argument(
        "--method",
        choices=("auto", "copy", "move-task"),
        default="auto",
        help="auto (default): SQS's move task on AWS without --max, else copy",
    )
    redrive.add_argument("--wait", type=seconds, default=300, help="seconds to follow a move task (default 300)")
    redrive.set_defaults(run=_redrive)


# -- commands ---------------------------------------------------------------------------------------------------


def _list(args: argparse.Namespace, io: _Io) -> int:
    depths = _dead_letters(args).depths(args.actor)
    if args.json:
        io.print_json(
            [{"actor": d.actor, "dlq": d.dlq, "visible": d.visible, "in_flight": d.in_flight} for d in depths]
        )
        return 0
    rows = [("ACTOR", "DLQ", "MESSAGES", "IN FLIGHT")]
    rows += [(d.actor, d.dlq, str(d.visible), str(d.in_flight)) for d in depths]
    _table(io.out, rows)
    return 0


def _show(args: argparse.Namespace, io: _Io) -> int:
    messages = _dead_letters(args).peek(args.actor, limit=args.max)
    if args.json:
        io.print_json([message.to_dict() for message in messages])
        return 0
    if not messages:
        io.out.write(f"no messages in the DLQ of {args.actor}\n")
    for m in messages:
        io.out.write(
            f"{m.message_id}  task {m.task_id or '-'} ({m.task_status or 'unknown'})  actor {m.actor or '-'}  "
            f"receives {m.receive_count}  sent {m.sent_at or '-'}\n  reason: {m.reason}\n"
        )
    io.out.flush()
    return 0


def _redrive(args: argparse.Namespace, io: _Io) -> int:
    dead = _dead_letters(args)
    result = dead.redrive(args.actor, method=args.method, limit=args.max, wait_seconds=args.wait)
    complete = result.failed == 0 and result.not_deleted == 0 and result.status in ("done", "completed")
    if args.json:
        io.print_json(result.to_dict())
        return 0 if complete else 1
    manifest = dead.manifest
    line = (
        f"redrove {result.moved} message(s) from {manifest.dlq_name(result.actor)} to "
        f"{manifest.queue_name(result.actor)} ({result.method}, {result.status})"
    )
    if result.failed:
        line += f"; {result.failed} could not be sent and stay in the DLQ"
    if result.not_deleted:
        line += f"; {result.not_deleted} sent but not deleted from the DLQ (they will be redriven again)"
    if result.detail:
        line += f"; {result.detail}"
    io.out.write(line + "\n")
    io.out.flush()
    return 0 if complete else 1


# -- plumbing ---------------------------------------------------------------------------------------------------


def _dead_letters(args: argparse.Namespace) -> DeadLetters:
    manifest = load_manifest(args.manifest)
    env: Mapping[str, str] = args.env
    endpoint: str | None = args.endpoint_url
    region: str | None = args.region
    if args.local:
        state = read_local_state(state_path(args.manifest))
        endpoint, region = state.endpoint_url, region or state.region
    if endpoint is None:
        from_env = next((name for name in _ENDPOINT_ENV if env.get(name)), None)
        if from_env is not None:
            try:
                endpoint = check_http_url(env[from_env])
            except ValueError as exc:
                raise DlqError(f"{from_env}: {exc}") from None
    region = region or next((env[name] for name in _REGION_ENV if env.get(name)), None)
    sqs, dynamodb = _clients(endpoint, region)
    return DeadLetters(manifest, sqs=sqs, store=TaskStore(table=manifest.table_name, dynamodb=dynamodb))


def _clients(endpoint: str | None, region: str | None) -> tuple[Any, Any]:
    if endpoint is not None and urlsplit(endpoint).hostname in _LOOPBACK:
        clients = make_clients(endpoint, region=region or DEFAULT_REGION)
        return clients.sqs, clients.dynamodb
    try:
        session = boto3.Session(region_name=region)
        return aws_client("sqs", LOCAL_BUDGET, session=session, endpoint_url=endpoint), aws_client(
            "dynamodb", LOCAL_BUDGET, session=session, endpoint_url=endpoint
        )
    except NoRegionError:
        raise DlqError("no AWS region configured: pass --region or set AWS_REGION") from None


def _table(out: TextIO, rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n")
    out.flush()
