"""The AWS calls each kind of mesh function makes: the mesh's IAM contract, declared beside the code that calls.

A shared contract module (like ``asya.naming`` and ``asya.tableschema``): ``asya_cdk.permissions`` derives every
role's policy statements from :data:`ROLES` and nothing else, docs/deploy.md's matrix is checked against it
(tests/infra/test_permissions.py), and every object key the runtime uses is built by the ``asya.tableschema`` builders
that the :class:`Objects` patterns below call with ``*`` (tests/unit/test_access.py fails on a key built elsewhere).
A new call in the code therefore needs a new :class:`Call` here, and a :class:`Call` is all it takes to grant it.

Roles (:func:`role_of` maps a deployed actor to its role): ``actor`` (every user actor), ``aggregator`` (the fan-in
crew ``x-fanin-*``), ``x-sink``, ``x-sump``, ``x-pause``, ``x-resume``, ``gateway`` and ``backstop``.

Resources, each rendered as an ARN by the CDK app:

- :class:`Table`: the task table; :class:`Index`: named indexes of it;
- :class:`Objects`: bucket keys matching an IAM-style pattern (``*`` any run of characters);
- :class:`Listing`: ``s3:ListBucket`` on the bucket, only with ``s3:prefix`` like one of the given prefixes;
- :class:`Queues`: the mesh's queues named ``asya-{ns}-{pattern}`` (``*``: every queue, P-NAME-4);
- :class:`OwnQueue`: the queue the function consumes; its grant comes with the event source mapping
  (``granted_by_event_source``), declared so that a recorded call maps back to an entry;
- :class:`Unscoped`: actions without resource-level permissions (``Resource: *``);
- :class:`MeshKey`: the mesh's customer-managed KMS key, granted only when the mesh has one (``storage.kms_key_arn``
  or ``storage.create_kms_key``): every role reads or writes encrypted data (queues, table, bucket), which SQS,
  DynamoDB and S3 decrypt and encrypt with the key on the role's behalf.

Each :class:`Call` has a ``name`` unique within its role (``paused.store``, ``task.write``...), stable across
releases: a test that records every call a role made maps each recorded ``(action, resource)`` back to the declared
entries with :meth:`Role.matching`, and reports any entry never used and any call no entry covers.

Missing keys (S3 answers 404 only to a caller that may list the whole bucket, else 403): no role gets an
unconditioned ``ListBucket``. Readers that must tell "missing" from "denied" use ``asya.missingkey``, which on a 403
lists with ``Prefix`` = the key under the prefix-conditioned grant (``*.list``); x-pause never reads its file and
stores it with a conditional write instead. ``why`` of each call is the cdk-nag acknowledgment's reason for its
wildcard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from asya import naming, tableschema

__all__ = [
    "ACTOR",
    "AGGREGATOR",
    "BACKSTOP",
    "DEADLINE_INDEXES",
    "GATEWAY",
    "LISTING_INDEXES",
    "PAUSE",
    "RESUME",
    "ROLES",
    "SINK",
    "SUMP",
    "Call",
    "Index",
    "Listing",
    "MeshKey",
    "Objects",
    "OwnQueue",
    "Queues",
    "Resource",
    "Role",
    "Table",
    "Unscoped",
    "pattern_matches",
    "role_of",
]


@dataclass(frozen=True, slots=True)
class Table:
    """The task table (its items, not its indexes)."""


@dataclass(frozen=True, slots=True)
class Index:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Objects:
    """Object keys matching ``pattern`` (``*`` any run of characters, as in an IAM resource ARN)."""

    pattern: str


@dataclass(frozen=True, slots=True)
class Listing:
    """``s3:ListBucket`` on the bucket for ``s3:prefix`` values starting with one of ``prefixes``."""

    prefixes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Queues:
    """The mesh's queues ``asya-{ns}-{pattern}``."""

    pattern: str


@dataclass(frozen=True, slots=True)
class OwnQueue:
    """The queue the function consumes (granted by the event source mapping)."""


@dataclass(frozen=True, slots=True)
class Unscoped:
    """Actions with no resource-level permissions."""


@dataclass(frozen=True, slots=True)
class MeshKey:
    """The mesh's customer-managed KMS key (only when it has one)."""


Resource = Table | Index | Objects | Listing | Queues | OwnQueue | Unscoped | MeshKey


