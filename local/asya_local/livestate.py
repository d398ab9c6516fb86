"""The live part of the deploy preview: what the mesh deployed now holds that a deploy of manifest NEW affects
(docs/deploy.md "Upgrading a mesh").

Nothing here trusts a record of what was deployed: the deployed mesh is read from the resources themselves, the same
way on AWS and on moto, so a deploy made with a bare ``cdk deploy``, from another checkout or rolled back by
CloudFormation is seen as it is.

- **Actors removed**: the namespace's queues, listed by the prefix ``asya-{ns}-`` and kept only when tagged with the
  namespace (a namespace that extends this one, ``demo-x`` for ``demo``, shares the prefix), minus NEW's deployed
  actors (crew included) and the deadline timer queue. For each, ``ApproximateNumberOfMessages``,
  ``...NotVisible`` and ``...Delayed`` of its queue and its DLQ.
- **Flows**: per flow, NEW's program digest; the other programs of that flow the bucket keeps (``flows/{digest}.json``,
  stored by the gateway at a task's create, so each is a program some task started on), with the time each was first
  stored; the paused tasks by program digest (the flow state of each ``paused/{id}.json``); and the running tasks
  (``pending`` or ``running``) by flow, from the ``by_created`` index, newest first, back over the longest flow
  timeout (a task created earlier is past its deadline). A task item does not name its program, so running tasks are
  counted per flow, whatever program they run.
- **Settings**: per actor deployed on both sides, what its queue says of it: the visibility timeout (it follows the
  actor's timeout and batch size) and the redrive policy's ``maxReceiveCount``, against NEW's values.

There is no status index: every count is bounded by ``read_bound`` reads (paused documents, kept programs, task
entries each) and the result says when a bound cut a count, so counts are approximate and labelled so.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from botocore.exceptions import ClientError

from asya import headers as hdr
from asya import naming
from asya.flows import STATE_HEADER
from asya.manifest import Manifest
from asya.programstore import state_digest
from asya.store import TaskStore
from asya.tableschema import PAUSED_PREFIX, PROGRAMS_PREFIX
from asya.timeutil import parse_ts
from asya_local.provision import NAMESPACE_TAG

__all__ = [
    "DEFAULT_READ_BOUND",
    "FlowInFlight",
    "KeptProgram",
    "LiveState",
    "QueueDepth",
    "QueueSetting",
    "RemovedActor",
    "read_live",
]

#: At most this many paused documents, kept programs and task index entries are read, each.
DEFAULT_READ_BOUND: Final = 5_000
#: The namespace tag of a deployed stack's resources (``asya_cdk.mesh``); the local mode tags with NAMESPACE_TAG.
_STACK_NAMESPACE_TAG: Final = "asya:namespace"
_DLQ_SUFFIX: Final = "-dlq"
_COUNTS: Final = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
_RUNNING: Final = frozenset({"pending", "running"})
#: A flow without a timeout of its own runs under the gateway's default task timeout (GW-CREATE-6).
_DEFAULT_FLOW_TIMEOUT: Final = timedelta(seconds=300)
_NO_QUEUE: Final = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """A queue's approximate counts: waiting, received and not yet deleted, delayed."""

    url: str
    visible: int = 0
    in_flight: int = 0
    delayed: int = 0

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


@dataclass(frozen=True, slots=True)
class RemovedActor:
    """A deployed actor NEW does not deploy: a deploy deletes its queue and DLQ with what they hold."""

    name: str
    queue: QueueDepth
    dlq: QueueDepth | None

    @property
    def messages(self) -> int:
        return self.queue.total + (self.dlq.total if self.dlq is not None else 0)


@dataclass(frozen=True, slots=True)
class KeptProgram:
    """A program of a flow kept in the bucket other than NEW's: ``stored_at`` is when a task first started on it."""

    digest: str
    stored_at: datetime | None
    paused: int = 0


@dataclass(frozen=True, slots=True)
class FlowInFlight:
    """One flow's work in flight: NEW's digest (``None`` for a static route, or a flow NEW drops), the other programs
    kept with their paused tasks, paused tasks on NEW's program or on no digest, and running tasks (any program)."""

    name: str
    new_digest: str | None
    in_new: bool
    kept: tuple[KeptProgram, ...] = ()
    paused_on_new: int = 0
    paused_unversioned: int = 0
    running: int = 0

    #: when a task first started on NEW's program (``None``: none has yet, NEW's program is new)
    new_stored_at: datetime | None = None

    @property
    def deployed_digest(self) -> str | None:
        """The program the deployed mesh most likely runs: the one a task started on last (``None``: no task has)."""
        dated = [(k.stored_at, k.digest) for k in self.kept if k.stored_at is not None]
        if self.new_digest is not None and self.new_stored_at is not None:
            dated.append((self.new_stored_at, self.new_digest))
        return max(dated)[1] if dated else None

    @property
    def changed(self) -> bool:
        """Whether the deploy changes the program new tasks of this flow start on."""
        deployed = self.deployed_digest
        return deployed is not None and deployed != self.new_digest

    @property
    def paused(self) -> int:
        return self.paused_on_new + self.paused_unversioned + sum(k.paused for k in self.kept)


