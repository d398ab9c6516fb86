"""Reading JSON Lines checkpoints (PROTOCOL P-CKPT-1..4) back from S3 in tests, as a user would: the task view names
the object and the 1-based line."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def checkpoint_lines(s3: Any, bucket: str, key: str) -> list[dict[str, Any]]:
    """Every line of the object ``key``, parsed, in order. Lines are split on ``\\n`` only, as JSON Lines readers do."""
    text = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
    assert text.endswith("\n"), f"{key}: a JSON Lines object ends with a newline"
    return [json.loads(line) for line in text.split("\n")[:-1]]


def task_checkpoint(s3: Any, bucket: str, task: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope at the task view's ``checkpoint_key`` and ``checkpoint_line``."""
    lines = checkpoint_lines(s3, bucket, task["checkpoint_key"])
    line = task["checkpoint_line"]
    assert isinstance(line, int) and 1 <= line <= len(lines), f"checkpoint_line {line!r} of {len(lines)} lines"
    return lines[line - 1]