@dataclass(frozen=True, slots=True)
class Call:
    """Actions a role performs on one resource; ``why`` says which code needs them (and justifies a wildcard)."""

    name: str
    actions: tuple[str, ...]
    resource: Resource
    why: str

    @property
    def granted_by_event_source(self) -> bool:
        return isinstance(self.resource, OwnQueue)

    def covers(self, action: str, resource: Resource) -> bool:
        """Whether a concrete call (``resource`` naming one index, key, prefix or queue) is this entry's."""
        if action not in self.actions or type(resource) is not type(self.resource):
            return False
        declared = self.resource
        if isinstance(declared, Index) and isinstance(resource, Index):
            return set(resource.names) <= set(declared.names)
        if isinstance(declared, Objects) and isinstance(resource, Objects):
            return pattern_matches(declared.pattern, resource.pattern)
        if isinstance(declared, Listing) and isinstance(resource, Listing):
            return all(any(p.startswith(d) for d in declared.prefixes) for p in resource.prefixes)
        if isinstance(declared, Queues) and isinstance(resource, Queues):
            return pattern_matches(declared.pattern, resource.pattern)
        return True


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    calls: tuple[Call, ...]

    def __post_init__(self) -> None:
        names = [c.name for c in self.calls]
        if len(names) != len(set(names)):
            raise ValueError(f"role {self.name!r}: call names must be unique, got {names}")

    def call(self, name: str) -> Call:
        for entry in self.calls:
            if entry.name == name:
                return entry
        raise KeyError(f"role {self.name!r} declares no call {name!r}")

    def matching(self, action: str, resource: Resource) -> tuple[Call, ...]:
        """The declared entries that cover a recorded call (empty: the call is undeclared, so it is denied)."""
        return tuple(c for c in self.calls if c.covers(action, resource))

    @property
    def actions(self) -> frozenset[str]:
        return frozenset(a for c in self.calls for a in c.actions)


def pattern_matches(pattern: str, value: str) -> bool:
    """IAM's resource matching: ``*`` any run of characters, ``?`` one character, the rest literal."""
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


#: The index only the backstop reads (GW-BACK-1); every other index is the gateway's listing (GW-LIST).
DEADLINE_INDEXES: Final = frozenset({"long_deadlines"})
LISTING_INDEXES: Final = tuple(g.name for g in tableschema.GSIS if g.name not in DEADLINE_INDEXES)

_GET: Final = "s3:GetObject"  # GetObject and HeadObject
_PUT: Final = "s3:PutObject"
_DELETE: Final = "s3:DeleteObject"
_LIST: Final = "s3:ListBucket"
_ITEM_RW: Final = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
_SEND: Final = ("sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl")

_PAYLOADS: Final = Objects(tableschema.PAYLOADS_PREFIX + "*")
_HISTORY: Final = Objects(tableschema.history_key("*", "*"))
#: What a history walk may read: objects of this layout and of the one before the shard (``history/{day}/...``,
#: GW-DATA-9), which a chain written before an upgrade still names.
_HISTORY_READ: Final = Objects(tableschema.HISTORY_PREFIX + "*.jsonl")
_HISTORY_WRITE: Final = Call(
    "history.write",
    (_PUT,),
    _HISTORY,
    "run history (P-HIST-2): one object per invocation that ran a hop of a history-on flow, named by day and UUID",
)
_PAUSED: Final = Objects(tableschema.paused_key("*"))
_PROGRAMS: Final = Objects(tableschema.program_key("*"))
_PROGRAMS_READ: Final = (
    Call(
        "programs.read",
        (_GET,),
        _PROGRAMS,
        "flows/{digest}.json: the program a task started with, read when this deployment does not hold it (P-FLOWV-3)",
    ),
    Call(
        "programs.list",
        (_LIST,),
        Listing((tableschema.PROGRAMS_PREFIX,)),
        "a missing program (FlowVersionMissing, P-FLOWV-2) is told from a denied read by listing its key "
        "(asya.missingkey)",
    ),
)


def _value(field: str) -> Objects:
    return Objects(tableschema.task_value_key("*", field))


def _consume() -> Call:
    return Call(
        "queue.consume",
        (
            "sqs:ReceiveMessage",
            "sqs:ChangeMessageVisibility",
            "sqs:GetQueueUrl",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
        ),
        OwnQueue(),
        "the SQS event source mapping of the function's own queue",
    )


def _payloads(*, write: bool) -> tuple[Call, ...]:
    calls = [
        Call("payloads.read", (_GET,), _PAYLOADS, "payload references of incoming envelopes (P-LARGE-4)"),
        Call(
            "payloads.list",
            (_LIST,),
            Listing((tableschema.PAYLOADS_PREFIX,)),
            "a missing payload object is told from a denied one by listing its key (asya.missingkey)",
        ),
    ]
    if write:
        calls.append(Call("payloads.write", (_PUT,), _PAYLOADS, "outgoing payloads over the offload limit (P-LARGE-2)"))
    return tuple(calls)


