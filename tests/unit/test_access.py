"""The declared calls of ``asya_deploy.access`` (issue 24 item 3): every object key the runtime builds is declared,
keys are built only by the ``asya.tableschema`` builders, and a recorded call maps back to a stable entry name.

Spec: GATEWAY GW-DATA-6, GW-DATA-7, GW-BACK-1; PROTOCOL P-PAUSE-4, P-RESUME-6, P-SUMP-5, P-LARGE-2.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from asya import naming, tableschema
from asya.store import records
from asya_deploy import access
from asya_deploy.access import Index, Listing, Objects, OwnQueue, Queues, Table

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
RUNTIME = (
    REPO / "layers" / "sidecar" / "python" / "asya",
    REPO / "crew" / "asya_crew",
    REPO / "gateway" / "asya_gateway",
)
_S3_KEY_ARGS = frozenset({"Key", "Prefix"})


def _runtime_sources() -> list[Path]:
    return [path for root in RUNTIME for path in sorted(root.rglob("*.py"))]


def test_runtime_builds_no_object_key_from_a_literal() -> None:
    """A ``Key=``/``Prefix=`` argument is never a literal or an f-string: every key comes from a builder, whose
    pattern ``asya_deploy.access`` declares, so a new prefix cannot appear in code without a declaration."""
    found: list[str] = []
    for path in _runtime_sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg in _S3_KEY_ARGS and isinstance(keyword.value, ast.Constant | ast.JoinedStr):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []


def test_bucket_prefixes_are_defined_once_in_tableschema() -> None:
    """Any ``*_PREFIX`` of the runtime that names a bucket prefix is ``asya.tableschema``'s, not a second literal."""
    prefixes = {
        tableschema.PAYLOADS_PREFIX,
        tableschema.FANIN_PREFIX,
        tableschema.TASKS_PREFIX,
        tableschema.PAUSED_PREFIX,
        tableschema.SUCCEEDED_PREFIX,
        tableschema.FAILED_PREFIX,
        tableschema.UNPARSED_PREFIX,
    }
    schema = REPO / "layers" / "sidecar" / "python" / "asya" / "tableschema.py"
    found: list[str] = []
    for path in _runtime_sources():
        if path == schema:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in prefixes:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert found == []


def _keys_written() -> list[tuple[str, str]]:
    """(role, key) of every object each role's code writes, built with the runtime's own builders."""
    day = "2026-01-02"
    return [
        ("actor", f"{tableschema.PAYLOADS_PREFIX}t1/0001-a-b.json"),
        ("aggregator", tableschema.fanin_slice_key("t1", 3)),
        (naming.SINK, tableschema.checkpoint_key("succeeded", day, "u")),
        (naming.SINK, tableschema.checkpoint_key("failed", day, "u")),
        (naming.SINK, tableschema.task_value_key("t1", "result")),
        (naming.SINK, tableschema.task_value_key("t1", "error_details")),
        (naming.SUMP, tableschema.checkpoint_key("failed", day, "u")),
        (naming.SUMP, tableschema.unparsed_key(day, "m1")),
        (naming.PAUSE, tableschema.paused_key("t1")),
        (naming.PAUSE, tableschema.task_value_key("t1", "pause_metadata")),
        ("gateway", tableschema.task_value_key("t1", "payload")),
        ("gateway", tableschema.task_value_key("t1", "pause_metadata")),
    ]


@pytest.mark.parametrize(("role", "key"), _keys_written())
def test_every_key_a_role_writes_is_declared(role: str, key: str) -> None:
    assert access.ROLES[role].matching("s3:PutObject", Objects(key)), (role, key)


def test_pause_and_resume_reach_the_paused_file_and_nothing_else_of_the_bucket() -> None:
    """P-PAUSE-4, P-RESUME-3, P-RESUME-6, GW-RESUME-2: the breakers of issue 24, by stable entry name."""
    key = Objects(tableschema.paused_key("task-1"))
    assert [c.name for c in access.PAUSE.matching("s3:PutObject", key)] == ["paused.store"]
    assert not access.PAUSE.matching("s3:GetObject", key)  # x-pause stores conditionally, never reads
    assert [c.name for c in access.RESUME.matching("s3:GetObject", key)] == ["paused.load"]
    assert [c.name for c in access.RESUME.matching("s3:DeleteObject", key)] == ["paused.load"]
    assert [c.name for c in access.RESUME.matching("s3:ListBucket", Listing((key.pattern,)))] == ["paused.list"]
    assert [c.name for c in access.GATEWAY.matching("s3:GetObject", key)] == ["paused.check"]
    assert [c.name for c in access.GATEWAY.matching("s3:DeleteObject", key)] == ["paused.check"]
    assert not access.ACTOR.matching("s3:GetObject", key)


