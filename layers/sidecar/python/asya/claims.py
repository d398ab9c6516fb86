"""The hop claim of one actor runtime: pre-flight reads, the claim itself, its lease (P-ACK-7, P-ACK-8,
P-STAT-10, P-FAN-5; GW-DATA-1, GW-DATA-8).

A fenced envelope (a tracked root, or a child of any depth, neither in stealth mode nor a hook copy) has per hop the
fence ``(h, a)``: ``h = len(route.prev) + 1``, ``a`` the attempt after the entry update (P-PROC-4). Per SQS batch a
:class:`ClaimBook` holds:

- the pre-flight items: the task item of every fenced record (its own id, or its parent's for a child, P-FAN-5) and
  each child's own fence item, read with ONE strongly consistent ``BatchGetItem`` (:meth:`HopClaims.preflight`),
  and whether that read answered (``read``). A root envelope whose read failed goes on: its claim's condition reads
  its task item's status itself. A child's claim is on its own item and never reads the task, so a child whose read
  failed is failed (``PreflightReadError``) and comes back to a read that answers: otherwise a copy of a claimed hop
  of an ended task, back after its lease, would claim and run again;
- the lease every claim of the invocation stores: the invocation's hard deadline (Lambda's remaining time at its
  start) + 10 s;
- what this invocation claimed (to release the lease of a record that fails without a crash, and to treat a second
  copy of one message in the batch as a duplicate) and which records another run holds (with the seconds until that
  run's lease ends, for their visibility).

:meth:`HopClaims.screen` is step 6's verdict from the pre-flight read (``canceled``/``paused``: to x-sink; a root
envelope of a finished task, a child of a finished task whose own item shows this hop claimed already (P-STAT-10)
, or a stored fence higher than the envelope's, which a finished child's item always holds (P-ACK-7): a
duplicate); :meth:`HopClaims.claim` is
step 13's one conditional write (``asya.reporting.Reporter.claim``), whose failed condition says why. A claim write
that errors propagates: the record fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import headers as hdr
from asya import routing
from asya.envelope import Envelope
from asya.exceptions import HopHeldError, PreflightReadError
from asya.reporting import Fence, HopRef, ProgressMode, Reporter
from asya.store import IncompleteReadError, Outcome, TaskStore
from asya.timeutil import Clock

__all__ = ["ClaimBook", "Claimed", "HopClaims", "fence_of", "preflight_id"]

#: P-ACK-8: a claim's lease runs this long past the invocation's hard deadline.
_LEASE_MARGIN_MS: Final = 10_000
_FINISHED: Final = frozenset({"succeeded", "failed"})
_STOPPED: Final = frozenset({"canceled", "paused"})

_Items = dict[tuple[str, str], dict[str, Any]]

_log = logging.getLogger(__name__)


class Claimed(StrEnum):
    """What step 6 or step 13 decided for a fenced envelope."""

    CLAIMED = "claimed"  # the hop is this run's: call the handler
    UNTRACKED = "untracked"  # no task record (P-STAT-14): the call goes on unclaimed
    DUPLICATE = "duplicate"  # acked without a handler call, a send or a write
    CANCELED = "canceled"  # P-STAT-10: to x-sink
    PAUSED = "paused"


class ClaimBook:
    """One SQS batch's claims (see the module docstring)."""

    # a plain class, not a dataclass: generating a dataclass's methods costs cold-start time
    __slots__ = ("claimed", "held", "lease_until", "preflight", "read", "seen")

    def __init__(self, *, lease_until: int, preflight: _Items, read: bool = True) -> None:
        self.lease_until = lease_until  # epoch ms
        self.preflight = preflight
        self.read = read  # False: the pre-flight read failed, ``preflight`` is empty
        self.claimed: dict[str, Fence] = {}  # record id -> the fence this invocation claimed for it
        self.seen: set[tuple[str, str, int, int]] = set()  # fence items and fences claimed in this invocation
        self.held: dict[str, int] = {}  # record id -> seconds until another run's lease ends


def preflight_id(env: Envelope) -> str | None:
    """The task pre-flight reads: own id, or the parent's for a child (P-FAN-5); none when untracked."""
    if hdr.is_stealth(env.headers) or hdr.is_hook_copy(env.headers):
        return None
    return env.parent_id or env.id


def fence_of(env: Envelope, actor: str) -> Fence:
    """The fence ``(h, a)`` of this hop (P-ACK-8): ``h = len(route.prev) + 1``, ``a`` the entry attempt."""
    return Fence(
        envelope_id=env.id,
        parent_id=env.parent_id or None,
        hop=len(env.route.prev) + 1,
        attempt=routing.entry_attempt(env, actor),
    )


