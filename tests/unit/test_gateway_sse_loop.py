"""SSE wire format, ``Last-Event-ID`` parsing and the follower every wait consumes (GW-SSE-1 .. GW-SSE-9, R2).

``asya_gateway.follow.follow`` runs against :class:`FakeTask`, a :class:`~asya_gateway.follow.FollowSource` whose
task item and fly items a test changes between polls (as the layer's single write per hop would), and a step clock
(each reading advances a quarter second, one fast poll), so the 1 s hold-back of numbers without a fly item, the
keepalive and the duration limit are exercised without real time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from asya.store import Snapshot
from asya.timeutil import format_ts
from asya_gateway.errors import HttpError
from asya_gateway.follow import KEEPALIVE, FollowEvent, follow
from asya_gateway.sse import KEEPALIVE as KEEPALIVE_TEXT
from asya_gateway.sse import SseSettings, format_event, parse_last_event_id, sse_body
from tests.clocks import ManualClock

pytestmark = pytest.mark.unit

TASK = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"
STEP = 0.25
SETTINGS = SseSettings(poll_fast=0, poll_slow=0, fast_window=5, keepalive=1000, max_seconds=1000, gap_wait=1.0)


def test_format_event_gw_sse_2() -> None:
    assert format_event("status", {"status": "running"}, retry=1000) == (
        'retry: 1000\nevent: status\ndata: {"status":"running"}\n\n'
    )
    assert format_event("fly", {"payload": "a\nb"}, event_id=10) == 'id: 10\nevent: fly\ndata: {"payload":"a\\nb"}\n\n'
    assert format_event("fly", {"payload": "é"}, event_id=1).endswith('data: {"payload":"é"}\n\n')
    assert KEEPALIVE_TEXT == ":keepalive\n\n"


@pytest.mark.parametrize(
    ("header", "query", "expected"),
    [(None, None, 0), ("13", None, 13), (None, "4", 4), ("2", "9", 2), (" 7 ", None, 7), ("0", None, 0)],
)
def test_last_event_id_header_wins_gw_sse_1(header: str | None, query: str | None, expected: int) -> None:
    assert parse_last_event_id(header, query) == expected


@pytest.mark.parametrize(
    ("header", "query", "message"),
    [
        ("-1", None, "Last-Event-ID must be a non-negative integer, got '-1'"),
        ("abc", "3", "Last-Event-ID must be a non-negative integer, got 'abc'"),
        (None, "1.5", "last_event_id must be a non-negative integer, got '1.5'"),
        ("", None, "Last-Event-ID must be a non-negative integer, got ''"),
    ],
)
def test_bad_last_event_id_is_400_gw_sse_1(header: str | None, query: str | None, message: str) -> None:
    with pytest.raises(HttpError) as info:
        parse_last_event_id(header, query)
    assert (info.value.status, info.value.message) == (400, message)


def test_sse_body_writes_retry_on_the_catch_up_ids_on_the_rest_and_keepalive_comments_gw_sse_2_4() -> None:
    async def events() -> Any:
        yield FollowEvent("status", None, {"status": "running"})
        yield FollowEvent("fly", 3, {"payload": 1, "actor": "a", "envelope_id": TASK})
        yield KEEPALIVE
        yield FollowEvent("status", 4, {"status": "succeeded"})

    async def collect() -> list[str]:
        return [chunk async for chunk in sse_body(events())]

    assert anyio.run(collect) == [
        'retry: 1000\nevent: status\ndata: {"status":"running"}\n\n',
        f'id: 3\nevent: fly\ndata: {{"payload":1,"actor":"a","envelope_id":"{TASK}"}}\n\n',
        ":keepalive\n\n",
        'id: 4\nevent: status\ndata: {"status":"succeeded"}\n\n',
    ]


class FakeTask:
    """A task item and its fly items: ``on_poll(poll, task)`` runs before each read, as the mesh's writes would."""

    def __init__(
        self,
        status: str,
        last_seq: int,
        *,
        step: str | None = None,
        fly: dict[int, Any] | None = None,
        deadline_at: str | None = None,
        on_poll: Callable[[int, FakeTask], None] | None = None,
    ) -> None:
        self.status = status
        self.last_seq = last_seq
        self.step = step
        self.fly: dict[int, Any] = dict(fly or {})
        self.deadline_at = deadline_at
        self.gone = False
        self.status_seq = last_seq
        self.fly_range = (0, 0)
        self.on_poll = on_poll
        self.polls = 0
        self.time_outs: list[str] = []

    def change(self, status: str, *, step: str | None = None, numbers: int = 1) -> None:
        """``numbers`` status changes, of which only the last state is visible (the single task item); the item
        names the number of the latest (``status_seq``)."""
        self.status, self.step = status, step
        self.last_seq += numbers
        self.status_seq = self.last_seq

    def reserve(self, count: int) -> tuple[int, int]:
        """A FLY flush takes ``count`` numbers (named on the item as the newest flush) before its item is written."""
        self.fly_range = (self.last_seq + 1, self.last_seq + count)
        self.last_seq += count
        return self.fly_range

    def add_fly(self, *payloads: Any) -> None:
        first, _ = self.reserve(len(payloads))
        for offset, payload in enumerate(payloads):
            self.fly[first + offset] = payload

    @property
    def data(self) -> dict[str, Any]:
        return {"id": TASK, "status": self.status, "step": self.step}

    async def snapshot(self, after: int) -> Snapshot | None:
        self.polls += 1
        if self.on_poll is not None:
            self.on_poll(self.polls, self)
        if self.gone:
            return None
        fly = [
            {"seq": n, "event": "fly", "data": {"payload": p, "actor": "a", "envelope_id": TASK}}
            for n, p in sorted(self.fly.items())
            if n > after
        ]
        return Snapshot(
            status=self.status,
            last_seq=self.last_seq,
            data=self.data,
            fly=fly,
            deadline_at=self.deadline_at,
            status_seq=self.status_seq,
            fly_range=self.fly_range,
        )

    async def time_out(self, deadline_at: str) -> None:
        """What ``TaskStore.time_out_overdue`` leaves: the failed status, one number more."""
        self.time_outs.append(deadline_at)
        self.change("failed", step="timeout")


class StepClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += STEP
        return self.now


Seen = tuple[str, int | None, str | None]


def run(
    task: FakeTask,
    *,
    position: int,
    settings: SseSettings = SETTINGS,
    clock: ManualClock | None = None,
    polls: list[int] | None = None,
    stopping: Callable[[], bool] | None = None,
) -> list[Seen]:
    """``(name, id, status or fly payload)`` of every event; ``polls`` gets the poll count at each event."""
    catchup = task.data

    async def collect() -> list[Seen]:
        seen: list[Seen] = []
        async for event in follow(
            task,
            catchup=catchup,
            last_seq=task.last_seq,
            position=position,
            settings=settings,
            deadline_at=task.deadline_at,
            clock=clock,
            monotonic=StepClock(),
            stopping=stopping,
        ):
            value = event.data.get("payload") if event.name == "fly" else event.data.get("status")
            seen.append((event.name, event.seq, value))
            if polls is not None:
                polls.append(task.polls)
        return seen

    return anyio.run(collect)


Action = Callable[[FakeTask], object]


def change(status: str, *, step: str | None = None, numbers: int = 1) -> Action:
    return lambda task: task.change(status, step=step, numbers=numbers)


def reserve(count: int) -> Action:
    return lambda task: task.reserve(count)


def write_fly(seq: int, payload: Any) -> Action:
    """The item of a reserved number lands."""
    return lambda task: task.fly.__setitem__(seq, payload)


def add_fly(*payloads: Any) -> Action:
    return lambda task: task.add_fly(*payloads)


def _ids(seen: list[Seen]) -> list[int]:
    return [seq for _, seq, _ in seen if seq is not None]


