"""asya_crew: the built-in crew actors x-sink, x-sump, x-pause and x-resume (docs/protocol.md 13), run by the same
batch machinery as user actors. Each module exposes ``Runtime(config, *, sqs=None, dynamodb=None, s3=None,
clock=...)`` with ``handle(event, context)`` and a module-level ``lambda_handler``. Importing this package has no
side effects.
"""

from __future__ import annotations

from asya_crew.checkpoint import (
    CheckpointEntry,
    CheckpointError,
    CheckpointLine,
    CheckpointWriter,
    checkpoint_day,
    checkpoint_text,
)
from asya_crew.pause import PausedFileError, PauseRuntime
from asya_crew.resume import ResumeRuntime
from asya_crew.sink import HookSendError, SinkRuntime
from asya_crew.sump import SumpRuntime

__all__ = [
    "CheckpointEntry",
    "CheckpointError",
    "CheckpointLine",
    "CheckpointWriter",
    "HookSendError",
    "PauseRuntime",
    "PausedFileError",
    "ResumeRuntime",
    "SinkRuntime",
    "SumpRuntime",
    "checkpoint_day",
    "checkpoint_text",
]
