"""Large task values: ``payload``, ``result``, ``error_details`` and ``pause_metadata`` (GW-DATA-6, GW-DATA-8).

A small input or result stays on the task item as JSON text (``asya.store.inline``, GW-DATA-8), decoded here
like the others. Otherwise, up to 64 KiB encoded they are JSON text on the task's body item (``sk = BODY``);
above, the JSON is written to ``s3://{bucket}/tasks/{id}/{field}.json`` and the body item holds ``{field}_s3`` = the
key. Readers get them back in client form: the value inline (S3 objects up to 4 MiB are read back), else
``{field}_url``, a presigned GET valid 15 minutes.

A succeeded task whose result is not on its task item may name the bytes of its checkpoint line instead of a result
item (``result_span``, GW-DATA-10): :meth:`BodyCodec.checkpoint_result` reads that line with one ranged GET and gives
its ``payload``, the envelope's payload as x-sink received it, which is the result.

A paused task's state is the payload x-pause stored in ``paused/{id}.json`` (P-PAUSE-4), already rehydrated there:
:meth:`BodyCodec.paused_state` reads it for the task view (GW-TASK-10), inline up to 4 MiB like the values above, else
as ``paused_state_url``, a presigned GET of the whole paused envelope (the state is its ``payload`` member).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from botocore.exceptions import ClientError

from asya import tableschema
from asya.envelope import dumps
from asya.missingkey import DENIED_CODES, is_missing
from asya.store import records as rec
from asya.store.errors import StoreError

__all__ = ["PRESIGN_SECONDS", "BodyCodec"]

PRESIGN_SECONDS: Final = 900
#: A checkpoint that is gone, or in a storage class that needs a restore first.
_UNREADABLE: Final = frozenset({"NoSuchKey", "InvalidObjectState"})

_log = logging.getLogger(__name__)


class BodyCodec:
    """Encodes body values for storage and decodes them for clients; ``s3`` is called only when S3 is needed."""

    def __init__(self, *, bucket: str | None, s3: Callable[[], Any]) -> None:
        self._bucket = bucket
        self._s3 = s3

    def encode(self, task_id: str, field: str, value: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
        """``(attribute name, attribute value, stored form)``; writes S3 first for a value over 64 KiB."""
        text = dumps(value)
        if len(text.encode("utf-8")) <= rec.INLINE_LIMIT:
            return field, rec.str_av(text), {field: value}
        if not self._bucket:
            raise StoreError(
                f"{field} of task {task_id!r} is over {rec.INLINE_LIMIT // 1024} KiB encoded and the store has no "
                "bucket to hold it: configure the storage bucket (GW-DATA-6)"
            )
        object_key = tableschema.task_value_key(task_id, field)
        self._s3().put_object(
            Bucket=self._bucket, Key=object_key, Body=text.encode("utf-8"), ContentType="application/json"
        )
        return f"{field}_s3", rec.str_av(object_key), {f"{field}_s3": object_key}

    def presign(self, object_key: str) -> str:
        url: str = self._s3().generate_presigned_url(
            "get_object", Params={"Bucket": self._bucket, "Key": object_key}, ExpiresIn=PRESIGN_SECONDS
        )
        return url

    def urls(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Status data as clients see it: every ``{field}_s3`` becomes ``{field}_url`` (GW-DATA-6)."""
        out: dict[str, Any] = {}
        for name, value in data.items():
            if name.endswith("_s3") and name[:-3] in rec.BODY_FIELDS and isinstance(value, str):
                out[name[:-3] + "_url"] = self.presign(value)
            else:
                out[name] = value
        return out

    def decode_item(self, body: Mapping[str, Any] | None) -> dict[str, Any]:
        """Client form of a body item: values inline (S3 objects up to 4 MiB read back), else ``{field}_url``."""
        out: dict[str, Any] = {}
        if not body:
            return out
        for field in rec.BODY_FIELDS:
            text = rec.get_str(body, field)
            if text is not None:
                out[field] = json.loads(text)
                continue
            object_key = rec.get_str(body, f"{field}_s3")
            if object_key is not None:
                out.update(self._read(field, object_key))
        return out

    def checkpoint_result(self, object_key: str, span: tuple[int, int]) -> dict[str, Any]:
        """``{"result": ...}`` from the checkpoint line at ``span`` of ``object_key`` (GW-DATA-10); ``{}`` when the
        object is gone or archived (x-sink names lines only of checkpoints kept as long as the task record, so this
        means someone removed it: logged)."""
        offset, length = span
        try:
            response = self._s3().get_object(
                Bucket=self._bucket, Key=object_key, Range=f"bytes={offset}-{offset + length - 1}"
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in _UNREADABLE:
                raise
            _log.warning("the checkpoint %s holding a task's result cannot be read: %s", object_key, exc)
            return {}
        line = json.loads(response["Body"].read())
        if not isinstance(line, dict) or "payload" not in line:
            raise StoreError(f"checkpoint {object_key} bytes {offset}+{length}: not an envelope with a payload")
        return {"result": line["payload"]}

    def paused_state(self, task_id: str) -> dict[str, Any]:
        """``{"paused_state": payload}`` of the task's paused envelope, ``{"paused_state_url": url}`` above 4 MiB, or
        ``{}`` when there is none (x-pause writes its status before the file, GW-TASK-10): one ``GetObject``."""
        if not self._bucket:
            return {}
        key = tableschema.paused_key(task_id)
        s3 = self._s3()
        try:
            found = s3.get_object(Bucket=self._bucket, Key=key)
        except ClientError as exc:
            if is_missing(s3, self._bucket, key, exc):
                return {}
            if exc.response.get("Error", {}).get("Code") not in DENIED_CODES:
                raise
            # the listing found the key after a 403: x-pause stored the file since the read (it writes the status
            # first), or the read is denied; a second read tells them apart, and a denial raises again
            found = s3.get_object(Bucket=self._bucket, Key=key)
        body = found["Body"]
        if int(found["ContentLength"]) > rec.VIEW_INLINE_LIMIT:
            body.close()
            return {"paused_state_url": self.presign(key)}
        document = json.loads(body.read())
        if not isinstance(document, dict) or "payload" not in document:
            raise StoreError(f"{key}: not a paused envelope with a payload")
        return {"paused_state": document["payload"]}

    def _read(self, field: str, object_key: str) -> dict[str, Any]:
        s3 = self._s3()
        head = s3.head_object(Bucket=self._bucket, Key=object_key)
        if int(head["ContentLength"]) > rec.VIEW_INLINE_LIMIT:
            return {f"{field}_url": self.presign(object_key)}
        raw = s3.get_object(Bucket=self._bucket, Key=object_key)["Body"].read()
        return {field: json.loads(raw)}
