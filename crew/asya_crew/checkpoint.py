"""Checkpoints of finished envelopes as JSON Lines objects in the storage bucket (P-CKPT-1..4, GATEWAY
GW-DATA-7).

- One object per crew invocation and per (``phase``, UTC date of ``status.updated_at``, now when absent or
  unparseable) among its records: key ``{phase}/{shard}/{YYYY-MM-DD}/{uuid4}.jsonl`` (``shard``: GW-DATA-9),
  ``phase`` in ``succeeded``/``failed``.
  The last part is a fresh UUID4 per object, never an id from the envelope, so no id can steer a key (P-CKPT-2).
- Body: one line per envelope, in record order, each the whole envelope as compact JSON (the caller passes it with its
  payload rehydrated, P-LARGE-4), ``Content-Type: application/x-ndjson``; the bucket's default encryption applies
  (P-CKPT-3). U+0085, U+2028 and U+2029 are written as ``\\u`` escapes so that readers that also split lines there
  (Python's ``str.splitlines``) see the same lines as ``sed``, Athena and DuckDB.
- Each object is written with one ``PutObject`` with ``If-None-Match: *`` (``asya.jsonlines``, the writer the run
  history shares): a redelivered record lands in a new object
  and never overwrites lines other tasks point to (P-CKPT-1). A failed PUT fails every record it holds:
  :meth:`CheckpointWriter.write` returns a :class:`CheckpointError` for each of them, and the caller fails those
  records before any status write (P-SINK-5 (b), P-SUMP-4).
- :func:`put_unparsed`: a body x-sump could not parse goes to ``unparsed/{YYYY-MM-DD}/sqs-{messageId}.txt`` (today's
  UTC date), ``text/plain; charset=utf-8``, create-if-absent: the SQS message id names it, never the body (P-SUMP-5).
- A record's place is a :class:`CheckpointLine` ``(key, line)``, ``line`` 1-based (P-CKPT-4); the task record and the
  ``x-asya-checkpointed`` header carry it (P-SINK-5).
- :meth:`CheckpointWriter.plan` reserves a record's line before the PUT, in record order (x-sink: a fan-out child's
  finish write names its line, the child tree's P-FAN-9); :meth:`CheckpointWriter.unplan` gives back the last
  reservation (a record that will not be checkpointed after all). ``write`` puts planned records at their planned
  lines, in objects of their own, and forgets every plan.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import tableschema
from asya.envelope import Envelope
from asya.exceptions import AsyaError
from asya.jsonlines import CONTENT_TYPE, JsonlWriter, escape_line_breaks
from asya.timeutil import parse_ts

__all__ = [
    "CONTENT_TYPE",
    "CheckpointEntry",
    "CheckpointError",
    "CheckpointLine",
    "CheckpointWriter",
    "checkpoint_day",
    "checkpoint_text",
    "put_unparsed",
]

UNPARSED_PREFIX: Final = tableschema.UNPARSED_PREFIX
_PHASES: Final = frozenset(tableschema.CHECKPOINT_PREFIXES)


class CheckpointError(AsyaError):
    """A checkpoint object could not be written: every record it holds fails (P-SINK-5 (b), P-SUMP-4)."""


@dataclass(frozen=True, slots=True)
class CheckpointLine:
    """Where one envelope was checkpointed: the object key and its 1-based line (P-CKPT-4) and, once written, the
    line's bytes in the object as ``(offset, length)``, newline excluded: one ranged GET reads it back (GW-DATA-10)."""

    key: str
    line: int
    span: tuple[int, int] | None = field(default=None, compare=False)

    def header(self) -> dict[str, Any]:
        """The ``x-asya-checkpointed`` header value (P-SINK-5 (e))."""
        return {"key": self.key, "line": self.line}


@dataclass(frozen=True, slots=True)
class CheckpointEntry:
    """One record's envelope to checkpoint: ``ref`` names the record to the caller (its SQS message id)."""

    ref: Hashable
    phase: str
    envelope: Envelope


def checkpoint_day(envelope: Envelope, *, now: datetime) -> str:
    """``YYYY-MM-DD``: the UTC date of ``status.updated_at``, else of ``now`` (P-CKPT-1)."""
    updated = parse_ts(envelope.status.updated_at) if envelope.status is not None else None
    return (updated or now).date().isoformat()


