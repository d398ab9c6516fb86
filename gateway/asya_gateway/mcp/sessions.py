"""MCP sessions in the task table (GW-MCP-2, GW-DATA-2): item ``pk = MCPSESSION#{id}``, ``sk = SESSION`` with
``protocol_version``, ``log_level``, ``principal`` (who opened it: the JWT ``sub``, or a SHA-256 of the API key;
GW-EDGE-9), ``created_at`` and the table's TTL attribute ``ttl`` (epoch seconds), so DynamoDB deletes expired
sessions.

The expiry slides: a session expires 24 h after its last use. To keep a chatty client from paying one write per
request, the expiry is pushed forward only when less than 23 h of it are left (at most one write per hour of use).
Reads are strongly consistent and ignore an item whose ``ttl`` has passed (GW-DATA-5: DynamoDB deletes late, moto
never). The DynamoDB client is the task store's (created lazily there).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from asya.store import TaskStore
from asya.tableschema import TTL_ATTRIBUTE
from asya.timeutil import Clock

__all__ = ["LOG_LEVELS", "SESSION_TTL_SECONDS", "McpSession", "SessionStore"]

#: RFC 5424 severities in increasing order, as MCP names them (``logging/setLevel``).
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

SESSION_TTL_SECONDS: Final = 24 * 3600
_REFRESH_BELOW_SECONDS: Final = 23 * 3600
_SK: Final = "SESSION"


@dataclass(frozen=True, slots=True)
class McpSession:
    id: str
    protocol_version: str
    log_level: str
    #: who opened it (``asya_gateway.principal.caller_principal``): nobody else may use it (GW-EDGE-9)
    principal: str = ""


def _key(session_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"MCPSESSION#{session_id}"}, "sk": {"S": _SK}}


class SessionStore:
    """Create, read (sliding expiry), change the log level of, and end MCP sessions."""

    def __init__(self, store: TaskStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def _now(self) -> int:
        return int(self._clock().timestamp())

    def create(self, protocol_version: str, principal: str = "") -> McpSession:
        session = McpSession(
            id=str(uuid.uuid4()), protocol_version=protocol_version, log_level="info", principal=principal
        )
        now = self._now()
        self._store.dynamodb.put_item(
            TableName=self._store.table,
            Item={
                **_key(session.id),
                "protocol_version": {"S": protocol_version},
                "log_level": {"S": session.log_level},
                "principal": {"S": principal},
                "created_at": {"N": str(now)},
                TTL_ATTRIBUTE: {"N": str(now + SESSION_TTL_SECONDS)},
            },
        )
        return session

    def get(self, session_id: str) -> McpSession | None:
        """The live session, its expiry pushed forward when due; ``None`` when unknown or expired."""
        if not session_id or len(session_id) > 128:
            return None
        item = self._store.dynamodb.get_item(
            TableName=self._store.table, Key=_key(session_id), ConsistentRead=True
        ).get("Item")
        now = self._now()
        if item is None or int(item[TTL_ATTRIBUTE]["N"]) <= now:
            return None
        if int(item[TTL_ATTRIBUTE]["N"]) - now < _REFRESH_BELOW_SECONDS:
            self._touch(session_id, now)
        return McpSession(
            id=session_id,
            protocol_version=item["protocol_version"]["S"],
            log_level=item["log_level"]["S"],
            principal=item.get("principal", {}).get("S", ""),
        )

    def _touch(self, session_id: str, now: int) -> None:
        expiry = {":ttl": {"N": str(now + SESSION_TTL_SECONDS)}}
        self._update(session_id, "SET #ttl = :ttl", expiry, names={"#ttl": TTL_ATTRIBUTE})

    def set_log_level(self, session_id: str, level: str) -> None:
        self._update(session_id, "SET log_level = :level", {":level": {"S": level}})

    def _update(
        self, session_id: str, expression: str, values: dict[str, Any], *, names: dict[str, str] | None = None
    ) -> None:
        """Update a session that exists. One ended by a DELETE meanwhile is left ended: the request still runs, the
        next one gets 404."""
        try:
            self._store.dynamodb.update_item(
                TableName=self._store.table,
                Key=_key(session_id),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
                **({} if names is None else {"ExpressionAttributeNames": names}),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def delete(self, session_id: str) -> None:
        self._store.dynamodb.delete_item(TableName=self._store.table, Key=_key(session_id))
