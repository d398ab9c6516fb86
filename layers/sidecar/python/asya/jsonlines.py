"""The JSON Lines object writer shared by checkpoints (``asya_crew.checkpoint``, P-CKPT-1..3) and the run history
(``asya.history``, P-HIST-2).

- :func:`jsonl_line`: one value as one line: compact JSON with U+0085, U+2028 and U+2029 written as ``\\u`` escapes,
  so that readers that also split lines there (Python's ``str.splitlines``) see the same lines as ``sed``, Athena and
  DuckDB.
- :func:`put_jsonl`: lines joined by ``\\n`` (a trailing one too) in ONE ``PutObject`` with ``If-None-Match: *`` and
  ``Content-Type: application/x-ndjson``: a new object per call, never an overwrite of lines others point to. A failed
  PUT raises the caller's error class with the bucket, key and S3 error code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

__all__ = ["CONTENT_TYPE", "escape_line_breaks", "put_jsonl"]

CONTENT_TYPE: Final = "application/x-ndjson"
#: The line breaks JSON leaves raw in UTF-8 output, written as escapes (they can only occur inside JSON strings)
_LINE_BREAKS: Final = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


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