_SEND_MESH: Final = Call(
    "mesh.send",
    _SEND,
    Queues("*"),
    "asya-{ns}-* is the mesh's own queue naming rule (P-NAME-4): a function sends to any actor of its mesh by name, "
    "and one ARN per queue would exceed IAM's role-policy size for large meshes",
)
_TASK_RW: Final = Call("task.write", _ITEM_RW, Table(), "the task's status, fence and result items (P-STAT, P-ACK-8)")
_PREFLIGHT: Final = Call(
    "task.preflight", ("dynamodb:BatchGetItem",), Table(), "the strongly consistent pre-flight read (P-STAT-10)"
)

_KEY_USE: Final = Call(
    "key.use",
    ("kms:Decrypt", "kms:GenerateDataKey"),
    MeshKey(),
    "SQS, DynamoDB and S3 decrypt what the role reads and encrypt what it writes with the mesh's customer-managed key",
)

ACTOR: Final = Role(
    "actor",
    (_consume(), _TASK_RW, _PREFLIGHT, *_payloads(write=True), *_PROGRAMS_READ, _SEND_MESH, _HISTORY_WRITE, _KEY_USE),
)
AGGREGATOR: Final = Role(
    "aggregator",
    (
        _consume(),
        _TASK_RW,
        _PREFLIGHT,
        *_payloads(write=True),
        Call(
            "fanin.slices",
            (_GET, _PUT),
            Objects(tableschema.fanin_slice_key("*", "*")),
            "fan-in slices too large for their items (P-AGG-8)",
        ),
        *_PROGRAMS_READ,
        _SEND_MESH,
        _KEY_USE,
    ),
)
SINK: Final = Role(
    naming.SINK,
    (
        _consume(),
        _TASK_RW,
        *_payloads(write=False),
        Call(
            "checkpoint.succeeded",
            (_PUT,),
            Objects(tableschema.SUCCEEDED_PREFIX + "*"),
            "succeeded checkpoints (P-SINK-4), one object per invocation and day",
        ),
        Call(
            "checkpoint.failed",
            (_PUT,),
            Objects(tableschema.FAILED_PREFIX + "*"),
            "failed checkpoints (P-SINK-4), one object per invocation and day",
        ),
        Call("result.store", (_PUT,), _value("result"), "a result over 64 KiB (GW-DATA-6)"),
        Call("error.store", (_PUT,), _value("error_details"), "error details over 64 KiB (GW-DATA-6)"),
        _SEND_MESH,
        _KEY_USE,
    ),
)
SUMP: Final = Role(
    naming.SUMP,
    (
        _consume(),
        _TASK_RW,
        *_payloads(write=False),
        Call(
            "checkpoint.failed",
            (_PUT,),
            Objects(tableschema.FAILED_PREFIX + "*"),
            "failed checkpoints (P-SUMP-4), one object per invocation and day",
        ),
        Call(
            "unparsed.store",
            (_PUT,),
            Objects(tableschema.UNPARSED_PREFIX + "*"),
            "bodies that do not parse, one object per message (P-SUMP-5)",
        ),
        _KEY_USE,
    ),
)
PAUSE: Final = Role(
    naming.PAUSE,
    (
        _consume(),
        _TASK_RW,
        _PREFLIGHT,
        *_payloads(write=False),
        Call(
            "paused.store",
            (_PUT,),
            _PAUSED,
            "paused/{id}.json (P-PAUSE-4), stored again only if missing by a conditional write (P-PAUSE-5)",
        ),
        Call("pause.metadata", (_PUT,), _value("pause_metadata"), "pause metadata over 64 KiB (GW-DATA-6)"),
        _SEND_MESH,
        _KEY_USE,
    ),
)
RESUME: Final = Role(
    naming.RESUME,
    (
        _consume(),
        _PREFLIGHT,  # a resume's own fence is the gateway's write (P-RESUME-2, P-ACK-8)
        Call(
            "pause.expire",
            ("dynamodb:UpdateItem",),
            Table(),
            "a pause's expiry: the conditional paused -> running write of a pause nobody resumed (P-WAIT-2)",
        ),
        *_payloads(write=True),
        Call(
            "paused.load",
            (_GET, _DELETE),
            _PAUSED,
            "paused/{id}.json is read, then deleted after the send (P-RESUME-3, P-RESUME-6)",
        ),
        Call(
            "paused.list",
            (_LIST,),
            Listing((tableschema.PAUSED_PREFIX,)),
            "a missing paused file (an already delivered resume, P-RESUME-3) is told from a denied read by listing "
            "its key (asya.missingkey)",
        ),
        *_PROGRAMS_READ,
        _SEND_MESH,
        _KEY_USE,
    ),
)
GATEWAY: Final = Role(
    "gateway",
    (
        Call(
            "task.manage",
            (*_ITEM_RW, "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"),
            Table(),
            "task creation and its undo (GW-CREATE-8), reads, follows, MCP sessions",
        ),
        Call("task.list", ("dynamodb:Query",), Index(LISTING_INDEXES), "the task list (GW-LIST)"),
        Call(
            "values.manage",
            (_GET, _PUT, _DELETE),
            Objects(tableschema.TASKS_PREFIX + "*"),
            "task values over 64 KiB (GW-DATA-6), written at creation, read back, deleted by an undone create",
        ),
        Call(
            "values.list",
            (_LIST,),
            Listing((tableschema.TASKS_PREFIX, tableschema.PAUSED_PREFIX, tableschema.PAYLOADS_PREFIX)),
            "an undone create lists the task's values (GW-CREATE-8); missing keys are told from denied ones "
            "(asya.missingkey)",
        ),
        Call("payloads.read", (_GET,), _PAYLOADS, "payload references the gateway reads back"),
        Call(
            "checkpoint.read",
            (_GET,),
            Objects(tableschema.SUCCEEDED_PREFIX + "*"),
            "a succeeded task's result, read from its checkpoint line with a ranged GET (GW-DATA-10)",
        ),
        Call(
            "history.read",
            (_GET,),
            _HISTORY_READ,
            "the run history's objects, walked backwards from the task item's chain head (P-HIST-5)",
        ),
        Call(
            "history.list",
            (_LIST,),
            Listing((tableschema.HISTORY_PREFIX,)),
            "a history object still being written is told from a denied one by listing its key (asya.missingkey)",
        ),
        Call("payloads.write", (_PUT,), _PAYLOADS, "create payloads over the offload limit (P-LARGE-2)"),
        Call(
            "paused.check",
            (_GET, _DELETE),
            _PAUSED,
            "a resume checks paused/{id}.json exists (GW-RESUME-2); a paused task's view reads its state "
            "(GW-TASK-10); a cancel deletes it (GW-CANCEL-1)",
        ),
        Call(
            "paused.list",
            (_LIST,),
            Listing((tableschema.PAUSED_PREFIX,)),
            "a paused file not stored yet (x-pause writes the status first, P-PAUSE-5) is told from a denied read by "
            "listing its key (asya.missingkey), for a paused task's view and a cancel",
        ),
        Call(
            "programs.store",
            (_PUT,),
            _PROGRAMS,
            "flows/{digest}.json: each flow program a task starts with, written once, only if missing (P-FLOWV-3)",
        ),
        _SEND_MESH,
        Call(
            "dlq.redrive",
            ("sqs:ReceiveMessage", "sqs:DeleteMessage"),
            Queues("*-dlq"),
            "the console's Redrive button moves DLQ messages back to their actor's queue (GW-DLQ-1): receive, send "
            "(mesh.send), delete what was sent; every DLQ of the mesh is asya-{ns}-{actor}-dlq (P-NAME-4)",
        ),
        Call(
            "queues.metrics",
            ("cloudwatch:GetMetricStatistics",),
            Unscoped(),
            "cloudwatch:GetMetricStatistics has no resource-level permissions; it only reads metrics (GW-OPS-3)",
        ),
        _KEY_USE,
    ),
)
BACKSTOP: Final = Role(
    "backstop",
    (
        _consume(),
        Call(
            "task.time-out",
            ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"),
            Table(),
            "the timer's task read and the timeout write (GW-BACK-2)",
        ),
        Call("task.sweep", ("dynamodb:Query",), Index(tuple(sorted(DEADLINE_INDEXES))), "the sweep (GW-BACK-1)"),
        Call(
            "timer.rearm",
            ("sqs:SendMessage", "sqs:GetQueueUrl"),
            Queues(naming.DEADLINE),
            "a timer due before its deadline is sent again (an SQS delay stops at 900 s, GW-BACK-1)",
        ),
        _KEY_USE,
    ),
)

#: Every role, by name.
ROLES: Final = {role.name: role for role in (ACTOR, AGGREGATOR, SINK, SUMP, PAUSE, RESUME, GATEWAY, BACKSTOP)}


def role_of(actor: str) -> Role:
    """The role of a deployed actor: its crew role, ``aggregator`` for ``x-fanin-*``, else ``actor``."""
    if actor in ROLES and naming.is_crew(actor):
        return ROLES[actor]
    if naming.is_aggregator(actor):
        return AGGREGATOR
    return ACTOR
