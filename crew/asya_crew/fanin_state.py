"""The aggregator's fan-in state in the task-store table and the storage bucket (P-AGG-3, P-AGG-4, P-AGG-8;
GW-DATA-1, GW-DATA-2, GW-DATA-7).

Layout (partition ``pk = FANIN#{origin_id}``; every item carries ``ttl`` = first arrival + 15 days, P-AGG-8):

- ``SLICE#{index, 6 digits}``: ``payload`` (the slice payload as received, JSON text) or ``payload_s3`` (its key);
  slice 0 also ``parent`` (JSON of ``parent_id``, ``route``, ``headers`` without ``x-asya-fan-in``, ``created_at``,
  ``deadline_at``);
- ``SET``: ``slice_count``, ``aggregation_key``, ``claimed_at``/``emitted_at`` (epoch ms); ``seen`` (number set of
  slice indexes) when ``slice_count <= SHARD_SIZE``, else ``done`` (number set of complete shards);
- ``SET#{shard, 4 digits}`` (only when ``slice_count > SHARD_SIZE``): ``slice_count`` and ``seen``, the indexes
  ``[shard * SHARD_SIZE, (shard + 1) * SHARD_SIZE)`` counted so far.

Counting without listing (P-AGG-3, the sharded set-add): :meth:`FanInState.add` makes one conditional put of the slice
item (``attribute_not_exists``: a redelivery changes nothing) and one idempotent ``ADD seen :index`` on its shard,
which answers the shard's new size; the delivery that fills a shard adds the shard's number to ``SET.done`` (again an
idempotent set-add). The set is complete when ``seen`` (one shard) or ``done`` (several) holds every member. A shard
holds at most :data:`SHARD_SIZE` indexes, so no item outgrows one write unit's worth of indexes by much, and a slice
costs the same write units whatever ``slice_count`` is (up to :data:`asya.fanin.MAX_SLICES`). Every shard update is
conditioned on the stored ``slice_count`` being absent or equal, so a slice announcing another count is refused
(:class:`SliceCountMismatchError`, P-AGG-2).

A slice payload whose JSON text exceeds :data:`ITEM_PAYLOAD_LIMIT` (100 KiB) goes to S3 at
``fanin/{origin_id}/slice-{index}.json`` first (an idempotent overwrite), the item keeps the key. Merging reads the
slices back by their known keys (``BatchGetItem``, 100 keys a call, strongly consistent) and the S3 objects by their
known keys: nothing is ever listed.

Emission (P-AGG-4): :meth:`FanInState.claim` sets ``claimed_at`` only when the set is not emitted and no claim younger
than the queue's visibility timeout exists; :meth:`FanInState.mark` sets ``emitted_at`` after the send;
:meth:`FanInState.release` drops a claim whose send failed (best effort). Every other error is raised: this is the
durability path and the record must fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from asya import tableschema
from asya.exceptions import AsyaError

__all__ = [
    "ITEM_PAYLOAD_LIMIT",
    "SHARD_SIZE",
    "FanInState",
    "FanInStateError",
    "SetProgress",
    "Slice",
    "SliceCountMismatchError",
    "slice_object_key",
]

#: Indexes per shard item (P-AGG-3 allows up to 1,000): 250 small numbers stay within about one write unit.
SHARD_SIZE: Final = 250
#: A slice payload larger than this (JSON text, bytes) is stored in S3 (P-AGG-3).
ITEM_PAYLOAD_LIMIT: Final = 100 * 1024
_TTL_SECONDS: Final = tableschema.PAYLOADS_RETENTION_DAYS * 86_400
_BATCH_GET: Final = 100
_CONDITION_FAILED: Final = "ConditionalCheckFailedException"


class FanInStateError(AsyaError):
    """The fan-in state is inconsistent (a counted slice whose item is missing); the record fails."""


class SliceCountMismatchError(AsyaError, ValueError):
    """P-AGG-2: a slice's ``slice_count`` differs from the one stored for its origin."""


@dataclass(frozen=True, slots=True)
class SetProgress:
    """The set after one slice was counted."""

    complete: bool
    emitted: bool


@dataclass(frozen=True, slots=True)
class Slice:
    """One stored slice: its index, payload (as received) and, for slice 0, the parent fields."""

    index: int
    payload: Any
    parent: dict[str, Any] | None


def slice_object_key(origin_id: str, index: int) -> str:
    """The S3 key of a slice too large for its item (GW-DATA-7)."""
    return tableschema.fanin_slice_key(origin_id, index)


