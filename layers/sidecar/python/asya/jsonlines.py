"""The JSON Lines object writer shared by checkpoints (``asya_crew.checkpoint``, P-CKPT-1..3) and the run history
(``asya.history``, P-HIST-2).

- :func:`jsonl_line`: one value as one line: compact JSON with U+0085, U+2028 and U+2029 written as ``\\u`` escapes,
  so that readers that also split lines there (Python's ``str.splitlines``) see the same lines as ``sed``, Athena and
  DuckDB.
- :func:`put_jsonl`: lines joined by ``\\n`` (a trailing one too) in ONE ``PutObject`` with ``If-None-Match: *`` and
  ``Content-Type: application/x-ndjson``: a new object per call, never an overwrite of lines others point to. A failed
  PUT raises the caller's error class with the bucket, key and S3 error code.
- :class:`JsonlWriter`: the base of both batching writers: their bucket, the S3 client's factory (called only when
  there is something to write), a clock, and the source of the fresh UUID4 that ends each object key they choose
  (:func:`new_object_id`: no id from an envelope steers a key); :meth:`JsonlWriter._put` writes one object with the
  subclass's error class.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final, Generic, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

__all__ = ["CONTENT_TYPE", "JsonlWriter", "escape_line_breaks", "new_object_id", "put_jsonl"]

CONTENT_TYPE: Final = "application/x-ndjson"
#: The line breaks JSON leaves raw in UTF-8 output, written as escapes (they can only occur inside JSON strings)
_LINE_BREAKS: Final = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
#: ``str`` for a writer that always has a bucket, ``str | None`` for one that a missing bucket turns off
_Bucket = TypeVar("_Bucket", bound=str | None)


def escape_line_breaks(text: str) -> str:
    """``text`` (compact JSON) with the Unicode line breaks escaped: one JSON Lines line, without its newline."""
    return text.translate(_LINE_BREAKS)


def put_jsonl(
    s3: Any, bucket: str, key: str, lines: Sequence[str], *, error: type[Exception], what: str = "object"
) -> None:
    """Write ``lines`` as a new object ``key``; raises ``error`` naming the object when S3 refuses or fails."""
    body = ("\n".join(lines) + "\n").encode("utf-8")
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=CONTENT_TYPE, IfNoneMatch="*")
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        raise error(f"{what} s3://{bucket}/{key} could not be written ({code}): {exc}") from exc
    except BotoCoreError as exc:
        raise error(f"{what} s3://{bucket}/{key} could not be written: {exc}") from exc


def new_object_id() -> str:
    """A fresh UUID4, the last part of an object key."""
    return str(uuid.uuid4())


class JsonlWriter(Generic[_Bucket]):
    """What a batching JSON Lines writer holds (see the module docstring); a subclass names its error class and
    object kind, and sets up its own state in :meth:`_start`."""

    _error: ClassVar[type[Exception]]
    _what: ClassVar[str]

    def __init__(
        self,
        *,
        bucket: _Bucket,
        s3: Callable[[], Any],
        clock: Callable[[], datetime],
        new_id: Callable[[], str] = new_object_id,
    ) -> None:
        self._bucket = bucket
        self._s3 = s3
        self._clock = clock
        self._new_id = new_id
        self._start()

    def _start(self) -> None:
        """The subclass's own state, set up once at the end of ``__init__``."""

    def _put(self, bucket: str, key: str, lines: Sequence[str]) -> None:
        put_jsonl(self._s3(), bucket, key, lines, error=self._error, what=self._what)
