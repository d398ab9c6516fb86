"""The output side of the ``asya`` commands: where results (stdout) and diagnostics (stderr) go.

Results are written to ``out`` and flushed at once, so a pipe sees each line when it is written; every diagnostic is
one ``asya: <message>`` line on ``err``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = ["CliIo", "compact_json"]


def compact_json(value: Any) -> str:
    """``value`` as one line of JSON, non-ASCII text kept readable."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@dataclass(frozen=True, slots=True)
class CliIo:
    out: TextIO
    err: TextIO

    def print_json(self, value: Any) -> None:
        self.out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
        self.out.flush()

    def line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        """An informational line on stderr (not part of the result)."""
        self.err.write(text + "\n")
        self.err.flush()

    def error(self, message: str) -> None:
        self.err.write(f"asya: {message}\n")
        self.err.flush()
