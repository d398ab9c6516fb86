"""The key class of an AWS call: which partition of which resource it lands on, as a template (pure, no I/O).

A capacity limit applies per resource and, for DynamoDB and S3, per partition or prefix, so a request vector labels
every call with the class of key it hits rather than the key itself:

- DynamoDB: ``table:{pk template}/{sk template}`` of the item (``table:TASK#{id}/TASK``, ``table:TASK#{id}/BODY``,
  ``table:IDEMP#{hash}/IDEMP``...) and, for a write, every index partition it writes (:func:`index_classes`):
  ``by_created:TASKS#{day}#{shard}`` (the created-index shard), ``by_outcome:OUTCOME#{status}#{day}#{shard}`` (the
  outcome shard), ``long_deadlines:LONGDL#{shard}`` (the long-deadline shard); a query names the index it reads;
- S3: ``s3:{prefix template}`` (``s3:succeeded/{shard}/{day}/``, ``s3:history/{shard}/{day}/``...), ids, days and
  numbers replaced by placeholders, and the shard of a sharded prefix (GW-DATA-9) by ``{shard}``;
- SQS: ``queue:{actor}`` (the namespace prefix dropped; ``queue:x-deadline`` is the timer queue).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from asya import tableschema

__all__ = ["call_class", "index_classes", "key_template", "s3_prefix", "sqs_queue"]

_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_HEX: Final = re.compile(r"\b[0-9a-f]{32,}\b")
_DAY: Final = re.compile(r"\d{4}-\d{2}-\d{2}(T[0-9:.]+Z?)?")
_NUMBER: Final = re.compile(r"(?<=[#/=_-])\d+\b")
_INDEX_TEMPLATES: Final = {
    "gsi1pk": ("by_created", "TASKS#{day}#{shard}"),
    "gsi2pk": ("by_outcome", "OUTCOME#{status}#{day}#{shard}"),
    "gsi3pk": ("long_deadlines", "LONGDL#{shard}"),
}
_INDEX_BY_NAME: Final = {gsi.name: gsi.partition_key for gsi in tableschema.GSIS}
_STATUS: Final = re.compile(r"OUTCOME#[a-z]+#")
_SHARDED: Final = re.compile(
    rf"^({'|'.join(re.escape(p) for p in tableschema.SHARDED_PREFIXES)})[{''.join(tableschema.KEY_SHARDS)}]/"
)


def key_template(value: str) -> str:
    """``value`` with ids, hashes, days and numbers replaced by ``{id}``, ``{hash}``, ``{day}`` and ``{n}``."""
    value = _UUID.sub("{id}", value)
    value = _HEX.sub("{hash}", value)
    value = _DAY.sub("{day}", value)
    value = _STATUS.sub("OUTCOME#{status}#", value)
    return _NUMBER.sub("{n}", value)


def _av(value: Any) -> str:
    if isinstance(value, Mapping):
        inner = next(iter(value.values()), "")
        return str(inner)
    return str(value)


def _item_class(key: Mapping[str, Any]) -> str:
    pk = key_template(_av(key.get(tableschema.PARTITION_KEY, "")))
    sk = key_template(_av(key.get(tableschema.SORT_KEY, "")))
    return f"table:{pk}/{sk}"


def index_classes(operation: str, params: Mapping[str, Any]) -> tuple[str, ...]:
    """The index partitions a write touches: a put carrying an index key, an update setting or removing one."""
    names: set[str] = set()
    if operation == "PutItem":
        names.update(k for k in params.get("Item", {}) if k in _INDEX_TEMPLATES)
    elif operation == "UpdateItem":
        expression = str(params.get("UpdateExpression", ""))
        for alias, name in sorted((params.get("ExpressionAttributeNames") or {}).items(), key=lambda kv: -len(kv[0])):
            expression = expression.replace(alias, name)
        names.update(a for a in _INDEX_TEMPLATES if re.search(rf"\b{a}\b", expression))
    return tuple(f"{_INDEX_TEMPLATES[n][0]}:{_INDEX_TEMPLATES[n][1]}" for n in sorted(names))


def s3_prefix(key: str) -> str:
    """The prefix template of an S3 key: its directory part, templated."""
    directory = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
    return key_template(_SHARDED.sub(r"\1{shard}/", directory))


def sqs_queue(queue_url: str, namespace: str) -> str:
    """``queue:{actor}`` of a queue URL (``asya-{namespace}-{actor}``)."""
    name = str(queue_url).rsplit("/", 1)[-1]
    prefix = f"asya-{namespace}-"
    return "queue:" + (name[len(prefix) :] if name.startswith(prefix) else key_template(name))


def call_class(service: str, operation: str, params: Mapping[str, Any], *, namespace: str) -> str:
    """The key class of one call (see the module docstring); for a DynamoDB write, ``+``-joined with the index
    partitions it writes."""
    if service == "sqs":
        return sqs_queue(str(params.get("QueueUrl", params.get("QueueName", ""))), namespace)
    if service == "s3":
        return "s3:" + s3_prefix(str(params.get("Key", params.get("Prefix", ""))))
    if operation in ("Query", "Scan"):
        index = params.get("IndexName")
        if index is None:
            values = params.get("ExpressionAttributeValues") or {}
            pk = next((_av(v) for v in values.values()), "")
            return f"table:{key_template(pk)}"
        template = _INDEX_TEMPLATES.get(_INDEX_BY_NAME.get(str(index), ""), (str(index), "?"))[1]
        return f"{index}:{template}"
    if operation == "BatchGetItem":
        classes = sorted(
            {_item_class(k) for request in params.get("RequestItems", {}).values() for k in request.get("Keys", [])}
        )
        return ",".join(classes)
    if operation in ("BatchWriteItem", "TransactWriteItems"):
        return ",".join(sorted(_batch_classes(operation, params)))
    key = params.get("Item") if operation == "PutItem" else params.get("Key")
    primary = _item_class(key or {})
    return "+".join((primary, *index_classes(operation, params)))


def _batch_classes(operation: str, params: Mapping[str, Any]) -> set[str]:
    classes: set[str] = set()
    if operation == "BatchWriteItem":
        for requests in params.get("RequestItems", {}).values():
            for request in requests:
                if "PutRequest" in request:
                    classes.add(call_class("dynamodb", "PutItem", request["PutRequest"], namespace=""))
                elif "DeleteRequest" in request:
                    classes.add(_item_class(request["DeleteRequest"]["Key"]))
        return classes
    for entry in params.get("TransactItems", []):
        kind, body = next(iter(entry.items()))
        operation_of = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}.get(kind)
        if operation_of is not None:
            classes.add(call_class("dynamodb", operation_of, body, namespace=""))
        else:
            classes.add(_item_class(body.get("Key", {})))
    return classes