def test_backstop_may_send_only_to_the_timer_queue() -> None:
    """GW-BACK-1: the re-arm send; the backstop reaches no actor queue."""
    assert [c.name for c in access.BACKSTOP.matching("sqs:SendMessage", Queues(naming.DEADLINE))] == ["timer.rearm"]
    assert not access.BACKSTOP.matching("sqs:SendMessage", Queues("normalize"))


def test_x_sump_sends_nothing() -> None:
    """P-SUMP-1: x-sump never sends, so it has no send grant."""
    assert not access.SUMP.matching("sqs:SendMessage", Queues("x-sink"))


def test_recorded_calls_map_back_to_stable_names() -> None:
    """The shape a call recorder uses: (action, concrete resource) -> the declared entry's name, or nothing."""
    assert [c.name for c in access.ACTOR.matching("sqs:ReceiveMessage", OwnQueue())] == ["queue.consume"]
    assert [c.name for c in access.ACTOR.matching("dynamodb:BatchGetItem", Table())] == ["task.preflight"]
    assert [c.name for c in access.GATEWAY.matching("dynamodb:Query", Index(("by_created",)))] == ["task.list"]
    assert not access.GATEWAY.matching("dynamodb:Query", Index(("long_deadlines",)))
    assert not access.ACTOR.matching("dynamodb:Scan", Table())
    assert not access.SINK.matching("s3:PutObject", Objects(tableschema.task_value_key("t", "payload")))


def test_every_body_field_has_a_declared_writer() -> None:
    """GW-DATA-6: each large task value (``tasks/{id}/{field}.json``) is writable by the role that produces it."""
    for field in records.BODY_FIELDS:
        key = Objects(tableschema.task_value_key("t", field))
        assert any(role.matching("s3:PutObject", key) for role in access.ROLES.values()), field


def test_role_of_maps_crew_and_aggregators() -> None:
    assert access.role_of(naming.SINK) is access.SINK
    assert access.role_of(naming.PAUSE) is access.PAUSE
    assert access.role_of("x-fanin-chunk") is access.AGGREGATOR
    assert access.role_of("normalize") is access.ACTOR


def test_call_names_are_unique_within_a_role() -> None:
    with pytest.raises(ValueError, match="unique"):
        access.Role("r", (access.ACTOR.calls[1], access.ACTOR.calls[1]))


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("paused/*.json", "paused/abc.json", True),
        ("paused/*.json", "paused/abc.txt", False),
        ("tasks/*/result.json", "tasks/t/result.json", True),
        ("tasks/*/result.json", "tasks/t/payload.json", False),
        ("a?c", "abc", True),
        ("a.c", "abc", False),
    ],
)
def test_pattern_matching_is_iam_s(pattern: str, value: str, matches: bool) -> None:
    assert access.pattern_matches(pattern, value) is matches


def test_gw_data_9_the_gateway_reads_history_and_checkpoints_of_both_key_layouts() -> None:
    """Objects written before keys had a shard stay readable: a history chain, or a task view, may name them."""
    for key in (tableschema.history_key("2026-01-02", "u"), "history/2026-01-02/u.jsonl"):
        assert [c.name for c in access.GATEWAY.matching("s3:GetObject", Objects(key))] == ["history.read"], key
    for key in (tableschema.checkpoint_key("succeeded", "2026-01-02", "u"), "succeeded/2026-01-02/u.jsonl"):
        assert [c.name for c in access.GATEWAY.matching("s3:GetObject", Objects(key))] == ["checkpoint.read"], key
    assert not access.GATEWAY.matching("s3:GetObject", Objects(tableschema.checkpoint_key("failed", "2026-01-02", "u")))