def checkpoint_text(envelope: Envelope) -> str:
    """The envelope as one JSON Lines line, without its newline (P-CKPT-3)."""
    return escape_line_breaks(envelope.to_json())


class CheckpointWriter(JsonlWriter[str]):
    """Groups a batch's entries into objects and writes each with one PUT. ``s3`` returns the client (called only
    when there is something to write); ``new_id`` names objects (a UUID4 by default)."""

    _error = CheckpointError
    _what = "checkpoint"

    def _start(self) -> None:
        self._planned: dict[Hashable, CheckpointLine] = {}
        self._last: dict[tuple[str, str], CheckpointLine] = {}  # (phase, day) -> the last line planned

    def plan(self, ref: Hashable, phase: str, envelope: Envelope) -> CheckpointLine:
        """Reserve the next line of this invocation's ``(phase, day)`` object for ``ref`` (see the module docstring)."""
        group = (phase, checkpoint_day(envelope, now=self._clock()))
        last = self._last.get(group)
        line = (
            CheckpointLine(tableschema.checkpoint_key(phase, group[1], self._new_id()), 1)
            if last is None
            else CheckpointLine(last.key, last.line + 1)
        )
        self._last[group] = self._planned[ref] = line
        return line

    def unplan(self, ref: Hashable) -> None:
        """Give back ``ref``'s reservation, which must be the last one of its object (records plan one at a time)."""
        line = self._planned.pop(ref, None)
        if line is None:
            return
        for group, last in self._last.items():
            if last == line:
                self._last[group] = CheckpointLine(line.key, line.line - 1)
                return
        raise ValueError(f"unplan: line {line.line} of {line.key} is not the last one planned")

    def write(self, entries: Iterable[CheckpointEntry]) -> dict[Hashable, CheckpointLine | CheckpointError]:
        """Write ``entries`` (in record order) and say, per ``ref``, where it landed or why it did not."""
        planned, self._planned, self._last = self._planned, {}, {}
        now = self._clock()
        groups: dict[tuple[str, str], list[CheckpointEntry]] = {}
        for entry in entries:
            if entry.phase not in _PHASES:
                raise ValueError(f"phase: checkpoints are for 'succeeded' or 'failed' envelopes, got {entry.phase!r}")
            line = planned.get(entry.ref)
            group = ("", line.key) if line is not None else (entry.phase, checkpoint_day(entry.envelope, now=now))
            groups.setdefault(group, []).append(entry)
        out: dict[Hashable, CheckpointLine | CheckpointError] = {}
        for (phase, day), members in groups.items():
            key = day if not phase else tableschema.checkpoint_key(phase, day, self._new_id())
            if not phase and [planned[entry.ref].line for entry in members] != list(range(1, len(members) + 1)):
                gap = CheckpointError(f"checkpoint {key}: the planned lines are not 1..{len(members)} in record order")
                out.update((entry.ref, gap) for entry in members)
                continue
            texts = [checkpoint_text(entry.envelope) for entry in members]
            try:
                self._put(self._bucket, key, texts)
            except CheckpointError as exc:
                out.update((entry.ref, exc) for entry in members)
                continue
            offset = 0
            for number, (entry, text) in enumerate(zip(members, texts, strict=True), start=1):
                length = len(text.encode("utf-8"))
                out[entry.ref] = CheckpointLine(key, number, (offset, length))
                offset += length + 1  # the newline
        return out


def put_unparsed(s3: Any, bucket: str, message_id: str, body: str, *, now: datetime) -> str:
    """Store a body that did not parse (P-SUMP-5); its key. An object already there (a redelivery) is kept."""
    key = tableschema.unparsed_key(now.date().isoformat(), message_id)
    try:
        s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=body.encode("utf-8", errors="surrogateescape"),
            ContentType="text/plain; charset=utf-8",
            IfNoneMatch="*",
        )
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        if code != "PreconditionFailed":
            raise CheckpointError(f"unparsed body s3://{bucket}/{key} could not be written ({code}): {exc}") from exc
    except BotoCoreError as exc:
        raise CheckpointError(f"unparsed body s3://{bucket}/{key} could not be written: {exc}") from exc
    return key