@dataclass(frozen=True, slots=True)
class QueueSetting:
    """A setting an actor's queue shows that NEW changes."""

    actor: str
    setting: str
    deployed: int
    new: int
    effect: str


@dataclass(frozen=True, slots=True)
class LiveState:
    """What the deployed mesh holds that deploying NEW affects; ``cut`` names the counts a read bound cut short."""

    namespace: str
    removed: tuple[RemovedActor, ...] = ()
    flows: tuple[FlowInFlight, ...] = ()
    settings: tuple[QueueSetting, ...] = ()
    running_window: timedelta = _DEFAULT_FLOW_TIMEOUT
    read_bound: int = DEFAULT_READ_BOUND
    cut: tuple[str, ...] = field(default=())

    @property
    def blocking(self) -> tuple[RemovedActor, ...]:
        """Removed actors whose queue or DLQ still holds messages: the deploy refuses them without ``--force``."""
        return tuple(actor for actor in self.removed if actor.messages)


def read_live(
    manifest: Manifest,
    *,
    sqs: Any,
    s3: Any,
    dynamodb: Any,
    bucket: str,
    table: str,
    now: datetime,
    read_bound: int = DEFAULT_READ_BOUND,
) -> LiveState:
    """Read the deployed mesh of ``manifest.namespace`` against NEW = ``manifest`` (module docstring). AWS errors
    propagate (``ClientError``, ``BotoCoreError``); a missing table or bucket (nothing deployed yet) reads as empty."""
    namespace = manifest.namespace
    deployed = _deployed_queues(sqs, namespace)
    new_actors = {actor.name: actor for actor in manifest.deployed_actors()}
    removed = tuple(
        RemovedActor(name, _depth(sqs, url), _depth(sqs, dlq) if (dlq := deployed.get(name + _DLQ_SUFFIX)) else None)
        for name, url in sorted(deployed.items())
        if not name.endswith(_DLQ_SUFFIX) and name != naming.DEADLINE and name not in new_actors
    )
    settings = tuple(
        setting
        for name, actor in new_actors.items()
        if name in deployed
        for setting in _queue_settings(sqs, deployed[name], name, actor.visibility_timeout, actor.max_receive_count)
    )
    cut: list[str] = []
    window = max([_DEFAULT_FLOW_TIMEOUT, *(timedelta(seconds=f.timeout) for f in manifest.flows.values() if f.timeout)])
    paused = _paused(s3, bucket, read_bound, cut)
    kept = _kept_programs(s3, bucket, manifest, read_bound, cut)
    running = _running(dynamodb, table, now=now, window=window, read_bound=read_bound, cut=cut)
    flows = _flows(manifest, paused=paused, kept=kept, running=running)
    return LiveState(namespace, removed, flows, settings, window, read_bound, tuple(cut))


def _deployed_queues(sqs: Any, namespace: str) -> dict[str, str]:
    """The namespace's queues, by the name after ``asya-{ns}-`` (``{actor}`` or ``{actor}-dlq``)."""
    prefix = f"asya-{namespace}-"
    urls: list[str] = []
    token: str | None = None
    while True:
        page = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=1000, **({"NextToken": token} if token else {}))
        urls.extend(page.get("QueueUrls") or [])
        token = page.get("NextToken")
        if not token:
            break
    found: dict[str, str] = {}
    for url in urls:
        rest = url.rstrip("/").rsplit("/", 1)[-1].removeprefix(prefix)
        if not naming.is_valid_actor_name(rest.removesuffix(_DLQ_SUFFIX)):
            continue
        try:
            tags = sqs.list_queue_tags(QueueUrl=url).get("Tags") or {}
        except ClientError as exc:
            if exc.response["Error"]["Code"] in _NO_QUEUE:
                continue
            raise
        if namespace in (tags.get(NAMESPACE_TAG), tags.get(_STACK_NAMESPACE_TAG)):
            found[rest] = url
    return found


def _depth(sqs: Any, url: str) -> QueueDepth:
    try:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(_COUNTS))["Attributes"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] in _NO_QUEUE:
            return QueueDepth(url)
        raise
    visible, in_flight, delayed = (int(attributes.get(name, 0)) for name in _COUNTS)
    return QueueDepth(url, visible, in_flight, delayed)


def _queue_settings(sqs: Any, url: str, actor: str, visibility: int, receives: int) -> list[QueueSetting]:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "RedrivePolicy"])[
        "Attributes"
    ]
    out: list[QueueSetting] = []
    deployed_visibility = int(attributes.get("VisibilityTimeout", visibility))
    if deployed_visibility != visibility:
        effect = "the actor's timeout or batch size changes; a failed delivery waits this long to be received again"
        out.append(QueueSetting(actor, "visibility_timeout", deployed_visibility, visibility, effect))
    policy = json.loads(attributes.get("RedrivePolicy") or "{}")
    deployed_receives = int(policy.get("maxReceiveCount", receives))
    if deployed_receives != receives:
        effect = "deliveries before a message moves to the DLQ, messages already in the queue included"
        out.append(QueueSetting(actor, "max_receive_count", deployed_receives, receives, effect))
    return out


