"""The status rules as pure functions (P-STAT-1, P-STAT-2, P-STAT-6, P-STAT-9; GW-BACK-2).

``decide(stored, update)`` says what an update does to a stored task: ``ACCEPT`` (with the progress to store),
``STALE`` (nothing changes, nothing is logged) or ``ATTACH_CHECKPOINT`` (a terminal task without a checkpoint key gets
one, no event). The store turns the same rules into DynamoDB condition expressions (``asya.store.updates``); this
module is the reference they are tested against.

Rules:

- order ``pending`` 0, ``running`` 1, ``paused`` 2, terminal (``succeeded``, ``failed``, ``canceled``) 3; an update
  with a higher order than the stored status is accepted;
- ``running`` on ``running`` is a progress update, stale when it would leave ``current_actor``, ``step`` and
  ``progress_percent`` as they are;
- ``paused -> running`` only through the gateway's resume (``resume=True``), which requires ``paused``;
- the first terminal write wins; a later terminal write carrying a ``checkpoint_key`` attaches it when the task has
  none;
- progress never decreases; ``succeeded`` sets 100; ``failed``, ``canceled`` and ``paused`` keep it;
- the backstop's update (``if_deadline_at`` set) applies only to a ``pending``/``running`` task whose ``deadline_at``
  is still that value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from enum import StrEnum
from typing import Any, Final

from asya.envelope import dumps
from asya.progress import RUNNING_STEPS
from asya.store.errors import StatusUpdateError
from asya.store.inline import result_fits
from asya.store.limits import DATA_LIMIT_BYTES, ERROR_LIMIT_BYTES, MESSAGE_LIMIT_BYTES, NAME_LIMIT, clip_text, oversize

__all__ = [
    "MISSING",
    "STATUSES",
    "STATUS_ORDER",
    "TERMINAL",
    "Decision",
    "StatusUpdate",
    "StoredState",
    "Verdict",
    "decide",
]


class _Missing:
    """Sentinel: a value that was not given (``None`` is a valid result)."""

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()

STATUS_ORDER: Final = {
    "pending": 0,
    "running": 1,
    "paused": 2,
    "succeeded": 3,
    "failed": 3,
    "canceled": 3,
}
STATUSES: Final = tuple(STATUS_ORDER)
TERMINAL: Final = frozenset({"succeeded", "failed", "canceled"})


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """One status event to apply to a task (layer, crew, gateway and backstop all use this one shape).

    ``data`` holds the small extra members of the status data object (GW-TASK-2: ``attempt``, ``delay_seconds``, and
    under progress ``detailed`` ``prev``, ``curr``, ``next``, ``message_size_kb``, ``duration_ms``, ``frames``); it is
    stored on the task item, as ``data_json``. ``message`` and ``error`` are clipped to their bounds
    (``asya.store.limits``); a longer ``actor``/``failed_actor`` or ``data`` raises :class:`StatusUpdateError`.
    ``result`` and ``error_details`` go to the task's result item, ``pause_metadata`` to its pause item (or S3).
    ``created_at_hint`` (the envelope's ``status.created_at``) lets the store guess the task's creation day, which the
    ``by_outcome`` index key of a failed or canceled terminal write needs, without a read.
    """

    status: str
    step: str | None = None
    actor: str | None = None
    progress: float | None = None
    message: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    result: Any = MISSING
    error: str | None = None
    error_details: Mapping[str, Any] | None = None
    failed_actor: str | None = None
    checkpoint_key: str | None = None
    checkpoint_line: int | None = None
    #: ``(offset, length)`` of the checkpoint line that holds this succeeded update's result as its ``payload``: a
    #: result too large for the task item is read from there, and no result item is written (GW-DATA-10)
    result_span: tuple[int, int] | None = None
    pause_metadata: Mapping[str, Any] | None = None
    remaining_seconds: int | None = None
    resume: bool = False
    deadline_at: str | None = None
    if_deadline_at: str | None = None
    envelope_id: str | None = None
    created_at_hint: str | None = None
    #: who makes a terminal write (an SQS message id or a request id): stored as ``terminal_by``, so that only that
    #: writer, or a redelivery of its message, writes the task's result item (GW-DATA-2)
    writer_id: str | None = None
    #: the hop claim this running update also is (P-ACK-8, P-STAT-19): ``(hop, attempt, lease_until_ms)``
    claim: tuple[int, int, int] | None = None
    #: the retry's fence write (P-RES-8): the stored fence must be exactly this ``(hop, attempt)``; the same write
    #: stores ``(hop, attempt + 1)`` with ``lease_until = 0``
    refence: tuple[int, int] | None = None
    #: the run history's chain head a hop claim also stores (P-HIST-4): ``(history_key, history_prev)``
    history: tuple[str, str | None] | None = None
    #: P-WAIT-2, P-WAIT-5: a resume by the mesh itself (a pause's expiry, a buffered signal): it applies only while the
    #: stored fence is exactly this pause's ``(hop, attempt)``
    pause_fence: tuple[int, int] | None = None
    #: P-WAIT-2: the resume is the pause's expiry: stores ``pause_timed_out_at`` (a later resume is told why it fails)
    pause_timed_out: bool = False
    #: a reporter's event for hop ``h`` (GW-EVT-3): applies only while no fence past ``h`` is stored, else stale
    if_fence_at_most: int | None = None
    #: ``data`` as compact JSON, the text the store writes: ``encoded_data`` or, without it, encoded here.
    data_json: str = field(init=False, repr=False, compare=False)
    #: ``result`` as compact JSON when it fits on the task item (GW-DATA-8), else ``None``: the result item holds it
    inline_result: str | None = field(init=False, repr=False, compare=False)
    #: ``data`` already encoded by the caller (``asya.store.limits.fit_data_json``). Init-only, so that
    #: ``dataclasses.replace`` with other ``data`` encodes that data instead of keeping a text that no longer matches.
    encoded_data: InitVar[str] = ""

    def __post_init__(self, encoded_data: str) -> None:
        self._check_sizes(encoded_data)
        if self.status not in STATUS_ORDER:
            raise StatusUpdateError(f"status: unknown status {self.status!r}: use one of {', '.join(STATUSES)}")
        if self.step is not None and (self.status != "running" or self.step not in RUNNING_STEPS):
            raise StatusUpdateError(
                f"step: {self.step!r} is not allowed with status {self.status!r}: "
                f"a running event's step is one of {', '.join(RUNNING_STEPS)}"
            )
        if self.progress is not None and (
            isinstance(self.progress, bool) or not math.isfinite(self.progress) or not 0 <= self.progress <= 100
        ):
            raise StatusUpdateError(f"progress: {self.progress!r} is not a number between 0 and 100")
        if (self.pause_fence is not None or self.pause_timed_out) and not self.resume:
            raise StatusUpdateError("pause_fence: only a resume names the pause it ends")
        if self.resume and self.status != "running":
            raise StatusUpdateError(f"resume: a resume sets status 'running', got {self.status!r}")
        if self.deadline_at is not None and not self.resume:
            raise StatusUpdateError("deadline_at: only a resume sets a new deadline")
        if self.status == "paused" and not isinstance(self.pause_metadata, Mapping):
            raise StatusUpdateError(f"pause_metadata: a paused update needs an object, got {self.pause_metadata!r}")
        if self.result is not MISSING and self.status != "succeeded":
            raise StatusUpdateError(f"result: only a succeeded update has a result (status {self.status!r})")
        if self.result_span is not None and (self.result is MISSING or self.checkpoint_key is None):
            raise StatusUpdateError("result_span: names a result's checkpoint line: needs result and checkpoint_key")

    def _check_sizes(self, encoded_data: str) -> None:
        # long text is cut, never refused (GW-DATA-8): the whole error stays in error_details
        for name, text, limit in (
            ("message", self.message, MESSAGE_LIMIT_BYTES),
            ("error", self.error, ERROR_LIMIT_BYTES),
        ):
            if text is not None and oversize(text, limit) is not None:
                object.__setattr__(self, name, clip_text(text, limit))
                if name == "error" and self.status == "failed" and self.error_details is None:
                    # the whole text goes to the result item (GW-DATA-8: "the full text in the result item")
                    object.__setattr__(self, "error_details", {"message": text})
        for name, value in (("actor", self.actor), ("failed_actor", self.failed_actor)):
            if value is not None and len(value) > NAME_LIMIT:
                raise StatusUpdateError(f"{len(value)} characters, over the limit of {NAME_LIMIT}", field=name)
        data_json = encoded_data or dumps(dict(self.data))
        if (size := oversize(data_json, DATA_LIMIT_BYTES)) is not None:
            raise StatusUpdateError(f"{size} bytes as JSON, over the limit of {DATA_LIMIT_BYTES} bytes", field="data")
        object.__setattr__(self, "data_json", data_json)  # encoded once: the store writes this text
        inline = None
        if self.status == "succeeded" and self.result is not MISSING:
            text = dumps(self.result)
            inline = text if result_fits(text) else None
        object.__setattr__(self, "inline_result", inline)

    @property
    def order(self) -> int:
        return STATUS_ORDER[self.status]

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True, slots=True)
class StoredState:
    """The members of a stored task record the rules look at."""

    status: str
    created_at: str = ""
    last_seq: int = 0
    progress: float = 0.0
    current_actor: str | None = None
    step: str | None = None
    checkpoint_key: str | None = None
    deadline_at: str | None = None
    fence: tuple[int, int] | None = None
    lease_until: int = 0
    terminal_by: str | None = None

    @property
    def order(self) -> int:
        return STATUS_ORDER.get(self.status, 0)


class Verdict(StrEnum):
    ACCEPT = "accept"
    STALE = "stale"
    ATTACH_CHECKPOINT = "attach_checkpoint"


@dataclass(frozen=True, slots=True)
class Decision:
    """``progress`` is the value to store when accepted (``None``: unchanged)."""

    verdict: Verdict
    progress: float | None = None


_STALE: Final = Decision(Verdict.STALE)


def decide(stored: StoredState, update: StatusUpdate) -> Decision:
    """Apply the status rules to ``update`` on a task in state ``stored``."""
    if stored.status in TERMINAL:
        if update.terminal and update.checkpoint_key and stored.checkpoint_key is None:
            return Decision(Verdict.ATTACH_CHECKPOINT)
        return _STALE
    if update.if_deadline_at is not None and (
        stored.status not in ("pending", "running") or stored.deadline_at != update.if_deadline_at
    ):
        return _STALE
    if update.resume:
        return Decision(Verdict.ACCEPT, _progress(stored, update)) if stored.status == "paused" else _STALE
    if update.refence is not None and stored.fence != update.refence:
        return _STALE
    if update.if_fence_at_most is not None and stored.fence is not None and stored.fence[0] > update.if_fence_at_most:
        return _STALE
    if (update.claim is not None or update.refence is not None) and stored.status in ("pending", "running"):
        return Decision(Verdict.ACCEPT, _progress(stored, update))  # a claim always stores its fence (P-STAT-6)
    if update.status == "running" and stored.status == "running":
        progress = _progress(stored, update)
        unchanged = (
            (update.actor is None or update.actor == stored.current_actor)
            and (update.step is None or update.step == stored.step)
            and (progress is None or progress == stored.progress)
        )
        return _STALE if unchanged else Decision(Verdict.ACCEPT, progress)
    if update.order > stored.order:
        return Decision(Verdict.ACCEPT, _progress(stored, update))
    return _STALE


def _progress(stored: StoredState, update: StatusUpdate) -> float | None:
    if update.status == "succeeded":
        return 100.0
    if update.status != "running" or update.progress is None or update.progress <= stored.progress:
        return None
    return float(update.progress)
