"""The per-task follower as a state machine (``asya_gateway.follow.TaskFollower``), stepped by reads the way the
multiplexed stream steps it (GW-SSE (R3), docs/http.md GW-SSE-25): an eventually consistent read from an older
replica is skipped, never shown; and the keys a multiplexed poll reads for FLY values (``Watched.wanted``)."""

from __future__ import annotations

from typing import Any

import pytest

from asya.store import Snapshot
from asya_gateway.follow import TaskFollower
from asya_gateway.multifollow import Watched

pytestmark = pytest.mark.unit


def _snap(last_seq: int, status: str = "running", step: str = "s", **kwargs: Any) -> Snapshot:
    data = {"status": status, "step": step}
    return Snapshot(status=status, last_seq=last_seq, data=data, fly=[], deadline_at=None, **kwargs)


def _follower(last_seq: int = 1, position: int = 0) -> TaskFollower:
    return TaskFollower(
        catchup={"status": "pending", "step": None}, last_seq=last_seq, position=position, gap_wait=1.0, now=0.0
    )


def test_an_older_read_is_skipped_gw_sse_25() -> None:
    task = _follower()
    events = task.step(_snap(3, step="b", status_seq=3), now=1.0)
    assert [(e.name, e.seq, e.data["step"]) for e in events] == [("status", 3, "b")]
    # an older replica still shows the state of number 2: nothing is sent, the cursor stays
    assert task.step(_snap(2, step="a", status_seq=2), now=2.0) == []
    assert task.cursor == 3
    # the same number again says nothing new; a newer one goes on
    assert task.step(_snap(3, step="b", status_seq=3), now=3.0) == []
    assert [e.seq for e in task.step(_snap(4, step="c", status_seq=4), now=4.0)] == [4]


def test_terminal_read_ends_the_follower() -> None:
    task = _follower()
    events = task.step(_snap(2, status="succeeded", status_seq=2), now=1.0)
    assert [(e.name, e.seq) for e in events] == [("status", 2)]
    assert task.done


def test_wanted_keys_newest_flush_at_its_last_number_others_one_by_one_gw_sse_25() -> None:
    watched = Watched("t", _follower(position=1))
    # cursor 1; numbers 2..9: 4 is the latest status change, 7..9 the newest flush; 2, 3, 5, 6 are unexplained
    snap = _snap(9, status_seq=4, fly_range=(7, 9))
    assert watched.wanted(snap) == [2, 3, 5, 6, 9]
    # once the newest flush's last chunk (8..9) is read, the next read is just below it
    watched.fly = {8: {"seq": 8}, 9: {"seq": 9}}
    assert watched.wanted(snap) == [2, 3, 5, 6, 7]