@pytest.mark.parametrize(
    ("position", "script", "expected"),
    [
        # Two changes (numbers 3 and 4) seen in one read give one status event with the later state and id 4: no
        # number of a FLY flush is pending, so none is held back and nothing waits; the terminal status closes the
        # stream with id = last_seq.
        pytest.param(
            2,
            {2: [change("running", step="c", numbers=2)], 8: [change("succeeded", step="c")]},
            [("status", None, "running"), ("status", 4, "running"), ("status", 5, "succeeded")],
            id="status_changes_between_reads_coalesce_and_the_terminal_comes_last_with_id_l_gw_sse_3_4_7",
        ),
        # A flush took number 3 (its item not yet written) and a claim took 4: the status event goes out at once with
        # id 2, below the held number, and the fly event follows when its item arrives. (The client is at 1: number
        # 2 is a status change it has not been sent, so id 2 is new to it, GW-SSE-28 (R3).)
        pytest.param(
            1,
            {
                2: [reserve(1), change("running", step="c")],
                3: [write_fly(3, "late")],
                4: [change("succeeded", step="c")],
            },
            [("status", None, "running"), ("status", 2, "running"), ("fly", 3, "late"), ("status", 5, "succeeded")],
            id="a_status_change_seen_while_a_flush_is_pending_takes_the_id_below_it_gw_sse_6",
        ),
        # A claim (3) and the flush of its values (4, 5) seen in one read: the status event is the change before the
        # values, id 3; sent after them with id ``last_seq`` it repeated the id of fly 5 (the artifact suite's first
        # stream got id 15 twice this way on a loaded machine).
        pytest.param(
            0,
            {2: [change("running", step="b"), add_fly("x", "y")], 4: [change("succeeded", step="b")]},
            [
                ("status", None, "running"),
                ("status", 3, "running"),
                ("fly", 4, "x"),
                ("fly", 5, "y"),
                ("status", 6, "succeeded"),
            ],
            id="a_status_change_read_with_the_values_after_it_goes_before_them_ids_never_repeat_gw_sse_28",
        ),
        # A flush took 3 and 4, only 3's item is written, then a claim took 5: the id below the held number is 3,
        # which fly 3 carries; the status event waits for number 4 and then goes out with id 5.
        pytest.param(
            0,
            {
                2: [reserve(2), write_fly(3, "x"), change("running", step="b")],
                3: [write_fly(4, "y")],
                4: [change("succeeded", step="b")],
            },
            [
                ("status", None, "running"),
                ("fly", 3, "x"),
                ("fly", 4, "y"),
                ("status", 5, "running"),
                ("status", 6, "succeeded"),
            ],
            id="a_status_change_behind_a_held_number_waits_rather_than_repeat_the_id_below_it_gw_sse_6_28",
        ),
        # The client is at 2; a flush takes 3 (item not yet written) and a claim 4: the id below the held number is
        # the client's own position, so the status event waits for fly 3 and goes out with id 4.
        pytest.param(
            2,
            {
                2: [reserve(1), change("running", step="c")],
                3: [write_fly(3, "late")],
                4: [change("succeeded", step="c")],
            },
            [("status", None, "running"), ("fly", 3, "late"), ("status", 4, "running"), ("status", 5, "succeeded")],
            id="a_resumed_stream_never_sends_the_clients_own_last_event_id_again_gw_sse_28",
        ),
    ],
)
def test_status_ids_around_held_fly_numbers_gw_sse_3_4_6_7_28(
    position: int, script: dict[int, list[Action]], expected: list[Seen]
) -> None:
    """A task at number 2 (running, step a) that the mesh changes at the scripted polls: the events and their ids.
    Whatever the script, ids never repeat (GW-SSE-28 (R3)) and the terminal event leaves in the poll that read it
    (nothing holds it back once every held number's item arrived)."""

    def mesh(poll: int, task: FakeTask) -> None:
        for action in script.get(poll, []):
            action(task)

    task = FakeTask("running", 2, step="a", on_poll=mesh)
    polls: list[int] = []
    seen = run(task, position=position, polls=polls)
    assert seen == expected
    assert _ids(seen) == sorted(set(_ids(seen)))
    assert polls[-1] == max(script)


