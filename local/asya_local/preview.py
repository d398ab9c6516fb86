"""``asya deploy``'s preview: what deploying manifest NEW over the mesh deployed now means for work in flight, and
the refusal to delete an actor's queue while it holds messages (docs/deploy.md "Upgrading a mesh").

- :func:`render_live` turns a :class:`~asya_local.livestate.LiveState` into text lines: the actors removed with the
  messages of their queues and DLQs, the flows whose tasks in flight are on another program than NEW's (or that NEW
  drops) with their paused and running tasks, the settings the deployed queues show that NEW changes. Every count is
  labelled approximate, with its source and bound.
- :func:`refusal` is the message that stops a deploy removing an actor whose queue or DLQ holds messages, naming
  each actor, its counts and how to drain it.
- :func:`drain_removed` is ``--force``: the messages of each such queue and DLQ are failed through x-sump
  (``asya_local.sumpdrain``), so their tasks fail at once with an error naming the removed actor, not at their
  deadline. Messages received by the old actor's function at that moment are left (they finish or fail there);
  messages sent to the actor after the drain and before CloudFormation deletes its queue are lost with it.
- :func:`read_deployed` builds the clients (moto with fake credentials for a loopback endpoint, else AWS with the
  default credential chain) and finds the bucket: ``bucket``, else the ``BucketName`` output of the stack
  ``asya-{ns}``, else the local mode's ``asya-{ns}-storage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from asya import naming
from asya.manifest import Manifest
from asya.timeutil import Clock, format_ts
from asya.transport import Transport
from asya_local.exceptions import LocalModeError
from asya_local.livestate import DEFAULT_READ_BOUND, FlowInFlight, LiveState, QueueDepth, RemovedActor, read_live
from asya_local.sumpdrain import drain_to_sump

__all__ = [
    "DeployPreviewError",
    "Drained",
    "drain_removed",
    "drained_lines",
    "read_deployed",
    "refusal",
    "render_live",
]

_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})
_SHORT: Final = 12


class DeployPreviewError(LocalModeError):
    """The deployed mesh could not be read for the preview; the message names the call and the AWS error."""


@dataclass(frozen=True, slots=True)
class Drained:
    """What ``--force`` sent to x-sump from one removed actor, and what it left in flight."""

    actor: str
    queue: int
    dlq: int
    left_in_flight: int


def read_deployed(
    manifest: Manifest,
    *,
    region: str | None,
    endpoint_url: str | None = None,
    bucket: str | None = None,
    now: datetime,
    read_bound: int = DEFAULT_READ_BOUND,
    clients: Any = None,
) -> tuple[LiveState, Any]:
    """The live state of the mesh deployed under ``manifest.namespace`` against NEW = ``manifest``, and the clients
    it was read with (``.sqs``, ``.s3``, ``.dynamodb``); raises :class:`DeployPreviewError`."""
    from asya_local.moto_server import DEFAULT_REGION, make_clients

    try:
        if clients is None:
            if endpoint_url is not None and urlsplit(endpoint_url).hostname not in _LOOPBACK:
                raise DeployPreviewError(f"--endpoint-url {endpoint_url}: only a loopback (moto) endpoint is taken")
            clients = make_clients(endpoint_url, region=region or DEFAULT_REGION)
        where = bucket or _stack_bucket(manifest, region=region, local=endpoint_url is not None)
        state = read_live(
            manifest,
            sqs=clients.sqs,
            s3=clients.s3,
            dynamodb=clients.dynamodb,
            bucket=where,
            table=naming.table_name(manifest.namespace),
            now=now,
            read_bound=read_bound,
        )
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        raise DeployPreviewError(f"the deploy preview could not read the deployed mesh ({code}): {exc}") from None
    except BotoCoreError as exc:
        raise DeployPreviewError(f"the deploy preview could not read the deployed mesh: {exc}") from None
    return state, clients


def _stack_bucket(manifest: Manifest, *, region: str | None, local: bool) -> str:
    """The deployed stack's ``BucketName`` output; the local mode's name when there is no such stack."""
    if local:
        return naming.bucket_name(manifest.namespace)
    import boto3

    stack = f"asya-{manifest.namespace}"
    try:
        found = boto3.session.Session(region_name=region).client("cloudformation").describe_stacks(StackName=stack)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ValidationError":  # no such stack: nothing deployed under that name
            return naming.bucket_name(manifest.namespace)
        raise
    for output in found["Stacks"][0].get("Outputs", []):
        if output.get("OutputKey") == "BucketName":
            return str(output["OutputValue"])
    return naming.bucket_name(manifest.namespace)


def render_live(state: LiveState) -> list[str]:
    """The live preview as text lines, most consequential first."""
    lines = [f"deployed mesh {state.namespace!r} (live; counts are approximate):"]
    if state.removed:
        lines.append("actors removed (their queue and DLQ are deleted with the messages in them):")
        lines += [f"  - {actor.name}: {_removed_counts(actor)}" for actor in state.removed]
    flows = [flow for flow in state.flows if flow.changed or not flow.in_new or flow.paused or flow.running]
    if flows:
        seconds = int(state.running_window.total_seconds())
        lines.append(
            f"flows with work in flight (paused: the paused/ listing; running: tasks created in the last {seconds} s, "
            f"the by_created index; at most {state.read_bound} reads each):"
        )
        for flow in flows:
            lines += _flow_lines(flow)
    if state.settings:
        lines.append("settings (as the deployed queues show them):")
        lines += [f"  actors.{s.actor}.{s.setting}: {s.deployed} -> {s.new}  ({s.effect})" for s in state.settings]
    if state.cut:
        lines.append(f"  (a read bound of {state.read_bound} cut the {', '.join(state.cut)} counts: more exist)")
    if len(lines) == 1:
        lines.append("  no actor removed, no task in flight on another program, no queue setting changed")
    return lines


def _removed_counts(actor: RemovedActor) -> str:
    parts = [f"queue {_depth(actor.queue)}"]
    parts.append("no DLQ" if actor.dlq is None else f"DLQ {_depth(actor.dlq)}")
    return ", ".join(parts)


def _depth(depth: QueueDepth) -> str:
    if not depth.total:
        return "empty"
    detail = f"{depth.visible} waiting, {depth.in_flight} in flight, {depth.delayed} delayed"
    return f"{depth.total} message{'s' if depth.total != 1 else ''} ({detail})"


def _flow_lines(flow: FlowInFlight) -> list[str]:
    tasks = f"{flow.running} running (any program), {flow.paused} paused"
    if not flow.in_new:
        head = f"  - {flow.name}: removed; {tasks} (they finish on their program or route; new tasks are refused)"
    elif flow.new_digest is None:
        head = f"  = {flow.name}: a static route; {tasks}"
    elif flow.changed:
        deployed = flow.deployed_digest or ""
        head = (
            f"  ~ {flow.name}: program {deployed[:_SHORT]} -> {flow.new_digest[:_SHORT]}; {tasks} "
            "(tasks in flight finish on their program, new tasks take the new one)"
        )
    else:
        head = f"  = {flow.name}: program {flow.new_digest[:_SHORT]} unchanged; {tasks}"
    out = [head]
    if flow.paused_on_new:
        out.append(f"      {flow.paused_on_new} paused on the new program")
    if flow.paused_unversioned:
        out.append(f"      {flow.paused_unversioned} paused without a digest (they resume on the current program)")
    for kept in flow.kept:
        since = f"first used {format_ts(kept.stored_at)}" if kept.stored_at else "NOT KEPT: they fail when resumed"
        out.append(f"      program {kept.digest[:_SHORT]} ({since}): {kept.paused} paused")
    return out


def refusal(state: LiveState) -> str | None:
    """Why the deploy must not go on, or ``None``: an actor it removes still holds messages."""
    blocking = state.blocking
    if not blocking:
        return None
    names = ", ".join(f"{a.name} ({a.messages})" for a in blocking)
    drains = "; ".join(f"asya dlq redrive {a.name}" for a in blocking if a.dlq is not None and a.dlq.total)
    return (
        f"the deploy removes actors whose queue or DLQ still holds messages: {names}. CloudFormation would delete "
        "them with those messages, and their tasks would fail only at their deadline. Drain each first: deploy a "
        "version that still declares the actor but no longer routes to it, wait until `asya plan` and this preview "
        "show its queue empty (docs/deploy.md 'Draining an actor before removing it')"
        + (f", and put its DLQ's messages back to work ({drains})" if drains else "")
        + "; or fail those tasks now through x-sump and deploy: `asya deploy --force`"
    )


def drain_removed(state: LiveState, *, sqs: Any, clock: Clock, transport: Transport | None = None) -> list[Drained]:
    """``--force``: fail every message of the removed actors' queues and DLQs through x-sump (module docstring)."""
    transport = transport or Transport(namespace=state.namespace, sqs=sqs)
    out: list[Drained] = []
    for actor in state.blocking:
        message = f"actor {actor.name!r} is removed by a deploy (asya deploy --force): its queued envelope was failed"
        drained = [
            drain_to_sump(sqs, depth.url, actor=actor.name, transport=transport, message=message, clock=clock)
            if depth is not None
            else 0
            for depth in (actor.queue, actor.dlq)
        ]
        left = sum(_left(sqs, depth.url) for depth in (actor.queue, actor.dlq) if depth is not None)
        out.append(Drained(actor.name, drained[0], drained[1], left))
    return out


def _left(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])[
        "Attributes"
    ]
    return int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))


def drained_lines(drained: list[Drained]) -> list[str]:
    """What ``--force`` did, as text lines."""
    lines: list[str] = []
    for d in drained:
        left = f"; {d.left_in_flight} in flight left (being processed)" if d.left_in_flight else ""
        sent = f"{d.queue} from its queue and {d.dlq} from its DLQ failed through x-sump"
        lines.append(f"--force: {d.actor}: {sent}{left}")
    return lines