class FanInState:
    """Slices, counts and the emission claim of every origin an aggregator sees."""

    def __init__(
        self,
        *,
        table: str,
        bucket: str,
        dynamodb: Any = None,
        s3: Callable[[], Any],
        shard_size: int = SHARD_SIZE,
    ) -> None:
        """``shard_size``: indexes per shard item, at most 1,000 (P-AGG-3)."""
        if not 1 <= shard_size <= 1000:
            raise ValueError(f"shard_size must be 1..1000, got {shard_size!r}")
        self._shard_size = shard_size
        self._table = table
        self._bucket = bucket
        self._dynamodb = dynamodb
        self._s3 = s3

    @property
    def dynamodb(self) -> Any:
        if self._dynamodb is None:
            from asya.awsclients import ACTOR_BUDGET, aws_client

            self._dynamodb = aws_client("dynamodb", ACTOR_BUDGET)
        return self._dynamodb

    # ------------------------------------------------------------------ storing and counting

    def add(
        self,
        origin_id: str,
        *,
        index: int,
        count: int,
        key: str,
        payload: Any,
        parent: Mapping[str, Any] | None,
        now_ms: int,
    ) -> SetProgress:
        """Store slice ``index`` of ``count`` once and count it once (P-AGG-3); raises
        :class:`SliceCountMismatchError` when ``count`` differs from the stored one."""
        ttl = str(now_ms // 1000 + _TTL_SECONDS)
        self._put_slice(origin_id, index, payload, parent, ttl)
        if count <= self._shard_size:
            state = self._add_index(origin_id, "SET", index, count, ttl, extra_key=key)
            return SetProgress(complete=len(state.get("seen", {}).get("NS", [])) == count, emitted=_emitted(state))
        shard = index // self._shard_size
        shard_size = min(self._shard_size, count - shard * self._shard_size)
        state = self._add_index(origin_id, f"SET#{shard:04d}", index, count, ttl, extra_key=None)
        if len(state.get("seen", {}).get("NS", [])) < shard_size:
            return SetProgress(complete=False, emitted=False)
        state = self._update_set(
            origin_id,
            "ADD done :v SET slice_count = if_not_exists(slice_count, :n), "
            "aggregation_key = if_not_exists(aggregation_key, :k), #ttl = if_not_exists(#ttl, :ttl)",
            {":v": {"NS": [str(shard)]}, ":n": {"N": str(count)}, ":k": {"S": key}, ":ttl": {"N": ttl}},
            count,
        )
        shards = -(-count // self._shard_size)
        return SetProgress(complete=len(state.get("done", {}).get("NS", [])) == shards, emitted=_emitted(state))

    def _put_slice(self, origin_id: str, index: int, payload: Any, parent: Mapping[str, Any] | None, ttl: str) -> None:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        item: dict[str, Any] = {
            tableschema.PARTITION_KEY: {"S": _pk(origin_id)},
            tableschema.SORT_KEY: {"S": _slice_sk(index)},
            tableschema.TTL_ATTRIBUTE: {"N": ttl},
        }
        if len(text.encode("utf-8")) > ITEM_PAYLOAD_LIMIT:
            object_key = slice_object_key(origin_id, index)
            self._s3().put_object(
                Bucket=self._bucket, Key=object_key, Body=text.encode("utf-8"), ContentType="application/json"
            )
            item["payload_s3"] = {"S": object_key}
        else:
            item["payload"] = {"S": text}
        if parent is not None:
            item["parent"] = {"S": json.dumps(parent, separators=(",", ":"), ensure_ascii=False)}
        try:
            self.dynamodb.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": tableschema.PARTITION_KEY},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != _CONDITION_FAILED:
                raise
            # a redelivered slice: stored before, but maybe not counted (a crash in between): the set-add repeats

    def _add_index(
        self, origin_id: str, sk: str, index: int, count: int, ttl: str, *, extra_key: str | None
    ) -> dict[str, Any]:
        expression = "ADD seen :v SET slice_count = if_not_exists(slice_count, :n), #ttl = if_not_exists(#ttl, :ttl)"
        values: dict[str, Any] = {":v": {"NS": [str(index)]}, ":n": {"N": str(count)}, ":ttl": {"N": ttl}}
        if extra_key is not None:
            expression += ", aggregation_key = if_not_exists(aggregation_key, :k)"
            values[":k"] = {"S": extra_key}
        return self._update(origin_id, sk, expression, values, count)

    def _update_set(self, origin_id: str, expression: str, values: dict[str, Any], count: int) -> dict[str, Any]:
        return self._update(origin_id, "SET", expression, values, count)

    def _update(self, origin_id: str, sk: str, expression: str, values: dict[str, Any], count: int) -> dict[str, Any]:
        try:
            answer = self.dynamodb.update_item(
                TableName=self._table,
                Key=_key(origin_id, sk),
                UpdateExpression=expression,
                ConditionExpression="attribute_not_exists(slice_count) OR slice_count = :n",
                ExpressionAttributeNames={"#ttl": tableschema.TTL_ATTRIBUTE},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != _CONDITION_FAILED:
                raise
            old: Any = dict(exc.response).get("Item") or {}
            stored = old.get("slice_count", {}).get("N", "?")
            raise SliceCountMismatchError(
                f"x-asya-fan-in.slice_count: {count} differs from the {stored} stored for origin {origin_id!r}"
            ) from None
        attributes: dict[str, Any] = answer.get("Attributes", {})
        return attributes

    # ------------------------------------------------------------------ emission

    def claim(self, origin_id: str, *, now_ms: int, stale_before_ms: int) -> bool:
        """Claim the emission (P-AGG-4): True when this delivery may send the merged envelope."""
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=_key(origin_id, "SET"),
                UpdateExpression="SET claimed_at = :now",
                ConditionExpression="attribute_exists(#pk) AND attribute_not_exists(emitted_at) "
                "AND (attribute_not_exists(claimed_at) OR claimed_at < :stale)",
                ExpressionAttributeNames={"#pk": tableschema.PARTITION_KEY},
                ExpressionAttributeValues={":now": {"N": str(now_ms)}, ":stale": {"N": str(stale_before_ms)}},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != _CONDITION_FAILED:
                raise
            return False
        return True

    def mark(self, origin_id: str, *, now_ms: int) -> None:
        """The merged envelope left: the set is never emitted again (P-AGG-4)."""
        self.dynamodb.update_item(
            TableName=self._table,
            Key=_key(origin_id, "SET"),
            UpdateExpression="SET emitted_at = :now",
            ExpressionAttributeValues={":now": {"N": str(now_ms)}},
        )

    def release(self, origin_id: str, *, claimed_ms: int) -> None:
        """Drop this delivery's claim after a failed send, so the redelivery need not wait (best effort: raises)."""
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=_key(origin_id, "SET"),
                UpdateExpression="REMOVE claimed_at",
                ConditionExpression="claimed_at = :mine AND attribute_not_exists(emitted_at)",
                ExpressionAttributeValues={":mine": {"N": str(claimed_ms)}},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != _CONDITION_FAILED:
                raise

    # ------------------------------------------------------------------ reading back

    def read(self, origin_id: str, count: int) -> list[Slice]:
        """Every slice of ``origin_id`` in numeric index order, by key (no listing)."""
        items: dict[str, dict[str, Any]] = {}
        keys = [_key(origin_id, _slice_sk(index)) for index in range(count)]
        for start in range(0, len(keys), _BATCH_GET):
            pending: dict[str, Any] = {self._table: {"Keys": keys[start : start + _BATCH_GET], "ConsistentRead": True}}
            while pending:
                answer = self.dynamodb.batch_get_item(RequestItems=pending)
                for item in answer.get("Responses", {}).get(self._table, []):
                    items[item[tableschema.SORT_KEY]["S"]] = item
                pending = answer.get("UnprocessedKeys") or {}
        out = []
        for index in range(count):
            item = items.get(_slice_sk(index))
            if item is None:
                raise FanInStateError(f"fan-in origin {origin_id!r}: slice {index} was counted but is not stored")
            out.append(Slice(index=index, payload=self._payload(item), parent=_parent(item)))
        return out

    def read_slice(self, origin_id: str, index: int) -> Slice:
        """Slice ``index`` of ``origin_id``, strongly consistent (a bounded fan-out's slice 0, P-MAP-2)."""
        answer = self.dynamodb.get_item(
            TableName=self._table, Key=_key(origin_id, _slice_sk(index)), ConsistentRead=True
        )
        item = answer.get("Item")
        if item is None:
            raise FanInStateError(f"fan-in origin {origin_id!r}: slice {index} is not stored")
        return Slice(index=index, payload=self._payload(item), parent=_parent(item))

    def _payload(self, item: Mapping[str, Any]) -> Any:
        if "payload_s3" in item:
            body = self._s3().get_object(Bucket=self._bucket, Key=item["payload_s3"]["S"])["Body"].read()
            return json.loads(body)
        return json.loads(item["payload"]["S"])


def _emitted(state: Mapping[str, Any]) -> bool:
    return "emitted_at" in state


def _parent(item: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = item.get("parent")
    if raw is None:
        return None
    value = json.loads(raw["S"])
    return value if isinstance(value, dict) else None


def _pk(origin_id: str) -> str:
    return f"FANIN#{origin_id}"


def _slice_sk(index: int) -> str:
    return f"SLICE#{index:06d}"


def _key(origin_id: str, sk: str) -> dict[str, Any]:
    return {tableschema.PARTITION_KEY: {"S": _pk(origin_id)}, tableschema.SORT_KEY: {"S": sk}}
