"""``Idempotency-Key`` on ``POST /api/v1/mesh/`` (docs/http.md GW-CREATE-R3-1..7), after the IETF
httpapi idempotency-key draft.

Key layout, in the task table: ``pk = IDEMP#{sha256(caller credential + key)}``, ``sk = IDEMP``, with ``fingerprint``
(sha256 of the target and the canonical JSON body), ``task_id`` (chosen before the task is created), ``answer`` (the
201 body as JSON), ``expires_at`` (epoch seconds, 24 h after the first request) and ``ttl`` (the same; DynamoDB
deletes late, so ``expires_at`` is what counts, checked in the write's condition).

One conditional put per request that carries the header, none without it:

- the put succeeds (no item, or an expired one): this request creates the task with the reserved id;
- the put fails and the stored fingerprint differs: 422;
- it fails, the fingerprint matches and the task exists: the first 201 again (same body, same ``Location``);
- it fails, the fingerprint matches and the task does not exist yet: 409 with ``Retry-After``, the first request is
  still being created;
- it fails and the stored item names this request's own task id: the SDK retried a put whose first attempt wrote
  but whose answer was lost (a read timeout), and the reservation is this request's (GW-OVL-5).
  A reservation older than :data:`ABANDONED_AFTER` without its task (the gateway died between the two writes) is
  taken over by a put conditioned on the old task id.

A creation that fails (4xx/5xx from :func:`asya_gateway.creation.start_task`) releases the key, so a retry creates.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.store import records as rec
from asya_gateway.errors import HttpError

__all__ = [
    "ABANDONED_AFTER",
    "HEADER",
    "WINDOW_SECONDS",
    "Claim",
    "IdempotencyKeys",
    "fingerprint",
    "parse_key",
]

_log = logging.getLogger(__name__)

HEADER: Final = "Idempotency-Key"
#: How long a key answers with its first task (the draft leaves it to the server; GW-CREATE-R3-4: 24 h).
WINDOW_SECONDS: Final = 24 * 3600
#: A reservation this old whose task does not exist was abandoned by a gateway that died mid-create.
ABANDONED_AFTER: Final = 60
_SK: Final = "IDEMP"
#: Seconds a client should wait before asking again about a key whose first request is still being created.
_IN_PROGRESS_RETRY_AFTER: Final = 2
_KEY_LIMIT: Final = 255
#: visible ASCII, as the draft's sf-string allows (a quoted string or a bare token)
_KEY_CHARS: Final = re.compile(r"[\x21-\x7e]{1,255}")
_BAD_KEY: Final = "Idempotency-Key must be 1 to 255 visible ASCII characters (optionally in double quotes)"


def parse_key(raw: str | None) -> str | None:
    """The key of the header's value (``"abc"`` or ``abc``); ``None`` when absent; 400 when malformed."""
    if raw is None:
        return None
    value = raw.strip()
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    if len(value) > _KEY_LIMIT or not _KEY_CHARS.fullmatch(value) or '"' in value or "\\" in value:
        raise HttpError(400, _BAD_KEY)
    return value


def fingerprint(target: str, body: Mapping[str, Any]) -> str:
    """sha256 of the target (``flow=x`` or ``actor=y``) and the body's canonical JSON (sorted keys, compact)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{target}\n{canonical}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Claim:
    """What a key decided: ``answer`` set means replay it; else create the task ``task_id`` and record ``answer``."""

    task_id: str
    answer: dict[str, Any] | None = None


def _own(old: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    """Whether the item that refused a put is this very put's earlier write: the task id, fresh per request, is the
    token (GW-OVL-5)."""
    return rec.get_str(old, "task_id") == rec.get_str(item, "task_id")


def _in_progress() -> HttpError:
    return HttpError(
        409,
        f"a request with this {HEADER} is still being processed; retry later",
        headers={"Retry-After": str(_IN_PROGRESS_RETRY_AFTER)},
    )


class IdempotencyKeys:
    """Keys of one caller's creates, in the task table; ``dynamodb`` is the store's client."""

    def __init__(self, *, table: str, dynamodb: Any, task_exists: Any) -> None:
        self._table = table
        self._dynamodb = dynamodb
        self._task_exists = task_exists

    @staticmethod
    def _pk(caller: str, key: str) -> str:
        return "IDEMP#" + hashlib.sha256(f"{caller}\n{key}".encode()).hexdigest()

    def claim(
        self, *, caller: str, key: str, print_: str, task_id: str, answer: Mapping[str, Any], now: datetime
    ) -> Claim:
        """Reserve ``key`` for a new task ``task_id`` whose 201 body will be ``answer``, or say what the first
        request with it decided (raises 409/422 :class:`HttpError`)."""
        pk = self._pk(caller, key)
        epoch = int(now.timestamp())
        item = {
            "pk": rec.str_av(pk),
            "sk": rec.str_av(_SK),
            "fingerprint": rec.str_av(print_),
            "task_id": rec.str_av(task_id),
            "answer": rec.str_av(json.dumps(dict(answer), separators=(",", ":"))),
            "reserved_at": rec.num_av(epoch),
            "expires_at": rec.num_av(epoch + WINDOW_SECONDS),
            "ttl": rec.num_av(epoch + WINDOW_SECONDS),
        }
        old = self._put(item, "attribute_not_exists(pk) OR expires_at <= :now", {":now": rec.num_av(epoch)})
        if old is None or _own(old, item):
            return Claim(task_id)
        if rec.get_str(old, "fingerprint") != print_:
            raise HttpError(422, f"{HEADER} was already used with another request body")
        first_id = rec.get_str(old, "task_id") or ""
        stored = json.loads(rec.get_str(old, "answer") or "{}")
        if self._task_exists(first_id):
            return Claim(first_id, answer=stored)
        if epoch - (rec.get_int(old, "reserved_at") or 0) < ABANDONED_AFTER:
            raise _in_progress()
        taken = self._put(item, "task_id = :old", {":old": rec.str_av(first_id)})
        if taken is None or _own(taken, item):
            return Claim(task_id)
        raise _in_progress()

    def _put(self, item: dict[str, Any], condition: str, values: dict[str, Any]) -> dict[str, Any] | None:
        """The conditional put; ``None`` when it wrote, else the item that refused it."""
        try:
            self._dynamodb.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            old: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
            if old is None:  # an old DynamoDB answer without the item: read it
                old = self._dynamodb.get_item(
                    TableName=self._table, Key={"pk": item["pk"], "sk": item["sk"]}, ConsistentRead=True
                ).get("Item")
            return old or {}
        return None

    def release(self, *, caller: str, key: str, task_id: str) -> None:
        """Free a key whose creation failed, so a retry creates (best effort: else it frees itself after
        :data:`ABANDONED_AFTER` when its task does not exist)."""
        try:
            self._dynamodb.delete_item(
                TableName=self._table,
                Key={"pk": rec.str_av(self._pk(caller, key)), "sk": rec.str_av(_SK)},
                ConditionExpression="task_id = :id",
                ExpressionAttributeValues={":id": rec.str_av(task_id)},
            )
        except (ClientError, BotoCoreError) as exc:
            _log.warning("could not release %s for task %s: %s", HEADER, task_id, exc)
