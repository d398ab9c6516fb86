"""Billing units of the AWS requests the mesh makes: pure arithmetic, no I/O, no imports beyond the standard library.

The rules are AWS's published billing rules (us-east-1, checked 2026-11; re-check before quoting):

- **DynamoDB item size**: the sum over attributes of the UTF-8 length of the name plus the size of the value. Strings:
  UTF-8 bytes; binary: raw bytes; numbers: 1 byte per two significant digits + 1; booleans and null: 1 byte; lists and
  maps: 3 bytes + 1 byte per element + the elements (map keys count as names); sets: the sum of their elements.
- **DynamoDB write units** (on-demand WRU): one per started 1 KB of the larger of the old and the new item, at least 1;
  twice that inside a transaction (GW-DATA-8). A failed conditional write is billed like a write of the stored item.
  Every global secondary index the item is (or was) in is written too, billed by the size of the index entry (the
  table and index keys plus the projected attributes; the whole item for an ``ALL`` projection): a put when the item
  enters the index, a delete when it leaves, an update when it stays and its entry changed, and a delete plus a put
  when its index key changes. An update that changes no key and no projected attribute does not write the index.
- **DynamoDB read units** (RRU): one per started 4 KB of each item read strongly consistently (half for eventually
  consistent, twice in a transaction), at least one per item asked for, found or not; a projection does not reduce
  it. A query is billed on the sum of the sizes it read, rounded up once.
- **SQS**: every request is billed per started 64 KB chunk of its payload (bodies and message attributes), at least 1.
- **S3**: PUT, COPY, POST and LIST are tier-1 requests; GET, HEAD and the rest tier-2; DELETE is free.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

__all__ = [
    "DYNAMODB_READ_BLOCK",
    "DYNAMODB_WRITE_BLOCK",
    "SQS_CHUNK",
    "IndexSpec",
    "WriteUnits",
    "attribute_value_size",
    "index_write_units",
    "item_read_units",
    "item_size",
    "number_size",
    "query_read_units",
    "s3_request_class",
    "sqs_billed_requests",
    "write_units",
]

DYNAMODB_WRITE_BLOCK: Final = 1024
DYNAMODB_READ_BLOCK: Final = 4 * 1024
SQS_CHUNK: Final = 64 * 1024

_S3_TIER1: Final = frozenset(
    {
        "PutObject",
        "CopyObject",
        "PostObject",
        "ListObjects",
        "ListObjectsV2",
        "ListObjectVersions",
        "ListBuckets",
        "ListMultipartUploads",
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
    }
)
_S3_FREE: Final = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})
_EXPONENT: Final = re.compile(r"[eE][+-]?\d+$")


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number: one per two significant digits, plus one."""
    digits = _EXPONENT.sub("", text.strip()).lstrip("+-").replace(".", "").strip("0")
    return (max(len(digits), 1) + 1) // 2 + 1


def attribute_value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one DynamoDB attribute value in wire form (``{"S": "..."}``, ``{"M": {...}}``...)."""
    if len(value) != 1:
        raise ValueError(f"attribute value must have exactly one type key, got {sorted(value)!r}")
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(str(inner).encode("utf-8"))
    if kind == "N":
        return number_size(str(inner))
    if kind == "B":
        return len(inner) if isinstance(inner, bytes | bytearray) else len(str(inner).encode("utf-8"))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(v).encode("utf-8")) for v in inner)
    if kind == "NS":
        return sum(number_size(str(v)) for v in inner)
    if kind == "BS":
        return sum(len(v) if isinstance(v, bytes | bytearray) else len(str(v).encode("utf-8")) for v in inner)
    if kind == "L":
        return 3 + sum(1 + attribute_value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + attribute_value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    """Bytes of a DynamoDB item in wire form; 0 for no item."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + attribute_value_size(value) for name, value in item.items())


def _blocks(size: int, block: int) -> int:
    return max(1, math.ceil(size / block))


def write_units(old_size: int, new_size: int, *, transactional: bool = False) -> int:
    """WRU of one table write: per started 1 KB of the larger item, at least 1, doubled in a transaction."""
    if old_size < 0 or new_size < 0:
        raise ValueError(f"item sizes must be >= 0, got old={old_size!r} new={new_size!r}")
    units = _blocks(max(old_size, new_size), DYNAMODB_WRITE_BLOCK)
    return 2 * units if transactional else units


