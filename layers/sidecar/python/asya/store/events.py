"""Event-log items of a task (GATEWAY GW-DATA-3, GW-SSE-3, GW-SSE-11; PROTOCOL P-STAT-15..17).

A ``status`` event item holds one event: ``sk = EV#{seq:012d}``, ``first_seq = seq``, ``data`` = the status data
object (GW-TASK-2; a value held in S3 appears as ``{field}_s3``, turned into ``{field}_url`` on read). A ``fly`` flush
of ``n`` values reserved ``n`` consecutive numbers ending at ``last``; it is stored as one item per chunk of at most
~300 KiB, each with ``sk`` = the last number of its chunk and ``first_seq`` = its first, ``values`` = JSON array of
``{payload, actor, envelope_id}``, or, when every value of the chunk has the same origin (the usual flush of one
envelope), ``envelope_id`` and ``actor`` (absent for ``None``) on the item and ``values`` = JSON array of the payloads
(GW-DATA-8: the origin is not repeated per value). Every event item expires 24 h after its append (``ttl``); readers
skip expired items (GW-DATA-5) and values at or below the position they were asked to start after.

Event 1, ``Task created``, has no item of its own: its data is fixed by the task item's ``id`` and ``created_at``, so
the task item is its record (GW-CREATE-7 without a transaction, GW-DATA-8) and :func:`created_event` rebuilds it,
for 24 h like any event. An ``EV#000000000001`` item, written by an earlier release, is read as it is instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from asya.envelope import dumps
from asya.store import records as rec
from asya.store.views import status_data
from asya.timeutil import parse_ts

__all__ = ["FLY_VALUE_LIMIT", "FlyValue", "created_event", "expand_events", "fly_items", "status_event_item"]

#: A single FLY value over this size (encoded) is logged as a truncation marker (P-STAT-17).
FLY_VALUE_LIMIT: Final = 256 * 1024
_CHUNK_LIMIT: Final = 300 * 1024
_FLY_KEYS: Final = frozenset({"payload", "actor", "envelope_id"})


@dataclass(frozen=True, slots=True)
class FlyValue:
    """One FLY value with its origin (P-STAT-17); ``actor`` is ``None`` for external producers (GW-EVT-4)."""

    payload: Any
    actor: str | None
    envelope_id: str

    def to_dict(self) -> dict[str, Any]:
        size = len(dumps(self.payload).encode("utf-8"))
        payload = {"__truncated__": True, "size_bytes": size} if size > FLY_VALUE_LIMIT else self.payload
        return {"payload": payload, "actor": self.actor, "envelope_id": self.envelope_id}


def _base(task_id: str, last_seq: int, first_seq: int, kind: str, *, now: datetime, now_ms: str) -> dict[str, Any]:
    return {
        "pk": rec.str_av(rec.task_pk(task_id)),
        "sk": rec.str_av(rec.event_sk(last_seq)),
        "first_seq": rec.num_av(first_seq),
        "type": rec.str_av(kind),
        "created_at": rec.str_av(now_ms),
        "ttl": rec.num_av(rec.epoch(now + rec.EVENT_TTL)),
    }


def status_event_item(
    task_id: str,
    seq: int,
    *,
    data: Mapping[str, Any],
    actor: str | None,
    envelope_id: str | None,
    now: datetime,
    now_ms: str,
) -> dict[str, Any]:
    item = _base(task_id, seq, seq, "status", now=now, now_ms=now_ms)
    item["status"] = rec.str_av(str(data["status"]))
    item["data"] = rec.json_av(dict(data))
    if actor is not None:
        item["actor"] = rec.str_av(actor)
    if envelope_id is not None:
        item["envelope_id"] = rec.str_av(envelope_id)
    return item


def fly_items(
    task_id: str, last_seq: int, values: Sequence[Mapping[str, Any]], *, now: datetime, now_ms: str
) -> list[dict[str, Any]]:
    """Items for ``values`` holding the numbers ``last_seq - len(values) + 1 .. last_seq``, in order."""
    chunks: list[list[Mapping[str, Any]]] = [[]]
    size = 0
    for value in values:
        length = len(dumps(dict(value)))
        if chunks[-1] and size + length > _CHUNK_LIMIT:
            chunks.append([])
            size = 0
        chunks[-1].append(value)
        size += length + 1
    items = []
    seq = last_seq - len(values)
    for chunk in chunks:
        first = seq + 1
        seq += len(chunk)
        item = _base(task_id, seq, first, "fly", now=now, now_ms=now_ms)
        origins = {(value.get("actor"), value.get("envelope_id")) for value in chunk}
        plain = all(value.keys() == _FLY_KEYS for value in chunk)
        if plain and len(origins) == 1 and isinstance(chunk[0]["envelope_id"], str):
            # one origin (a flush of one envelope): said once on the item, so a flush of a few words stays under the
            # 1 KB write unit instead of repeating a 36-character id per value (GW-DATA-8)
            actor, envelope_id = next(iter(origins))
            item["envelope_id"] = rec.str_av(str(envelope_id))
            if actor is not None:
                item["actor"] = rec.str_av(str(actor))
            item["values"] = rec.str_av("[" + ",".join(dumps(value["payload"]) for value in chunk) + "]")
        else:
            item["values"] = rec.str_av("[" + ",".join(dumps(dict(value)) for value in chunk) + "]")
        items.append(item)
    return items


def created_event(task_item: Mapping[str, Any], *, now: datetime) -> dict[str, Any] | None:
    """Event 1 of the task whose item is ``task_item``; ``None`` once it would have expired (24 h after creation)."""
    created_text = rec.get_str(task_item, "created_at")
    created_at = parse_ts(created_text)
    if created_text is None or created_at is None:
        return None
    if rec.is_expired(task_item, now) or created_at + rec.EVENT_TTL <= now:
        return None
    # the task item as it was written: its status data is event 1's, built by the one function that builds them all
    as_created = rec.new_task_item(
        rec.get_str(task_item, "id") or "", actor="", flow=None, deadline_at=None, context_id=None, now_ms=created_text
    )
    return {"seq": 1, "event": "status", "data": status_data(as_created, {})}


def expand_events(
    items: Iterable[Mapping[str, Any]],
    *,
    after_seq: int,
    now: datetime,
    resolve: Callable[[dict[str, Any]], dict[str, Any]],
) -> list[dict[str, Any]]:
    """``[{"seq", "event", "data"}]`` in sequence order: one entry per status event and per FLY value.

    ``resolve`` turns the stored status data into the data clients see (``{field}_s3`` into ``{field}_url``).
    """
    events: list[dict[str, Any]] = []
    task_item: Mapping[str, Any] | None = None
    for item in items:
        if rec.get_str(item, "sk") == rec.TASK_SK:
            task_item = item
            continue
        if rec.is_expired(item, now):
            continue
        kind = rec.get_str(item, "type")
        last = int((rec.get_str(item, "sk") or rec.EVENT_PREFIX + "0")[len(rec.EVENT_PREFIX) :])
        if kind == "status":
            if last > after_seq:
                events.append({"seq": last, "event": "status", "data": resolve(rec.get_json(item, "data", {}))})
        elif kind == "fly":
            first = rec.get_int(item, "first_seq") or last
            envelope_id = rec.get_str(item, "envelope_id")
            actor = rec.get_str(item, "actor")
            for offset, value in enumerate(rec.get_json(item, "values", [])):
                seq = first + offset
                if seq > after_seq:
                    data = (
                        value if envelope_id is None else {"payload": value, "actor": actor, "envelope_id": envelope_id}
                    )
                    events.append({"seq": seq, "event": "fly", "data": data})
    if task_item is not None and after_seq < 1 and not any(event["seq"] == 1 for event in events):
        created = created_event(task_item, now=now)
        if created is not None:
            events.append(created)
    events.sort(key=lambda event: int(event["seq"]))
    return events
