"""Item layout of the task table (GW-DATA-2, GW-DATA-5, GW-DATA-6, GW-DATA-8) and DynamoDB helpers.

Partition ``pk = TASK#{id}`` holds, by ``sk``:

- ``TASK``, the hot item, kept under 1 KB (GW-DATA-8): ``id``, ``status``, ``status_order``, ``created_at``,
  ``updated_at``, ``flow``, ``actor``, ``current_actor``, ``step``, ``progress_percent``, ``message`` (<= 128 bytes),
  ``deadline_at``, ``last_seq``, ``status_seq`` (the number of the latest status change), ``fly_from``/``fly_to``
  (the numbers of the newest FLY flush), ``data`` (JSON of the small extra status data), ``error`` (<= 256 bytes),
  ``failed_actor``, ``checkpoint_key``, ``checkpoint_line``, ``result_span`` (``{offset}+{length}`` of the checkpoint
  line holding a succeeded task's result, GW-DATA-10), ``remaining_seconds``, ``context_id``, the hop fence
  ``fence_h``/``fence_a`` with ``lease_until`` (epoch milliseconds, P-ACK-8), ``terminal_by`` and ``has_result``
  (GW-DATA-2), ``ctok`` (the token of the last create or claim, :data:`WRITE_TOKEN`: a write the SDK sent again after
  its answer was lost finds its own token, GW-OVL-5), the index keys and ``ttl`` (30 days after a terminal status);
  ``payload`` and ``result`` (JSON text) when they fit (``asya.store.inline``, GW-DATA-8), in place of the two
  items below;
- ``BODY``: the input ``payload`` as JSON text (or ``payload_s3``), written once at creation with its ``ttl``, only
  for an input too large for the task item;
- ``RESULT``: ``result`` and/or ``error_details`` (or ``{field}_s3``), written by the holder of ``terminal_by``, only
  for values neither on the task item nor, for a result, in the checkpoint line the task item names;
- ``PAUSE``: ``pause_metadata`` and the pause fence (P-PAUSE-5);
- ``EV#{last number:012d}``: a FLY flush (``first_seq``, ``values``, ``actor``, ``envelope_id``, ``ttl`` 24 h);
- ``CHILD#{id}``: the hop fence of a fan-out child of this task (``fence_h``, ``fence_a``, ``lease_until``,
  ``actor``, ``ttl`` 15 days); never a task.

Indexes, keys only (``asya.tableschema``): ``by_created`` (``gsi1pk = TASKS#{day of created_at}#{shard}``, ``gsi1sk =
{created_at}#{id}``, written at creation, never changed), ``by_outcome`` (sparse: ``gsi2pk =
OUTCOME#{status}#{day}#{shard}``, same sort key, written only by a failed or canceled terminal write), where ``shard``
is :func:`index_shard` of the id, ``0..7`` (GW-DATA-2): a GSI partition takes about 1,000 writes/s and a throttled
index throttles the table's writes, so one partition per day would cap task creation near 1,000/s; the listing merges
a day's shards (``asya.store.listing``). ``long_deadlines`` (sparse: ``gsi3pk =
LONGDL#{0..15}`` from a SHA-256 of the id, ``gsi3sk = deadline_at``, only for a deadline more than
:data:`LONG_DEADLINE_SECONDS` away when armed, removed at the terminal write). JSON values are stored as text so that
any JSON (floats, empty strings, nulls) round-trips exactly. Values over 64 KiB encoded live in S3 at
``tasks/{id}/{field}.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final, TypeGuard

from asya import tableschema
from asya.envelope import dumps

__all__ = [
    "BODY_FIELDS",
    "BODY_SK",
    "BODY_TTL_EXTRA",
    "CHILD_PREFIX",
    "CHILD_TTL",
    "CREATED_MESSAGE",
    "DEADLINE_SHARDS",
    "EVENT_PREFIX",
    "EVENT_TTL",
    "INDEX_SHARDS",
    "INLINE_LIMIT",
    "LONG_DEADLINE_SECONDS",
    "PAUSE_SK",
    "RESULT_SK",
    "RESULT_TTL",
    "TASKS_PREFIX",
    "TASK_SK",
    "TERMINAL_TTL",
    "VIEW_INLINE_LIMIT",
    "WRITE_TOKEN",
    "child_sk",
    "created_index_pk",
    "day_of",
    "deadline_shard",
    "epoch",
    "epoch_ms",
    "event_sk",
    "fits_sort_key",
    "get_int",
    "get_json",
    "get_num",
    "get_str",
    "index_shard",
    "index_sk",
    "is_expired",
    "is_storable_id",
    "json_av",
    "key",
    "new_task_item",
    "new_write_token",
    "num_av",
    "outcome_index_pk",
    "parse_span",
    "span_text",
    "str_av",
    "task_pk",
]

TASK_SK: Final = "TASK"
#: The attribute of a fence item that holds the token of the create or hop claim that wrote it last (GW-OVL-5).
WRITE_TOKEN: Final = "ctok"
BODY_SK: Final = "BODY"
RESULT_SK: Final = "RESULT"
PAUSE_SK: Final = "PAUSE"
EVENT_PREFIX: Final = "EV#"
CHILD_PREFIX: Final = "CHILD#"
#: S3 prefix of task values too large for the body item (GW-DATA-6, GW-DATA-7).
TASKS_PREFIX: Final = tableschema.TASKS_PREFIX
BODY_FIELDS: Final = ("payload", "result", "error_details", "pause_metadata")
#: The message of a new task and of its event 1 (GW-CREATE-7).
CREATED_MESSAGE: Final = "Task created"

TERMINAL_TTL: Final = timedelta(days=30)
RESULT_TTL: Final = timedelta(days=30)
EVENT_TTL: Final = timedelta(hours=24)
CHILD_TTL: Final = timedelta(days=15)
#: The body item expires this long after the task's own timeout (GW-DATA-2: flow timeout + 31 days), so the terminal
#: write never has to touch it.
BODY_TTL_EXTRA: Final = timedelta(days=31)
#: A deadline further away than this is not armed with an SQS timer (at most 900 s of delay) but indexed in
#: ``long_deadlines`` and swept (GW-BACK-1).
LONG_DEADLINE_SECONDS: Final = 900
#: Values larger than this (encoded) are stored in S3 (GW-DATA-6).
INLINE_LIMIT: Final = 64 * 1024
#: The task view inlines S3-held values up to this size, else it returns a presigned URL (GW-DATA-6).
VIEW_INLINE_LIMIT: Final = 4 * 1024 * 1024
DEADLINE_SHARDS: Final = 16
#: Partitions per day of ``by_created`` and per status and day of ``by_outcome`` (GW-DATA-2): the default and the
#: least; a deployment sized for more creations writes and lists more (``TaskStore(index_shards=)``).
INDEX_SHARDS: Final = 8
_SEQ_DIGITS: Final = 12
_MAX_PARTITION_KEY_BYTES: Final = 2048
_MAX_SORT_KEY_BYTES: Final = 1024


def span_text(span: tuple[int, int]) -> str:
    """``result_span`` as stored: ``{offset}+{length}`` (GW-DATA-10)."""
    offset, length = span
    return f"{offset}+{length}"


def parse_span(text: str | None) -> tuple[int, int] | None:
    """A stored ``result_span`` back as ``(offset, length)``; ``None`` for none or a malformed one."""
    offset, plus, length = (text or "").partition("+")
    if not plus or not offset.isdigit() or not length.isdigit():
        return None
    return int(offset), int(length)


def task_pk(task_id: str) -> str:
    return f"TASK#{task_id}"


def is_storable_id(task_id: str) -> bool:
    """Whether ``TASK#{id}`` fits DynamoDB's 2048-byte partition key: a longer id names no task, and a read with it
    is a ``ValidationException`` rather than "not found"."""
    return len(task_pk(task_id).encode("utf-8")) <= _MAX_PARTITION_KEY_BYTES


def fits_sort_key(value: str) -> bool:
    """Whether ``value`` fits DynamoDB's 1024-byte sort key (a longer one in a request is a ``ValidationException``)."""
    return len(value.encode("utf-8")) <= _MAX_SORT_KEY_BYTES


