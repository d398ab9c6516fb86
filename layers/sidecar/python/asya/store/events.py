"""FLY items of a task, the only event items (GW-DATA-3, GW-SSE-5, GW-SSE-11; P-STAT-15..17).

Status changes are numbered on the task item (``last_seq``) but stored as no item: readers emit ``status`` events from
the task item itself (GW-SSE-3). A ``fly`` flush of ``n`` values took the numbers ending at ``last`` with one atomic
``ADD`` on the task item; it is stored as one item per chunk of at most ~300 KiB, each with ``sk = EV#{last number of
its chunk:012d}`` and ``first_seq`` = its first, ``values`` = JSON array of ``{payload, actor, envelope_id}``, or, when
every value of the chunk has the same origin (the usual flush of one envelope), ``envelope_id`` and ``actor`` (absent
for ``None``) on the item and ``values`` = JSON array of the payloads (GW-DATA-8: the origin is not repeated per
value). Every item expires 24 h after its append (``ttl``); readers skip expired items (GW-DATA-5) and values at or
below the position they were asked to start after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from asya.envelope import dumps
from asya.store import records as rec

__all__ = ["FLY_VALUE_LIMIT", "FlyValue", "expand_fly", "fly_items"]

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


def expand_fly(items: Iterable[Mapping[str, Any]], *, after_seq: int, now: datetime) -> list[dict[str, Any]]:
    """``[{"seq", "event": "fly", "data"}]`` in number order, one entry per FLY value above ``after_seq``; items other
    than fly items (a follower's query also returns the task's ``PAUSE``/``RESULT``/``TASK`` items) are skipped."""
    events: list[dict[str, Any]] = []
    for item in items:
        sk = rec.get_str(item, "sk") or ""
        if not sk.startswith(rec.EVENT_PREFIX) or rec.get_str(item, "type") != "fly" or rec.is_expired(item, now):
            continue
        last = int(sk[len(rec.EVENT_PREFIX) :])
        first = rec.get_int(item, "first_seq") or last
        envelope_id = rec.get_str(item, "envelope_id")
        actor = rec.get_str(item, "actor")
        for offset, value in enumerate(rec.get_json(item, "values", [])):
            seq = first + offset
            if seq > after_seq:
                data = value if envelope_id is None else {"payload": value, "actor": actor, "envelope_id": envelope_id}
                events.append({"seq": seq, "event": "fly", "data": data})
    events.sort(key=lambda event: int(event["seq"]))
    return events