class HopClaims:
    """Pre-flight and hop claims of one actor runtime."""

    def __init__(
        self,
        *,
        store: TaskStore,
        reporter: Reporter,
        clock: Clock,
        actor_timeout: float,
        preflight: Callable[[Iterable[Envelope]], _Items] | None = None,
    ) -> None:
        """``preflight``: reads the batch's pre-flight items in the store's shape instead of the store (the HTTP
        reporter's ``GET`` reads, P-STAT-18)."""
        self._store = store
        self._reporter = reporter
        self._clock = clock
        self._actor_timeout = actor_timeout
        self._reader = preflight

    def book(self, envelopes: Iterable[Envelope], context: Any) -> ClaimBook:
        """The batch's claim book: the lease of its claims and the pre-flight read of its fenced envelopes."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        left_ms = remaining() if remaining is not None else int(self._actor_timeout * 1000)
        lease_until = self._now_ms() + int(left_ms) + _LEASE_MARGIN_MS
        try:
            items = self.preflight(envelopes)
        except (ClientError, BotoCoreError, IncompleteReadError) as exc:
            _log.warning("pre-flight read failed: roots go on to their claim, children come back: %s", exc)
            return ClaimBook(lease_until=lease_until, preflight={}, read=False)
        return ClaimBook(lease_until=lease_until, preflight=items)

    def preflight(self, envelopes: Iterable[Envelope]) -> _Items:
        """P-STAT-10's one read; raises when the store's read fails or leaves keys unread."""
        if self._reader is not None:
            return self._reader(envelopes)
        keys: list[dict[str, Any]] = []
        for env in envelopes:
            task_id = preflight_id(env)
            if task_id is None:
                continue
            keys.append(self._store.fence_key(task_id, None))
            if env.parent_id:
                keys.append(self._store.fence_key(env.id, env.parent_id))
        return self._store.preflight(keys, strict=True) if keys else {}

    def screen(self, env: Envelope, fence: Fence, book: ClaimBook) -> Claimed | None:
        """Step 6 (P-STAT-10): the verdict of the pre-flight read, ``None`` to go on. Raises
        ``PreflightReadError`` for a child when the read failed (see the module docstring)."""
        if not book.read and env.parent_id:
            raise PreflightReadError(f"pre-flight read failed: child {env.id!r} of task {env.parent_id!r} comes back")
        task = book.preflight.get(_key(self._store.fence_key(env.parent_id or env.id, None)))
        status = _status(task)
        if status == "canceled":
            return Claimed.CANCELED
        if status == "paused":
            return Claimed.PAUSED
        own = book.preflight.get(_key(self._store.fence_key(env.id, env.parent_id))) if env.parent_id else task
        stored = self._store.fence_of(own) if own is not None else None
        if (status in _FINISHED and _copy_of_claimed(env, stored, fence)) or (
            stored is not None and stored > fence.value
        ):
            return Claimed.DUPLICATE
        return None

    def claim(
        self,
        record_id: str,
        fence: Fence,
        book: ClaimBook,
        *,
        report: HopRef | None,
        mode: ProgressMode,
        size_kb: float,
        history: tuple[str, str | None] | None = None,
    ) -> Claimed:
        """Step 13: the hop claim (``history``: the run history's chain head it also stores, P-HIST-4).
        Raises ``HopHeldError`` when another run holds the hop under a live lease, and the
        store's error when the write fails."""
        seen = (*_key(self._store.fence_key(fence.envelope_id, fence.parent_id)), fence.hop, fence.attempt)
        if seen in book.seen:  # two copies of one message in this batch: the second is a duplicate
            return Claimed.DUPLICATE
        result = self._reporter.claim(
            fence, report, mode, lease_until=book.lease_until, message_size_kb=size_kb, history=history
        )
        if result.outcome is Outcome.ACCEPTED:
            book.seen.add(seen)
            book.claimed[record_id] = fence
            return Claimed.CLAIMED
        if result.outcome is Outcome.DUPLICATE:
            return Claimed.DUPLICATE
        if result.outcome is Outcome.HELD:
            left_ms = (result.lease_until or 0) - self._now_ms()
            raise HopHeldError(
                f"hop {fence.value} of {fence.envelope_id!r} is held by another run",
                remaining_seconds=max(1, -(-left_ms // 1000)),
            )
        if result.status in _STOPPED:
            return Claimed(result.status)
        return Claimed.UNTRACKED

    def release(self, book: ClaimBook, record_id: str) -> None:
        """The record failed without a crash: give up its lease (best effort, P-ACK-8)."""
        fence = book.claimed.pop(record_id, None)
        if fence is not None:
            self._reporter.release(fence)

    def _now_ms(self) -> int:
        return int(self._clock().timestamp() * 1000)


def _copy_of_claimed(env: Envelope, stored: tuple[int, int] | None, fence: Fence) -> bool:
    """Whether, the task having ended, this envelope is a copy (P-STAT-10): a root envelope always; a child when
    its own item shows this hop claimed already (a finished child's item holds a fence above any hop). A child's hop
    no run claimed yet is no copy: children may finish after their task (P-FAN-6)."""
    return not env.parent_id or (stored is not None and stored >= fence.value)


def _key(key: Mapping[str, Any]) -> tuple[str, str]:
    return (key["pk"]["S"], key["sk"]["S"])


def _status(item: Mapping[str, Any] | None) -> str | None:
    if item is None:
        return None
    value = item.get("status")
    return value.get("S") if isinstance(value, dict) else None