def key(task_id: str, sk: str) -> dict[str, Any]:
    return {"pk": str_av(task_pk(task_id)), "sk": str_av(sk)}


def child_sk(child_id: str) -> str:
    return f"{CHILD_PREFIX}{child_id}"


def event_sk(seq: int) -> str:
    return f"{EVENT_PREFIX}{seq:0{_SEQ_DIGITS}d}"


def day_of(timestamp: str) -> str:
    """``YYYY-MM-DD`` of a task-record timestamp (``format_ts_ms`` form)."""
    return timestamp[:10]


def _id_byte(task_id: str) -> int:
    """The first byte of the id's SHA-256: the same in every process (Python's ``hash`` of a string is salted per
    process), spread evenly over the index shards."""
    return hashlib.sha256(task_id.encode("utf-8")).digest()[0]


def index_shard(task_id: str, shards: int = INDEX_SHARDS) -> int:
    """The ``by_created``/``by_outcome`` shard of a task, ``0..shards-1``. A listing that reads ``N`` shards finds
    every entry written with ``N`` or fewer, so raising the count keeps earlier days readable."""
    return _id_byte(task_id) % shards


def created_index_pk(day: str, shard: int) -> str:
    return f"TASKS#{day}#{shard}"


def outcome_index_pk(status: str, day: str, shard: int) -> str:
    return f"OUTCOME#{status}#{day}#{shard}"


