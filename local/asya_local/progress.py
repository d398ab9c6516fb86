"""Rendering a task's SSE events for a person: a progress bar that follows the stream, and the live FLY output.

Both modes draw the same line, ``[#######-------]  50.0%  analyze  processing``, from ``progress_percent``,
``current_actor`` and ``step`` of ``status`` events (GW-TASK-2); a terminal status shows the status instead of the
actor and step. FLY values (GW-SSE-11) are the partial output: strings as they are, other values as JSON.

- On a TTY the line is redrawn in place and the tail of the partial output is shown after ``|``; ``finish()`` ends
  the line and prints the whole partial output once.
- Otherwise (a pipe, a log file) a new line is written each time the line would change, so a log shows every step;
  partial output gathered since the last line is written before the next one as ``  | <text>``, and once more by
  ``finish()`` when some is still pending.
"""

from __future__ import annotations

import json
from typing import TextIO

from asya_local.sse import SseEvent

__all__ = ["ProgressView", "render_bar"]

_BAR_WIDTH = 24


def render_bar(percent: float, *, width: int = _BAR_WIDTH) -> str:
    """``[#####-----]  50.0%``: the bar for ``percent`` clamped to 0..100."""
    clamped = max(0.0, min(100.0, percent))
    filled = round(width * clamped / 100)
    return f"[{'#' * filled}{'-' * (width - filled)}] {clamped:5.1f}%"


class ProgressView:
    """Consumes SSE events and writes the display to ``out``."""

    def __init__(self, out: TextIO, *, tty: bool, columns: int = 100) -> None:
        self._out = out
        self._tty = tty
        self._columns = max(40, columns)
        self._percent = 0.0
        self._label = ""
        self._partial = ""
        self._pending = ""
        self._last_line = ""
        self._drawn = False

    @property
    def partial_output(self) -> str:
        return self._partial

    def on_event(self, event: SseEvent) -> None:
        try:
            data = event.json()
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        if event.event == "status":
            self._on_status(data)
        elif event.event == "fly":
            self._on_fly(data.get("payload"))

    def _on_status(self, data: dict[str, object]) -> None:
        percent = data.get("progress_percent")
        if isinstance(percent, int | float) and not isinstance(percent, bool):
            self._percent = float(percent)
        parts = [str(data[key]) for key in ("current_actor", "step") if data.get(key)]
        status = data.get("status")
        if status != "running" and isinstance(status, str):
            parts = [status]
        self._label = "  ".join(parts)
        if self._tty:
            self._draw()
        else:
            self._write_line()

    def _on_fly(self, value: object) -> None:
        text = value if isinstance(value, str) else json.dumps(value)
        self._partial += text
        if self._tty:
            self._draw()
        else:
            self._pending += text

    def _line(self) -> str:
        return f"{render_bar(self._percent)}  {self._label}".rstrip()

    def _draw(self) -> None:
        line = self._line()
        if self._partial:
            room = self._columns - len(line) - 5
            tail = self._partial.replace("\n", " ")
            if room > 0:
                line += f"  | {tail[-room:]}"
        self._out.write("\r\x1b[K" + line[: self._columns - 1])
        self._out.flush()
        self._drawn = True

    def _write_line(self) -> None:
        self._flush_pending()
        line = self._line()
        if line != self._last_line:
            self._out.write(line + "\n")
            self._last_line = line
        self._out.flush()

    def _flush_pending(self) -> None:
        if self._pending:
            self._out.write(f"  | {self._pending}\n")
            self._pending = ""

    def finish(self) -> None:
        if self._tty:
            if self._drawn:
                self._out.write("\r\x1b[K" + self._line() + "\n")
            if self._partial:
                self._out.write(f"partial output: {self._partial}\n")
        else:
            self._flush_pending()
        self._out.flush()
