"""Naming rules (PROTOCOL section 2.1)."""

from __future__ import annotations

import pytest

from asya import naming
from asya.exceptions import NamingError

pytestmark = pytest.mark.unit


def test_p_name_4_queue_and_dlq_names() -> None:
    assert naming.queue_name("demo", "analyze") == "asya-demo-analyze"
    assert naming.dlq_name("demo", "analyze") == "asya-demo-analyze-dlq"
    assert naming.table_name("demo") == "asya-demo-tasks"


@pytest.mark.parametrize("name", ["a", "analyze", "a1-b2", "x-sink", "a" * 40])
def test_p_name_1_valid_actor_names(name: str) -> None:
    assert naming.validate_actor_name(name) == name


@pytest.mark.parametrize("name", ["", "1abc", "Analyze", "a_b", "a" * 41, "-a", "a.b", None, 3])
def test_p_name_1_invalid_actor_names_name_the_value(name: object) -> None:
    with pytest.raises(NamingError, match="invalid actor name") as info:
        naming.validate_actor_name(name, field="actors.x")
    assert repr(name) in str(info.value)
    assert "actors.x" in str(info.value)


def test_p_name_2_crew_names_are_reserved() -> None:
    assert naming.is_crew("x-sink")
    assert naming.is_crew("x-fanin-split")
    assert not naming.is_crew("sink")
    assert naming.is_aggregator("x-fanin-split") and naming.is_aggregator("x-merge")
    assert not naming.is_aggregator("x-sink") and not naming.is_aggregator("x-pause")
    assert not naming.is_aggregator("split")


def test_p_name_5_dlq_name_over_80_characters_is_rejected_with_its_length() -> None:
    actor = "a" * 40
    namespace = "n" * 30  # asya- + 30 + - + 40 + -dlq = 80: fits
    assert len(naming.dlq_name(namespace, actor)) == 80
    with pytest.raises(NamingError, match=r"is 81 characters, over the SQS limit of 80") as info:
        naming.queue_name(namespace + "n", actor)
    assert f"actors.{actor}" in str(info.value)


@pytest.mark.parametrize(
    ("ns", "ok"), [("demo", True), ("my-team2", True), ("Demo", False), ("1x", False), ("", False)]
)
def test_p_name_3_namespace(ns: str, ok: bool) -> None:
    if ok:
        assert naming.validate_namespace(ns) == ns
    else:
        with pytest.raises(NamingError, match="invalid namespace"):
            naming.validate_namespace(ns)


@pytest.mark.parametrize(("flow", "ok"), [("text-pipeline", True), ("a_b", True), ("A", False), ("a" * 65, False)])
def test_p_name_6_flow_names(flow: str, ok: bool) -> None:
    if ok:
        assert naming.validate_flow_name(flow) == flow
    else:
        with pytest.raises(NamingError, match="invalid flow name"):
            naming.validate_flow_name(flow)
