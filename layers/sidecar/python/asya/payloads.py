"""Claim-check offload of large payloads (PROTOCOL P-LARGE-1..6, GATEWAY GW-DATA-7).

- :meth:`PayloadStore.encode` is the transports' body encoder (``asya.transport``) for the layer, the crew and the
  gateway. When an envelope's JSON is over the threshold (``storage.offload_threshold_kb`` KiB, env
  ``ASYA_OFFLOAD_THRESHOLD_KB``, default 240) and its payload is not already a reference, the payload is written as
  JSON to ``payloads/{id}/{hop}.json`` in the storage bucket (``ASYA_BUCKET``) (``{id}`` is the envelope id when it
  is a plain name of at most 64 letters, digits, ``_`` and ``-``, as every UUID is, else ``h.`` and 32 hex digits of
  its SHA-256: no id can steer a key, chosen), ``hop =
  {len(route.prev):04d}-{destination actor}-{8 random lowercase hex digits}``, and the body carries
  ``{"__ref__": "s3://{bucket}/{key}"}`` in its place (P-LARGE-2). The envelope object is left as it is. The
  object is written before the message is sent, so a message never names an object that does not exist yet. A
  reference payload is sent as it is (P-LARGE-5: an unchanged input resent by a retry, zero frames, pre-flight, SLA
  or x-sump keeps its reference). Without a bucket nothing is offloaded; the transport's 1 MiB limit still applies
  (P-LARGE-3). A failed S3 write is a :class:`~asya.transport.TransportError`, like a failed SQS send.
- :meth:`PayloadStore.rehydrate` replaces a reference (P-LARGE-4: an object with exactly one key ``__ref__`` whose
  value starts with ``s3://``) by the stored JSON. Only references into the project bucket under ``payloads/`` are
  honoured: another bucket or prefix, a missing object or an object that is not JSON is
  :class:`PayloadUnavailableError` (the record goes to x-sump). Other S3 errors propagate, so the record fails and
  SQS delivers it again.
- Objects under ``payloads/`` expire after 15 days through the bucket's lifecycle rule (P-LARGE-6; CDK
  ``asya_cdk.storage``, local ``asya_local.provision``).

No S3 client is created before the first offload or read; pass ``s3=`` to inject one.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.awsclients import ACTOR_BUDGET, ClientBudget, aws_client
from asya.envelope import Envelope, dumps
from asya.exceptions import AsyaError
from asya.missingkey import is_missing
from asya.tableschema import PAYLOADS_PREFIX
from asya.transport import TransportError

__all__ = [
    "DEFAULT_THRESHOLD_KB",
    "REFERENCE_KEY",
    "PayloadStore",
    "PayloadUnavailableError",
    "is_reference",
    "payload_key",
]

DEFAULT_THRESHOLD_KB: Final = 240
REFERENCE_KEY: Final = "__ref__"
_SCHEME: Final = "s3://"
_PLAIN_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class PayloadUnavailableError(AsyaError):
    """An offloaded payload cannot be read: a reference outside the project bucket's ``payloads/``, a missing
    object, or an object that is not JSON (P-LARGE-4). Routed to x-sump with reason ``PayloadUnavailable``."""


def is_reference(payload: object) -> bool:
    """P-LARGE-4: an object with exactly one key ``__ref__`` whose value is a string starting with ``s3://``."""
    if type(payload) is not dict or len(payload) != 1:
        return False
    ref = payload.get(REFERENCE_KEY)
    return isinstance(ref, str) and ref.startswith(_SCHEME)


def payload_key(envelope_id: str, *, hop: int, actor: str, token: str) -> str:
    """``payloads/{id}/{hop:04d}-{actor}-{token}.json`` (P-LARGE-2), ``{id}`` being :func:`_id_segment`."""
    return f"{PAYLOADS_PREFIX}{_id_segment(envelope_id)}/{hop:04d}-{actor}-{token}.json"


def _id_segment(envelope_id: str) -> str:
    """The id itself when it is a plain name (letters, digits, ``_``, ``-``, at most 64: every UUID), else ``h.``
    and 32 hex digits of its SHA-256. So no id can steer a key: none adds a ``/`` level, climbs with ``..``, lands
    in another id's folder or makes a key over S3's 1,024 bytes; the ``.`` keeps the two forms apart."""
    if _PLAIN_ID.fullmatch(envelope_id):
        return envelope_id
    return "h." + hashlib.sha256(envelope_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _token() -> str:
    return secrets.token_hex(4)


class PayloadStore:
    """Offloads payloads on send and reads them back before use, in one bucket."""

    def __init__(
        self,
        *,
        bucket: str | None,
        threshold_kb: int = DEFAULT_THRESHOLD_KB,
        s3: Any = None,
        token: Callable[[], str] = _token,
        budget: ClientBudget = ACTOR_BUDGET,
    ) -> None:
        if not 1 <= threshold_kb <= 1024:
            raise ValueError(f"offload threshold must be 1..1024 KiB, got {threshold_kb!r}")
        self.bucket = bucket or None
        self.threshold_bytes = threshold_kb * 1024
        self._s3 = s3
        self._budget = budget
        self._token = token

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = aws_client("s3", self._budget)
        return self._s3

    # -- sending ---------------------------------------------------------------------------------------------------

    def encode(self, actor: str, envelope: Envelope) -> str:
        """The message body of ``envelope`` for ``actor``, with its payload offloaded when the body is too large."""
        body = envelope.to_json()
        if self.bucket is None or _utf8_size(body) <= self.threshold_bytes or is_reference(envelope.payload):
            return body
        key = payload_key(envelope.id, hop=len(envelope.route.prev), actor=actor, token=self._token())
        try:
            self.s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=dumps(envelope.payload).encode("utf-8"),
                ContentType="application/json",
            )
        except (ClientError, BotoCoreError) as exc:  # a failed send: the layer fails the record, the gateway the task
            raise TransportError(
                f"offloading the payload of {envelope.id!r} to s3://{self.bucket}/{key} failed: {exc}"
            ) from exc
        document = envelope.to_dict()
        document["payload"] = {REFERENCE_KEY: f"{_SCHEME}{self.bucket}/{key}"}
        return dumps(document)

    # -- receiving -------------------------------------------------------------------------------------------------

    def rehydrate(self, payload: Any) -> Any:
        """``payload`` itself, or the stored value when it is a reference (P-LARGE-4)."""
        if not is_reference(payload):
            return payload
        ref: str = payload[REFERENCE_KEY]
        key = self._key_of(ref)
        try:
            data = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if is_missing(self.s3, str(self.bucket), key, exc):
                raise PayloadUnavailableError(f"payload reference {ref!r}: the object does not exist") from None
            raise
        try:
            return json.loads(data)
        except ValueError as exc:
            raise PayloadUnavailableError(f"payload reference {ref!r}: the object is not JSON ({exc})") from None

    def _key_of(self, ref: str) -> str:
        bucket, _, key = ref[len(_SCHEME) :].partition("/")
        if self.bucket is None or bucket != self.bucket:
            raise PayloadUnavailableError(
                f"payload reference {ref!r} is outside the project bucket {self.bucket!r}: not honoured"
            )
        if not key.startswith(PAYLOADS_PREFIX) or ".." in key.split("/"):
            raise PayloadUnavailableError(f"payload reference {ref!r} is not under {PAYLOADS_PREFIX!r}: not honoured")
        return key


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))