def index_sk(created_at: str, task_id: str) -> str:
    return f"{created_at}#{task_id}"


def deadline_shard(task_id: str) -> str:
    return f"LONGDL#{_id_byte(task_id) % DEADLINE_SHARDS}"


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def str_av(value: str) -> dict[str, str]:
    return {"S": value}


def num_av(value: float) -> dict[str, str]:
    if isinstance(value, float) and value.is_integer():
        return {"N": str(int(value))}
    return {"N": str(value)}


def json_av(value: Any) -> dict[str, str]:
    return {"S": dumps(value)}


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # absent attributes are None, the commonest miss: the exact test spares the slow abc check for them
    return value is not None and isinstance(value, Mapping)


def new_write_token() -> str:
    """A fresh token for one conditional write (GW-OVL-5): 8 hex digits, unique enough among the writers of one
    item."""
    return os.urandom(4).hex()  # secrets.token_hex's own source, without importing hmac at start-up


def _typed(item: Mapping[str, Any], name: str, tag: str) -> Any:
    """The wire value of attribute ``name`` when it has DynamoDB type ``tag`` (``S``, ``N``), else ``None``."""
    value = item.get(name)
    # boto3 items are plain dicts: the exact test first spares the slow abc check of other mappings on the hot path
    if type(value) is dict:
        return value.get(tag)
    return value[tag] if _is_mapping(value) and tag in value else None


def get_str(item: Mapping[str, Any], name: str) -> str | None:
    text: str | None = _typed(item, name, "S")
    return text


def get_num(item: Mapping[str, Any], name: str) -> float | None:
    number = _typed(item, name, "N")
    return None if number is None else float(number)


def get_int(item: Mapping[str, Any], name: str) -> int | None:
    number = _typed(item, name, "N")
    return None if number is None else int(number)


def get_json(item: Mapping[str, Any], name: str, default: Any = None) -> Any:
    text = get_str(item, name)
    return default if text is None else json.loads(text)


def is_expired(item: Mapping[str, Any], now: datetime) -> bool:
    """True when the item's ``ttl`` has passed: DynamoDB deletes late and moto never does (GW-DATA-5)."""
    ttl = get_int(item, "ttl")
    return ttl is not None and ttl <= epoch(now)


def new_task_item(
    task_id: str,
    *,
    actor: str,
    flow: str | None,
    deadline_at: str | None,
    context_id: str | None,
    now_ms: str,
    long_deadline: bool = False,
    owner: str | None = None,
    index_shards: int = INDEX_SHARDS,
) -> dict[str, Any]:
    """The task item of a new ``pending`` task; it is also the task's event 1, ``Task created`` (GW-CREATE-7).
    ``long_deadline``: the deadline is too far away for a timer, so the task enters ``long_deadlines``."""
    item: dict[str, Any] = {
        **key(task_id, TASK_SK),
        "id": str_av(task_id),
        "status": str_av("pending"),
        "status_order": num_av(0),
        "created_at": str_av(now_ms),
        "updated_at": str_av(now_ms),
        "actor": str_av(actor),
        "progress_percent": num_av(0),
        "message": str_av(CREATED_MESSAGE),
        "last_seq": num_av(1),
        "status_seq": num_av(1),
        "gsi1pk": str_av(created_index_pk(day_of(now_ms), index_shard(task_id, index_shards))),
        "gsi1sk": str_av(index_sk(now_ms, task_id)),
    }
    if flow is not None:
        item["flow"] = str_av(flow)
    if context_id is not None:
        item["context_id"] = str_av(context_id)
    if owner is not None:  # GW-EDGE-5: the creator's subject, written with the create itself
        item["owner"] = str_av(owner)
    if deadline_at is not None:
        item["deadline_at"] = str_av(deadline_at)
        if long_deadline:
            item["gsi3pk"] = str_av(deadline_shard(task_id))
            item["gsi3sk"] = str_av(deadline_at)
    return item