def _keys(s3: Any, bucket: str, prefix: str, *, read_bound: int, cut: list[str], what: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for entry in page.get("Contents", []):
                if len(entries) >= read_bound:
                    cut.append(what)
                    return entries
                entries.append(entry)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchBucket":
            return []
        raise
    return entries


def _paused(s3: Any, bucket: str, read_bound: int, cut: list[str]) -> Counter[tuple[str, str | None]]:
    """Paused tasks by ``(flow, digest)``; ``digest`` is ``None`` for a state without one, or a static route."""
    found: Counter[tuple[str, str | None]] = Counter()
    for entry in _keys(s3, bucket, PAUSED_PREFIX, read_bound=read_bound, cut=cut, what="paused"):
        try:
            document = json.loads(s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read())
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                continue  # resumed or canceled since the listing
            raise
        headers = document.get("headers") if isinstance(document, dict) else None
        if not isinstance(headers, dict):
            continue
        named = state_digest(headers)
        if named is not None:
            found[named] += 1
            continue
        state = headers.get(STATE_HEADER)
        flow = state.get("flow") if isinstance(state, dict) else headers.get(hdr.FLOW)
        if isinstance(flow, str):
            found[(flow, None)] += 1
    return found


def _kept_programs(
    s3: Any, bucket: str, manifest: Manifest, read_bound: int, cut: list[str]
) -> dict[str, list[KeptProgram]]:
    """The kept programs by flow name (NEW's by the manifest, the others read from each program)."""
    current = {spec.program.digest: name for name, spec in manifest.flows.items() if spec.program is not None}
    out: dict[str, list[KeptProgram]] = {}
    for entry in _keys(s3, bucket, PROGRAMS_PREFIX, read_bound=read_bound, cut=cut, what="programs"):
        digest = str(entry["Key"]).removeprefix(PROGRAMS_PREFIX).removesuffix(".json")
        if digest in current:
            out.setdefault(current[digest], []).append(KeptProgram(digest, entry.get("LastModified")))
            continue
        try:
            document = json.loads(s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read())
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                continue  # collected since the listing
            raise
        except ValueError:
            continue  # not a program: no task runs it
        flow = document.get("flow") if isinstance(document, dict) else None
        if isinstance(flow, str):
            out.setdefault(flow, []).append(KeptProgram(digest, entry.get("LastModified")))
    return out


def _running(
    dynamodb: Any, table: str, *, now: datetime, window: timedelta, read_bound: int, cut: list[str]
) -> Counter[str]:
    """Tasks ``pending`` or ``running`` by flow, created within ``window`` before ``now`` (``by_created``)."""
    days = window.days + 2  # the listing walks whole days back from today
    store = TaskStore(table=table, dynamodb=dynamodb, clock=lambda: now, list_window_days=days)
    since = now - window
    counts: Counter[str] = Counter()
    read = 0
    cursor: str | None = None
    try:
        while True:
            page = store.list_tasks(limit=100, cursor=cursor)
            for task in page["messages"]:
                created = parse_ts(task.get("created_at"))
                if created is not None and created < since:
                    return counts  # newest first: every later entry is older still
                read += 1
                if read > read_bound:
                    cut.append("running")
                    return counts
                if task.get("status") in _RUNNING:
                    counts[str(task.get("flow") or "")] += 1
            cursor = page.get("next_cursor")
            if not cursor:
                return counts
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ResourceNotFoundException":
            return counts
        raise


def _flows(
    manifest: Manifest,
    *,
    paused: Counter[tuple[str, str | None]],
    kept: dict[str, list[KeptProgram]],
    running: Counter[str],
) -> tuple[FlowInFlight, ...]:
    names = [*manifest.flows]
    for name in sorted({*kept, *(flow for flow, _ in paused), *running} - set(names)):
        if name:
            names.append(name)
    out = []
    for name in names:
        spec = manifest.flows.get(name)
        new_digest = spec.program.digest if spec is not None and spec.program is not None else None
        programs = {k.digest: k for k in kept.get(name, [])}
        new_kept = programs.pop(new_digest, None) if new_digest is not None else None
        for paused_flow, digest in paused:
            if paused_flow == name and digest is not None and digest != new_digest and digest not in programs:
                programs[digest] = KeptProgram(digest, None)  # collected already: its tasks cannot resume
        kept_here = tuple(
            KeptProgram(k.digest, k.stored_at, paused.get((name, k.digest), 0))
            for k in sorted(programs.values(), key=lambda k: (k.stored_at is None, k.stored_at or datetime.min))
        )
        flow = FlowInFlight(
            name,
            new_digest,
            spec is not None,
            kept_here,
            paused.get((name, new_digest), 0) if new_digest is not None else 0,
            paused.get((name, None), 0),
            running.get(name, 0),
            new_kept.stored_at if new_kept is not None else None,
        )
        if flow.kept or flow.paused or flow.running or not flow.in_new:
            out.append(flow)
    return tuple(out)