def test_without_a_hold_back_a_coalesced_status_carries_last_seq_and_ids_skip_gw_sse_3() -> None:
    def mesh(poll: int, task: FakeTask) -> None:
        if poll == 2:
            task.change("running", step="c", numbers=2)
        elif poll == 3:
            task.change("failed", step="c", numbers=3)

    task = FakeTask("running", 2, step="a", on_poll=mesh)
    settings = SseSettings(poll_fast=0, poll_slow=0, fast_window=5, keepalive=1000, max_seconds=1000, gap_wait=0)
    assert run(task, position=2, settings=settings) == [
        ("status", None, "running"),
        ("status", 4, "running"),
        ("status", 7, "failed"),
    ]


def test_replay_sends_every_fly_value_after_p_and_live_values_never_coalesce_gw_sse_5_11() -> None:
    """Fly 2 and 3 are at or below L = 4 and above P = 1: replayed; numbers 1 and 4 have no item (status changes the
    catch-up reflects). Two values flushed between two reads are two events, each with its number."""

    def mesh(poll: int, task: FakeTask) -> None:
        if poll == 6:
            task.add_fly("x", "y")
            task.change("succeeded")

    task = FakeTask("running", 4, fly={2: "a", 3: "b"}, on_poll=mesh)
    assert run(task, position=1) == [
        ("status", None, "running"),
        ("fly", 2, "a"),
        ("fly", 3, "b"),
        ("fly", 5, "x"),
        ("fly", 6, "y"),
        ("status", 7, "succeeded"),
    ]


def test_a_late_fly_item_is_awaited_and_no_event_passes_a_held_back_number_gw_sse_6() -> None:
    """Number 2 is reserved (P-STAT-16) but its item is written only at the second read: fly 3 waits behind it."""

    def mesh(poll: int, task: FakeTask) -> None:
        if poll == 1:
            task.reserve(2)  # numbers 2 and 3; the item of 3 lands first
            task.fly[3] = "second"
        elif poll == 2:
            task.fly[2] = "first"
        elif poll == 3:
            task.change("succeeded")

    task = FakeTask("running", 1, on_poll=mesh)
    polls: list[int] = []
    assert run(task, position=1, polls=polls) == [
        ("status", None, "running"),
        ("fly", 2, "first"),
        ("fly", 3, "second"),
        ("status", 4, "succeeded"),
    ]
    assert polls[1:3] == [2, 2]


def test_a_number_without_an_item_becomes_a_status_change_after_one_second_gw_sse_6() -> None:
    """A flush took numbers 3 and 4 but only 4's item was ever written (its writer died): the state change (2) is sent
    at once, fly 4 only once number 3 is 1 s old for this stream, and then 3 counts as a status change."""

    def mesh(poll: int, task: FakeTask) -> None:
        if poll == 1:
            task.change("running", step="b")
            task.reserve(2)
            task.fly[4] = "value"
        elif poll == 12:
            task.change("succeeded", step="b")

    task = FakeTask("running", 1, step="a", on_poll=mesh)
    polls: list[int] = []
    assert run(task, position=1, polls=polls) == [
        ("status", None, "running"),
        ("status", 2, "running"),
        ("fly", 4, "value"),
        ("status", 5, "succeeded"),
    ]
    assert polls[1] == 1
    assert polls[2] == 1 + int(SETTINGS.gap_wait / STEP)


def test_a_terminal_catch_up_replays_then_sends_the_terminal_event_with_id_l_gw_sse_4_6() -> None:
    task = FakeTask("succeeded", 4, fly={2: "a", 3: "b"}, deadline_at="2000-01-01T00:00:00Z")
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    assert run(task, position=0, clock=clock) == [
        ("status", None, "succeeded"),
        ("fly", 2, "a"),
        ("fly", 3, "b"),
        ("status", 4, "succeeded"),
    ]
    assert task.time_outs == []  # a terminal task is never timed out by a reader


def test_a_terminal_catch_up_at_a_later_position_sends_only_the_terminal_event_gw_sse_5_7() -> None:
    task = FakeTask("canceled", 4, fly={2: "a", 3: "b"})
    assert run(task, position=3) == [("status", None, "canceled"), ("status", 4, "canceled")]


