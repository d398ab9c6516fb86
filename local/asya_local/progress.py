"""Rendering a task's SSE events for a person: a progress bar that follows the stream, and the live FLY output.

Both modes draw the same line, ``[#######-------]  50.0%  analyze  processing``, from ``progress_percent``,
``current_actor`` and ``step`` of ``status`` events (GW-TASK-2). A ``retrying`` step adds
``attempt N in D s: <error>`` (its ``attempt``, ``delay_seconds`` and ``error``); a terminal status shows the
status instead of the actor and step, and a ``failed`` one adds ``<error> (at <failed_actor>)``.

FLY values (GW-SSE-11) are the partial output: a string is text and is shown as it is, streamed; any other value is
shown as one line of JSON.

- On a TTY the line is redrawn in place and the tail of the partial output is shown after ``|``; ``finish()`` ends
  the line and prints the whole partial output once.
- Otherwise (a pipe, a log file) everything is written as it arrives, in event order, flushed at once: a new
  status line each time the line would change (so a log shows every step), FLY text as it comes (a line break is
  added before the next status line when the text did not end with one), each other FLY value on a line of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TextIO

from asya_local.sse import SseEvent

__all__ = ["ProgressView", "render_bar", "status_label"]

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
        self._midline = False
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
        self._label = status_label(data)
        if self._tty:
            self._draw()
        else:
            self._write_line()

    def _on_fly(self, value: object) -> None:
        if isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, ensure_ascii=False) + "\n"
            if self._partial and not self._partial.endswith("\n"):
                text = "\n" + text
        self._partial += text
        if self._tty:
            self._draw()
            return
        if not isinstance(value, str):
            self._end_midline()
            text = text.lstrip("\n")
        self._out.write(text)
        self._midline = bool(text) and not text.endswith("\n")
        self._out.flush()

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
        line = self._line()
        if line != self._last_line:
            self._end_midline()
            self._out.write(line + "\n")
            self._last_line = line
        self._out.flush()

    def _end_midline(self) -> None:
        if self._midline:
            self._out.write("\n")
            self._midline = False

    def finish(self) -> None:
        if self._tty:
            if self._drawn:
                self._out.write("\r\x1b[K" + self._line() + "\n")
            if self._partial:
                self._out.write(f"partial output: {self._partial.rstrip(chr(10))}\n")
        else:
            self._end_midline()
        self._out.flush()


def status_label(data: Mapping[str, object]) -> str:
    """What follows the bar for one status data object (GW-TASK-2)."""
    status = data.get("status")
    if isinstance(status, str) and status != "running":
        if status == "failed":
            actor = data.get("failed_actor")
            where = f" (at {actor})" if actor else ""
            return f"failed  {data.get('error') or 'task failed'}{where}"
        return status
    parts = [str(data[key]) for key in ("current_actor", "step") if data.get(key)]
    if data.get("step") == "retrying":
        delay = data.get("delay_seconds")
        retry = f"attempt {data.get('attempt')}" + (f" in {delay} s" if delay is not None else "")
        parts.append(f"{retry}: {data['error']}" if data.get("error") else retry)
    return "  ".join(parts)