class IndexSpec(NamedTuple):
    """A global secondary index: its key attribute names and the non-key attributes it projects (``None``: all)."""

    partition_key: str
    sort_key: str
    projected: frozenset[str] | None = None


def _index_entry(
    item: Mapping[str, Mapping[str, Any]] | None, index: IndexSpec, table_keys: tuple[str, ...]
) -> dict[str, Mapping[str, Any]] | None:
    """The item's entry in ``index``, or ``None`` when the item is not in it (sparse index)."""
    if not item or index.partition_key not in item or index.sort_key not in item:
        return None
    if index.projected is None:
        return dict(item)
    names = {*table_keys, index.partition_key, index.sort_key, *index.projected}
    return {name: value for name, value in item.items() if name in names}


def index_write_units(
    old: Mapping[str, Mapping[str, Any]] | None,
    new: Mapping[str, Mapping[str, Any]] | None,
    indexes: Iterable[IndexSpec | tuple[str, str]],
    *,
    table_keys: tuple[str, ...] = ("pk", "sk"),
) -> int:
    """WRU the global secondary indexes consume for one change of an item from ``old`` to ``new`` (``None``:
    absent). An index is written only when the item enters or leaves it, or its entry (keys and projected
    attributes) changes; it is billed by entry size: a put, a delete, an update of the larger entry, or a delete plus
    a put when the index key changes."""
    total = 0
    for raw in indexes:
        index = raw if isinstance(raw, IndexSpec) else IndexSpec(*raw)
        before, after = _index_entry(old, index, table_keys), _index_entry(new, index, table_keys)
        if before is not None and after is not None:
            keys = (index.partition_key, index.sort_key)
            if any(before[k] != after[k] for k in keys):
                total += _blocks(item_size(before), DYNAMODB_WRITE_BLOCK) + _blocks(
                    item_size(after), DYNAMODB_WRITE_BLOCK
                )
            elif before != after:
                total += _blocks(max(item_size(before), item_size(after)), DYNAMODB_WRITE_BLOCK)
        elif before is not None:
            total += _blocks(item_size(before), DYNAMODB_WRITE_BLOCK)
        elif after is not None:
            total += _blocks(item_size(after), DYNAMODB_WRITE_BLOCK)
    return total


class WriteUnits:
    """Table and index WRU of one item write."""

    __slots__ = ("index", "table")

    def __init__(self, table: int, index: int) -> None:
        self.table = table
        self.index = index

    @property
    def total(self) -> int:
        return self.table + self.index

    @classmethod
    def of_change(
        cls,
        old: Mapping[str, Mapping[str, Any]] | None,
        new: Mapping[str, Mapping[str, Any]] | None,
        indexes: Iterable[IndexSpec | tuple[str, str]],
        *,
        transactional: bool = False,
    ) -> WriteUnits:
        """The WRU of writing ``new`` over ``old`` (either may be absent; a failed condition passes ``new=old``)."""
        table = write_units(item_size(old), item_size(new), transactional=transactional)
        return cls(table, index_write_units(old, new, indexes))

    def __repr__(self) -> str:
        return f"WriteUnits(table={self.table}, index={self.index})"


def item_read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    """RRU of reading one item of ``size`` bytes (a missing item is billed as a small one)."""
    units = float(_blocks(size, DYNAMODB_READ_BLOCK))
    if transactional:
        return 2 * units
    return units if consistent else units / 2


def query_read_units(sizes: Sequence[int], *, consistent: bool) -> float:
    """RRU of a query that read items of ``sizes`` bytes: the sum rounded up to 4 KB once, at least 1 block."""
    units = float(_blocks(sum(sizes), DYNAMODB_READ_BLOCK))
    return units if consistent else units / 2


def sqs_billed_requests(payload_bytes: int) -> int:
    """Billed SQS requests of one API call carrying ``payload_bytes``: per started 64 KB chunk, at least 1."""
    if payload_bytes < 0:
        raise ValueError(f"payload_bytes must be >= 0, got {payload_bytes!r}")
    return _blocks(payload_bytes, SQS_CHUNK)


def s3_request_class(operation: str) -> str:
    """``"tier1"`` (PUT, COPY, POST, LIST), ``"free"`` (DELETE) or ``"tier2"`` (GET, HEAD and the rest)."""
    if operation in _S3_TIER1:
        return "tier1"
    if operation in _S3_FREE:
        return "free"
    return "tier2"
