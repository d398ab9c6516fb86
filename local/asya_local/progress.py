"""Rendering a task's SSE events for a person: a progress bar on a terminal and the live FLY output.

On a TTY the last line is redrawn in place: ``[#######-------]  50.0%  analyze  processing  | <partial output>``
driven by ``progress_percent`` of ``status`` events (GW-TASK-2); FLY text (GW-SSE-11) is appended to the partial
output shown on that line. When the stream is not a TTY, FLY values are written as they arrive (strings as is, other
values as JSON) and nothing else. ``finish()`` ends the display and prints the whole partial output once.
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
        self._draw()

    def _on_fly(self, value: object) -> None:
        text = value if isinstance(value, str) else json.dumps(value)
        self._partial += text
        if self._tty:
            self._draw()
        else:
            self._out.write(text)
            self._out.flush()

    def _draw(self) -> None:
        if not self._tty:
            return
        line = f"{render_bar(self._percent)}  {self._label}"
        if self._partial:
            room = self._columns - len(line) - 5
            tail = self._partial.replace("\n", " ")
            if room > 0:
                line += f"  | {tail[-room:]}"
        self._out.write("\r\x1b[K" + line[: self._columns - 1])
        self._out.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._tty:
            if self._drawn:
                self._out.write("\r\x1b[K" + f"{render_bar(self._percent)}  {self._label}\n")
            if self._partial:
                self._out.write(f"partial output: {self._partial}\n")
        elif self._partial:
            self._out.write("\n")
        self._out.flush()
