"""Checkpoints of finished envelopes in the storage bucket (PROTOCOL P-CKPT-1..4).

- Key: ``{phase}/{YYYY-MM-DD}/{name}.json``, ``phase`` in ``succeeded``/``failed``, the UTC date of
  ``status.updated_at`` (now when absent or unparseable), so redeliveries hit the same key (P-CKPT-1).
- ``name``: the id (``x-asya-origin-id`` when present, else ``id``) after its last ``/`` or ``\\``; when that part is
  empty, ``.``, ``..`` or holds a control character, ``id-`` + the SHA-256 hex of the id (P-CKPT-2).
- Body: the whole envelope as JSON, ``Content-Type: application/json``; the bucket's default encryption applies
  (P-CKPT-3). ``if_absent`` writes with ``If-None-Match: *`` and keeps an existing object (x-sump, P-SUMP-4).

A failed write raises :class:`CheckpointError`: the caller fails the record so SQS retries it.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import headers as hdr
from asya.envelope import Envelope
from asya.exceptions import AsyaError
from asya.timeutil import parse_ts

__all__ = ["CheckpointError", "checkpoint_id", "checkpoint_key", "checkpoint_name", "put_checkpoint"]

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


class CheckpointError(AsyaError):
    """A checkpoint could not be written (the record must fail, P-SINK-5 (b), P-SUMP-4)."""


def checkpoint_id(envelope: Envelope) -> str:
    """The id a checkpoint (and x-sink's final status) is about: ``x-asya-origin-id`` when present, else ``id``."""
    origin = envelope.headers.get(hdr.ORIGIN_ID)
    return origin if isinstance(origin, str) and origin else envelope.id


def checkpoint_name(task_id: str) -> str:
    """The sanitised file name of ``task_id`` (P-CKPT-2): ``../../etc/passwd`` becomes ``passwd``."""
    name = re.split(r"[/\\]", task_id)[-1]
    if name in ("", ".", "..") or _CONTROL.search(name):
        return "id-" + hashlib.sha256(task_id.encode("utf-8")).hexdigest()
    return name


def checkpoint_key(envelope: Envelope, phase: str, *, now: datetime) -> str:
    """``{phase}/{YYYY-MM-DD}/{name}.json`` (P-CKPT-1)."""
    updated = parse_ts(envelope.status.updated_at) if envelope.status is not None else None
    day = (updated or now).date().isoformat()
    return f"{phase}/{day}/{checkpoint_name(checkpoint_id(envelope))}.json"


def put_checkpoint(s3: Any, bucket: str, key: str, body: str, *, if_absent: bool = False) -> bool:
    """Write ``body`` at ``key``. With ``if_absent`` an existing object is kept and False is returned."""
    request: dict[str, Any] = {
        "Bucket": bucket,
        "Key": key,
        "Body": body.encode("utf-8"),
        "ContentType": "application/json",
    }
    if if_absent:
        request["IfNoneMatch"] = "*"
    try:
        s3.put_object(**request)
    except ClientError as exc:
        if if_absent and exc.response["Error"]["Code"] == "PreconditionFailed":
            return False
        raise CheckpointError(f"checkpoint s3://{bucket}/{key} could not be written: {exc}") from exc
    except BotoCoreError as exc:
        raise CheckpointError(f"checkpoint s3://{bucket}/{key} could not be written: {exc}") from exc
    return True
