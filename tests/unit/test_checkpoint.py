"""Checkpoint keys (P-CKPT-1, P-CKPT-2)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest

from asya.envelope import parse_envelope
from asya_crew.checkpoint import checkpoint_key, checkpoint_name

pytestmark = pytest.mark.unit

NOW = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)


def _sha(text: str) -> str:
    return "id-" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    ("task_id", "name"),
    [
        ("5b7e0c2a", "5b7e0c2a"),
        ("../../etc/passwd", "passwd"),
        ("a\\b\\c", "c"),
        ("dir/", _sha("dir/")),
        ("x/..", _sha("x/..")),
        (".", _sha(".")),
        ("bad\x07name", _sha("bad\x07name")),
        ("del\x7f", _sha("del\x7f")),
    ],
)
def test_p_ckpt_2_sanitised_name(task_id: str, name: str) -> None:
    assert checkpoint_name(task_id) == name


def _env(status: dict[str, object], headers: dict[str, object] | None = None) -> object:
    return parse_envelope(
        {
            "id": "t1",
            "route": {"prev": [], "curr": "", "next": []},
            "status": status,
            "payload": None,
            "headers": headers or {},
        }
    )


def test_p_ckpt_1_date_of_updated_at_in_utc() -> None:
    env = _env({"phase": "failed", "updated_at": "2026-03-01T23:30:00-02:00"})
    assert checkpoint_key(env, "failed", now=NOW) == "failed/2026-03-02/t1.json"  # type: ignore[arg-type]


def test_p_ckpt_1_2_now_when_updated_at_is_absent_and_origin_id_wins() -> None:
    env = _env({"phase": "succeeded"}, {"x-asya-origin-id": "origin/7"})
    assert checkpoint_key(env, "succeeded", now=NOW) == "succeeded/2026-03-05/7.json"  # type: ignore[arg-type]
