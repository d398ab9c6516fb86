"""Flow programs kept by digest in the storage bucket, so every runtime can read them across deploys (P-FLOWV-3,
P-FLOWV-4).

A deployment holds only its own programs (``ASYA_FLOWS``, the flows layer, the gateway's manifest); a task started on
an earlier deployment needs the program of its digest (P-FLOWV-1). The store keeps every program a task was ever
started with, as its canonical JSON at ``flows/{digest}.json`` (``asya.tableschema.program_key``):

- :meth:`ProgramStore.publish`, the gateway's, at create, on the first use of a digest per container: a put with
  ``If-None-Match: *``, so an object is written once and never replaced (a 412 means it is there already). A failed
  put fails the create (the client retries): a task never starts on a program the store may not hold;
- :meth:`ProgramStore.fetch`, a runtime's, for a digest it does not hold: the program, or ``None`` when the object is
  missing (``asya.missingkey``) or its bytes do not hash to the digest. Any other failure (throttling, a denied read,
  a network error) is :class:`ProgramStoreError`, which fails the record, so SQS delivers it again;
- :class:`FlowVersions` is what a runtime runs continuations with: a :class:`~asya.flows.versions.ProgramBook` of its
  deployment's programs, filled in the pre-flight (:meth:`FlowVersions.load`), never by a continuation, which stays
  pure (P-FLOW-2).

Nothing expires under ``flows/``: a pause has no deadline. ``asya flow gc`` (``asya_local.flowgc``) deletes the
programs no deployment and no paused task needs.

No S3 client is created before the first put or read; pass ``s3=`` to inject one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.exceptions import AsyaError
from asya.flows.interp import STATE_HEADER
from asya.flows.ir import Program
from asya.flows.versions import FlowVersionMissingError, ProgramBook
from asya.missingkey import is_missing
from asya.tableschema import program_key

__all__ = ["FlowVersions", "ProgramStore", "ProgramStoreError", "state_digest"]

#: What S3 answers a conditional put whose object exists (412), or that races another conditional put (409).
_ALREADY_THERE: Final = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})


class ProgramStoreError(AsyaError):
    """A program could not be written or read for a reason other than its absence; ``code`` is the AWS error code
    (or the botocore error's class name)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def _code(exc: ClientError | BotoCoreError) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "ClientError")
    return type(exc).__name__


class ProgramStore:
    """``flows/{digest}.json`` in ``bucket``; without a bucket nothing is kept and nothing can be read."""

    def __init__(self, *, bucket: str | None, s3: Any = None) -> None:
        self._bucket = bucket
        self._s3 = s3
        self._published: set[str] = set()
        self._lock = threading.Lock()

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            from asya.awsclients import ACTOR_BUDGET, aws_client

            self._s3 = aws_client("s3", ACTOR_BUDGET)
        return self._s3

    def publish(self, program: Program) -> None:
        """Keep ``program`` under its digest unless this container already did; raises :class:`ProgramStoreError`."""
        digest = program.digest
        if self._bucket is None or digest in self._published:
            return
        try:
            self.s3.put_object(
                Bucket=self._bucket,
                Key=program_key(digest),
                Body=program.canonical(),
                ContentType="application/json",
                IfNoneMatch="*",
            )
        except ClientError as exc:
            if _code(exc) not in _ALREADY_THERE:
                raise ProgramStoreError(
                    f"flow '{program.flow}' program {digest} not stored: {_code(exc)}", code=_code(exc)
                ) from exc
        except BotoCoreError as exc:
            raise ProgramStoreError(
                f"flow '{program.flow}' program {digest} not stored: {exc}", code=_code(exc)
            ) from exc
        with self._lock:
            self._published.add(digest)

    def fetch(self, digest: str) -> Program | None:
        """The program of ``digest``, ``None`` when the store does not hold it; raises :class:`ProgramStoreError`."""
        if self._bucket is None:
            return None
        key = program_key(digest)
        try:
            body = self.s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if is_missing(self.s3, self._bucket, key, exc):
                return None
            raise ProgramStoreError(f"{key} not read: {_code(exc)}", code=_code(exc)) from exc
        except BotoCoreError as exc:
            raise ProgramStoreError(f"{key} not read: {exc}", code=_code(exc)) from exc
        if hashlib.sha256(body).hexdigest() != digest:
            return None  # not the program of that name: running it would run another program
        try:
            return Program.from_json(json.loads(body))
        except (ValueError, TypeError, KeyError) as exc:
            raise ProgramStoreError(f"{key} is not a compiled flow program: {exc}", code="Malformed") from exc


def state_digest(headers: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(flow, digest)`` of the flow state in ``headers`` when it names a digest, else ``None`` (no flow, no digest,
    or a malformed state, which the continuation itself rejects)."""
    raw = headers.get(STATE_HEADER)
    if not isinstance(raw, Mapping):
        return None
    flow, digest = raw.get("flow"), raw.get("digest")
    if not isinstance(flow, str) or not isinstance(digest, str) or not digest:
        return None
    return flow, digest


class FlowVersions:
    """A runtime's programs: its deployment's (``current``, by flow name) and the versions it read from ``store``."""

    def __init__(self, current: Mapping[str, Program], *, store: ProgramStore) -> None:
        self.book = ProgramBook(current)
        self._store = store

    def load(self, headers: Mapping[str, Any]) -> None:
        """Pre-flight: read the program the envelope's flow state names when the book lacks it; raises
        :class:`ProgramStoreError` (the record fails and comes back)."""
        named = state_digest(headers)
        if named is None or self.book.version(named[1]) is not None:
            return
        program = self._store.fetch(named[1])
        if program is not None:
            self.book.add(program)

    def missing(self, headers: Mapping[str, Any]) -> FlowVersionMissingError | None:
        """After :meth:`load`: the error the envelope's task fails with when its program is nowhere (P-FLOWV-2)."""
        named = state_digest(headers)
        if named is None:
            return None
        held = self.book.version(named[1])
        if held is not None and held.flow == named[0]:
            return None
        return FlowVersionMissingError(*named)
