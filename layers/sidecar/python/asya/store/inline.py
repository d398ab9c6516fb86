"""Input and result kept on the task item itself (GW-DATA-8, docs/protocol.md GW-DATA-8).

DynamoDB on-demand bills a write one unit per started 1 KB of the larger of the item before and after it, where an
item's size is the sum of its attribute names' and values' lengths (strings: UTF-8 bytes; numbers: about one byte per
two digits plus one; booleans and nulls: one byte). A task whose values are small keeps them on the task item so the
body and result items, one write each, are never written:

- the input goes on the task item as ``payload`` (JSON text) when the created item with it is at most
  :data:`CREATED_ROOM` bytes;
- the result of a succeeded task goes on its terminal update as ``result`` (JSON text) when that attribute is at
  most :data:`RESULT_ROOM` bytes (name included).

The split keeps every write of the task item under 1 KB on the success path: the created item (at most
``CREATED_ROOM``), plus what the hop claims and the terminal write add to it (:data:`HOT_ROOM`: fence, lease, current
actor, step, message, terminal tag, checkpoint; 209 bytes on the bench's example task), plus the result (at most
``RESULT_ROOM``) is at most 1,024 bytes. A hot field longer than usual (a 128-byte message, long actor names) may push
a write over 1 KB: it then bills 2 units, nothing else changes. Larger values keep their own items, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CREATED_ROOM",
    "HOT_ROOM",
    "RESULT_ROOM",
    "TASK_ITEM_LIMIT",
    "attribute_size",
    "item_size",
    "payload_fits",
    "result_fits",
]

#: One write unit covers an item of up to this many bytes.
TASK_ITEM_LIMIT: Final = 1024
#: Room left for the hot fields the claims and the terminal write add to a created task item.
HOT_ROOM: Final = 224
#: Largest ``result`` attribute (name + JSON text) a terminal update carries on the task item.
RESULT_ROOM: Final = 300
#: Largest created task item that may hold its input.
CREATED_ROOM: Final = TASK_ITEM_LIMIT - HOT_ROOM - RESULT_ROOM


def _number_size(text: str) -> int:
    # one byte per two significant digits (leading and trailing zeros trimmed), plus one
    mantissa = text.strip().lower().split("e", 1)[0]
    digits = mantissa.lstrip("+-").replace(".", "").strip("0")
    return (max(len(digits), 1) + 1) // 2 + 1


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode("utf-8"))
    if kind == "N":
        return _number_size(str(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "B":
        return len(inner)
    if kind == "SS":
        return sum(len(str(v).encode("utf-8")) for v in inner)
    if kind == "NS":
        return sum(_number_size(str(v)) for v in inner)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + _value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Bytes of a DynamoDB item in wire form, as DynamoDB counts them for billing."""
    return sum(len(name.encode("utf-8")) + _value_size(value) for name, value in item.items())


def attribute_size(name: str, text: str) -> int:
    """Bytes of one string attribute."""
    return len(name.encode("utf-8")) + len(text.encode("utf-8"))


def payload_fits(created: Mapping[str, Mapping[str, Any]], text: str) -> bool:
    """Whether the input's JSON ``text`` may go on the ``created`` task item (GW-DATA-8)."""
    return item_size(created) + attribute_size("payload", text) <= CREATED_ROOM


def result_fits(text: str) -> bool:
    """Whether a succeeded task's result JSON ``text`` may go on its terminal update (GW-DATA-8)."""
    return attribute_size("result", text) <= RESULT_ROOM