def test_a_position_past_the_record_still_streams_every_later_event_gw_sse_6() -> None:
    """A Last-Event-ID ahead of the record (L = 2, P = 1000) replays nothing, then streams every number above L."""

    def mesh(poll: int, task: FakeTask) -> None:
        if poll == 2:
            task.add_fly("late")
            task.change("succeeded")

    task = FakeTask("running", 2, on_poll=mesh)
    assert run(task, position=1000) == [("status", None, "running"), ("fly", 3, "late"), ("status", 4, "succeeded")]


def test_paused_is_not_terminal_gw_sse_7() -> None:
    def mesh(poll: int, task: FakeTask) -> None:
        if poll == 2:
            task.change("running", step="b")
        elif poll == 9:
            task.change("succeeded", step="b")

    task = FakeTask("paused", 2, step="a", on_poll=mesh)
    assert run(task, position=2) == [
        ("status", None, "paused"),
        ("status", 3, "running"),
        ("status", 4, "succeeded"),
    ]


def test_keepalive_and_duration_limit_gw_sse_9() -> None:
    settings = SseSettings(poll_fast=0, poll_slow=0, fast_window=0, keepalive=1, max_seconds=5, gap_wait=1)
    task = FakeTask("pending", 1)
    seen = run(task, position=1, settings=settings)
    assert seen[0] == ("status", None, "pending")
    assert {name for name, _, _ in seen[1:]} == {"keepalive"}
    assert 3 <= len(seen) - 1 <= 5  # one per second of silence, within the 5 s limit
    assert task.polls == int(settings.max_seconds / STEP)  # the stream ended at max_seconds, not earlier or later


def test_a_draining_gateway_ends_the_stream_after_the_poll_and_a_resume_loses_nothing_gw_sse_9() -> None:
    """``asya_gateway.app.drain``: the stream ends like at its duration limit, after the events of the poll during
    which the server began to stop; a client resuming from the last id it got sees every later event."""

    def mesh(poll: int, task: FakeTask) -> None:
        if poll == 2:
            task.change("running", step="a")
            task.add_fly("one")
        elif poll == 4:
            task.add_fly("two")
            task.change("succeeded", step="a")

    task = FakeTask("pending", 1, on_poll=mesh)
    first = run(task, position=1, stopping=lambda: task.polls >= 2)
    assert first == [("status", None, "pending"), ("status", 2, "running"), ("fly", 3, "one")]
    assert task.polls == 2
    resumed = run(task, position=3)
    assert resumed == [("status", None, "running"), ("fly", 4, "two"), ("status", 5, "succeeded")]
    assert run(FakeTask("running", 1), position=1, stopping=lambda: True) == [("status", None, "running")]


def test_a_task_that_is_gone_ends_the_stream_gw_sse_9() -> None:
    def mesh(poll: int, task: FakeTask) -> None:
        task.gone = poll == 3

    task = FakeTask("running", 2, on_poll=mesh)
    assert run(task, position=2) == [("status", None, "running")]
    assert task.polls == 3


def test_a_running_task_past_its_deadline_is_timed_out_by_the_reader_gw_back_3() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    deadline = format_ts(clock.now - timedelta(seconds=1))
    task = FakeTask("running", 3, step="a", deadline_at=deadline)
    seen = run(task, position=3, clock=clock)
    assert task.time_outs == [deadline]  # once: the task is failed after it
    assert seen == [("status", None, "running"), ("status", 4, "failed")]


def test_a_task_before_its_deadline_is_not_timed_out_gw_back_3() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    task = FakeTask("running", 3, deadline_at=format_ts(clock.now + timedelta(seconds=1)))
    settings = SseSettings(poll_fast=0, poll_slow=0, fast_window=0, keepalive=1000, max_seconds=2, gap_wait=1)
    assert run(task, position=3, clock=clock, settings=settings) == [("status", None, "running")]
    assert task.time_outs == []
    assert task.polls > 1
