"""How ``asya call`` and ``asya watch`` show a task's fan-out children (docs/http.md GW-TASK-9).

The parent's event stream carries no child events: the CLI follows the children itself, from the child tree of the
parent's task view (``children``: status, current actor, attempt, last error per child, P-FAN-7). It reads the view
after an event of the parent's stream when at least ``interval`` seconds (2 s) passed since its last read, and once
more when the stream ends. Each read is one ``GET /api/v1/mesh/{id}`` (one query of the task's partition); a client
that does not follow children costs nothing.

:class:`ChildWatch` prints one line per change worth a person's attention, labelled with the child:
``child ID: retrying attempt N at ACTOR: ERROR`` and ``child ID: failed at ACTOR: ERROR``. A child that succeeds
is not announced; at the end, :meth:`ChildWatch.summary` says how many children ended how, and how many still run
(children may finish after their task, P-FAN-6).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["CHILD_READ_INTERVAL_SECONDS", "ChildWatch", "child_line"]

#: At most one view read per this many seconds while following a task.
CHILD_READ_INTERVAL_SECONDS: Final = 2.0
_ANNOUNCED: Final = frozenset({"retrying", "failed"})


def child_line(child: Mapping[str, Any]) -> str | None:
    """The line announcing ``child``'s state, ``None`` for a state not announced."""
    status = child.get("status")
    if status not in _ANNOUNCED:
        return None
    actor = child.get("current_actor") or "?"
    error = f": {child['error']}" if child.get("error") else ""
    if status == "retrying":
        return f"child {child.get('id')}: retrying attempt {child.get('attempt')} at {actor}{error}"
    return f"child {child.get('id')}: failed at {actor}{error}"


class ChildWatch:
    """Follows one task's children through its view; ``read()`` returns the view, ``say(line)`` prints."""

    def __init__(
        self,
        read: Callable[[], dict[str, Any]],
        say: Callable[[str], None],
        *,
        interval: float = CHILD_READ_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._say = say
        self._interval = interval
        self._monotonic = monotonic
        self._last_read: float | None = None
        self._seen: dict[str, tuple[Any, Any]] = {}  # child id -> (status, attempt) last announced or seen
        self._children: list[Mapping[str, Any]] = []

    def poll(self) -> None:
        """Read the view if the interval passed since the last read, and announce what changed."""
        now = self._monotonic()
        if self._last_read is not None and now - self._last_read < self._interval:
            return
        self._last_read = now
        self.update(self._read())

    def update(self, view: Mapping[str, Any]) -> None:
        """Announce the changes of ``view``'s children since the last view."""
        children = [c for c in view.get("children") or [] if isinstance(c, Mapping)]
        self._children = children
        for child in children:
            key = str(child.get("id"))
            state = (child.get("status"), child.get("attempt"))
            if self._seen.get(key) == state:
                continue
            self._seen[key] = state
            line = child_line(child)
            if line is not None:
                self._say(line)

    def summary(self) -> str | None:
        """``children: 2 succeeded, 1 failed, 1 still running``, or ``None`` without children."""
        if not self._children:
            return None
        counts = Counter(str(c.get("status")) for c in self._children)
        running = counts.pop("running", 0) + counts.pop("retrying", 0)
        parts = [f"{n} {status}" for status, n in sorted(counts.items())]
        if running:
            parts.append(f"{running} still running")
        return "children: " + ", ".join(parts)
