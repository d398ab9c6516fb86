"""The status-transition table (P-STAT-1, P-STAT-2, P-STAT-6, P-STAT-9, GW-BACK-2) as pure rules."""

from __future__ import annotations

import pytest

from asya.store import StatusUpdate, StatusUpdateError
from asya.store.transition import Decision, StoredState, Verdict, decide

pytestmark = pytest.mark.unit

ACCEPT, STALE, ATTACH = Verdict.ACCEPT, Verdict.STALE, Verdict.ATTACH_CHECKPOINT


def _running(step: str = "processing", actor: str = "a", progress: float | None = 50.0) -> StatusUpdate:
    return StatusUpdate(status="running", step=step, actor=actor, progress=progress)


def _stored(status: str, **kwargs: object) -> StoredState:
    return StoredState(status=status, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stored", "update", "verdict"),
    [
        # P-STAT-1: a higher order is accepted
        ("pending", "running", ACCEPT),
        ("pending", "paused", ACCEPT),
        ("pending", "succeeded", ACCEPT),
        ("running", "paused", ACCEPT),
        ("running", "failed", ACCEPT),
        ("paused", "canceled", ACCEPT),
        # ... a lower or equal order is stale
        ("running", "pending", STALE),
        ("paused", "running", STALE),
        ("paused", "paused", STALE),
        ("pending", "pending", STALE),
        # P-STAT-2: the first terminal write wins
        ("succeeded", "failed", STALE),
        ("failed", "succeeded", STALE),
        ("canceled", "failed", STALE),
        ("succeeded", "running", STALE),
        ("failed", "paused", STALE),
    ],
)
def test_p_stat_1_order_table(stored: str, update: str, verdict: Verdict) -> None:
    kwargs: dict[str, object] = {}
    if update == "running":
        kwargs = {"step": "processing", "actor": "a", "progress": 50.0}
    if update == "paused":
        kwargs = {"pause_metadata": {"prompt": "p", "fields": []}}
    assert decide(_stored(stored), StatusUpdate(status=update, **kwargs)).verdict is verdict  # type: ignore[arg-type]


def test_p_stat_6_running_on_running_is_a_progress_update() -> None:
    stored = _stored("running", current_actor="a", step="received", progress=3.3)
    assert decide(stored, _running("processing", "a", 16.7)) == Decision(ACCEPT, 16.7)


def test_p_stat_6_a_progress_only_change_is_a_progress_update() -> None:
    # same actor and step, higher progress (a producer's running event, GW-EVT-1): accepted, not stale
    stored = _stored("running", current_actor="a", step="processing", progress=50.0)
    assert decide(stored, _running("processing", "a", 60.0)) == Decision(ACCEPT, 60.0)


def test_p_stat_6_identical_running_event_is_stale() -> None:
    stored = _stored("running", current_actor="a", step="processing", progress=50.0)
    assert decide(stored, _running("processing", "a", 50.0)).verdict is STALE


def test_p_stat_9_late_lower_progress_is_accepted_but_keeps_progress() -> None:
    # a late `received` of the same actor after its `completed`: the step changes, progress stays at the maximum
    stored = _stored("running", current_actor="a", step="completed", progress=33.3)
    assert decide(stored, _running("received", "a", 3.3)) == Decision(ACCEPT, None)


def test_p_stat_9_lower_progress_with_nothing_else_changed_is_stale() -> None:
    stored = _stored("running", current_actor="a", step="received", progress=70.0)
    assert decide(stored, _running("received", "a", 36.7)).verdict is STALE


def test_retrying_keeps_progress() -> None:
    stored = _stored("running", current_actor="a", step="processing", progress=50.0)
    assert decide(stored, _running("retrying", "a", None)) == Decision(ACCEPT, None)


def test_p_stat_9_succeeded_sets_100_failed_keeps_progress() -> None:
    stored = _stored("running", progress=50.0)
    assert decide(stored, StatusUpdate(status="succeeded")) == Decision(ACCEPT, 100.0)
    assert decide(stored, StatusUpdate(status="failed", error="x")) == Decision(ACCEPT, None)


def test_p_stat_1_resume_is_the_only_paused_to_running() -> None:
    resume = StatusUpdate(status="running", resume=True, deadline_at="2026-03-01T10:05:00Z")
    assert decide(_stored("paused"), resume).verdict is ACCEPT
    assert decide(_stored("running"), resume).verdict is STALE
    assert decide(_stored("canceled"), resume).verdict is STALE


def test_p_stat_2_checkpoint_attaches_to_terminal_task_without_one() -> None:
    update = StatusUpdate(status="succeeded", checkpoint_key="succeeded/2026-03-01/t.json")
    assert decide(_stored("failed"), update).verdict is ATTACH
    assert decide(_stored("failed", checkpoint_key="failed/2026-03-01/t.json"), update).verdict is STALE
    assert decide(_stored("failed"), StatusUpdate(status="succeeded")).verdict is STALE


def test_gw_back_2_backstop_needs_active_status_and_same_deadline() -> None:
    update = StatusUpdate(status="failed", error="task timed out", if_deadline_at="2026-03-01T10:05:00Z")
    assert decide(_stored("running", deadline_at="2026-03-01T10:05:00Z"), update).verdict is ACCEPT
    assert decide(_stored("pending", deadline_at="2026-03-01T10:05:00Z"), update).verdict is ACCEPT
    assert decide(_stored("running", deadline_at="2026-03-01T11:00:00Z"), update).verdict is STALE
    assert decide(_stored("paused"), update).verdict is STALE


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"status": "done"}, "status"),
        ({"status": "failed", "step": "received"}, "step"),
        ({"status": "running", "step": "finished"}, "step"),
        ({"status": "running", "progress": 101.0}, "progress"),
        ({"status": "paused"}, "pause_metadata"),
        ({"status": "failed", "result": 1}, "result"),
        ({"status": "succeeded", "resume": True}, "resume"),
    ],
)
def test_malformed_updates_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(StatusUpdateError, match=f"^{field}:"):
        StatusUpdate(**kwargs)  # type: ignore[arg-type]
