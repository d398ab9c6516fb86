"""Claim-check offload of large payloads (P-LARGE-1..6, GW-DATA-7).

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
  honoured, and only in the folder of an id the reference may belong to (P-LARGE-7, :func:`reference_owners`): the
  envelope's own id, its parent's, or its origin's (``x-asya-origin-id``, an aggregator's merged output). Another
  bucket, prefix or folder, a missing object or an object that is not JSON is :class:`PayloadUnavailableError` (the
  record goes to x-sump): a reference that a client or a handler smuggled in never reads another task's payload.
  Other S3 errors propagate, so the record fails and SQS delivers it again.
- :meth:`PayloadStore.copy_for` copies a referenced object into another task's folder (the gateway's retry from a
  recorded step, whose input was offloaded under the old task's id).
- Objects under ``payloads/`` expire after 15 days through the bucket's lifecycle rule (P-LARGE-6; CDK
  ``asya_cdk.storage``, local ``asya_local.provision``).

No S3 client is created before the first offload or read; pass ``s3=`` to inject one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Collection
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import headers as hdr
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
    "reference_owners",
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


def reference_owners(envelope: Envelope) -> tuple[str, ...]:
    """P-LARGE-7: the ids whose ``payloads/{id}/`` folder ``envelope``'s references may name: its own id (what its
    sender offloaded, and a resent input, P-LARGE-5), its parent's (a child handed its parent's reference) and its
    origin's (an aggregator's merged output carries the origin task's id in ``x-asya-origin-id``)."""
    origin = envelope.headers.get(hdr.ORIGIN_ID)
    found = (envelope.id, envelope.parent_id, origin if isinstance(origin, str) else None)
    return tuple(dict.fromkeys(owner for owner in found if owner))


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
    return os.urandom(4).hex()  # secrets.token_hex's own source, without importing hmac at start-up


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

    def rehydrate(self, payload: Any, *, owners: Collection[str] | None) -> Any:
        """``payload`` itself, or the stored value when it is a reference (P-LARGE-4) in the folder of one of
        ``owners`` (P-LARGE-7, usually :func:`reference_owners` of the envelope that carries it). ``owners=None``
        only for a value whose owner was checked when it was stored (a fan-in slice, :meth:`check_owner`)."""
        if not is_reference(payload):
            return payload
        ref: str = payload[REFERENCE_KEY]
        key = self._key_of(ref)
        if owners is not None:
            self._check_folder(ref, key, owners)
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

    def check_owner(self, payload: Any, owners: Collection[str]) -> None:
        """Raise :class:`PayloadUnavailableError` when ``payload`` is a reference that ``owners`` may not read
        (P-LARGE-4, P-LARGE-7), without reading it."""
        if is_reference(payload):
            ref: str = payload[REFERENCE_KEY]
            self._check_folder(ref, self._key_of(ref), owners)

    def copy_for(self, payload: Any, envelope_id: str, *, hop: int, actor: str) -> Any:
        """``payload``, or for a reference a new reference to a copy of its object in ``envelope_id``'s folder
        (``payloads/{id}/{hop}-{actor}-{token}.json``, one ``CopyObject``): so a task started with another task's
        offloaded input reads it as its own (P-LARGE-7). A missing object is :class:`PayloadUnavailableError`."""
        if not is_reference(payload):
            return payload
        ref: str = payload[REFERENCE_KEY]
        source = self._key_of(ref)
        key = payload_key(envelope_id, hop=hop, actor=actor, token=self._token())
        try:
            self.s3.copy_object(Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": source})
        except ClientError as exc:
            if is_missing(self.s3, str(self.bucket), source, exc):
                raise PayloadUnavailableError(f"payload reference {ref!r}: the object does not exist") from None
            raise
        return {REFERENCE_KEY: f"{_SCHEME}{self.bucket}/{key}"}

    @staticmethod
    def _check_folder(ref: str, key: str, owners: Collection[str]) -> None:
        folder = key[len(PAYLOADS_PREFIX) :].split("/", 1)[0]
        if not any(folder == _id_segment(owner) for owner in owners):
            raise PayloadUnavailableError(
                f"payload reference {ref!r} belongs to another task: an envelope reads only references under "
                "payloads/ of its own id, its parent's or its origin's; not honoured"
            )

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
