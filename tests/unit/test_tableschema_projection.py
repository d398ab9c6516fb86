"""Index projections of the task table (GW-DATA-2, GW-DATA-8): the one description CDK and the local mode share."""

from __future__ import annotations

import pytest

from asya import tableschema
from asya.tableschema import Gsi

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("projection", "expected"),
    [
        (None, {"ProjectionType": "ALL"}),
        ((), {"ProjectionType": "KEYS_ONLY"}),
        (("flow", "ttl"), {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["flow", "ttl"]}),
    ],
)
def test_gw_data_2_projection_forms(projection: tuple[str, ...] | None, expected: dict[str, object]) -> None:
    assert Gsi("i", "a", "b", projection).boto3_projection() == expected


def test_gw_data_8_no_task_index_projects_every_attribute() -> None:
    """Every projected attribute a status update changes would write the index again: none projects ``ALL``, and
    the list indexes carry only what the list query filters on (GW-LIST-1, GW-DATA-5). ``by_created`` leaves out
    ``ttl``, which the terminal write sets without changing that index's key."""
    assert all(gsi.projection is not None for gsi in tableschema.GSIS)
    by_name = {gsi.name: gsi for gsi in tableschema.GSIS}
    assert by_name["by_created"].projection == ("flow",)
    assert by_name["by_status"].projection == ("flow", "ttl")
    kwargs = tableschema.boto3_create_table_kwargs("t")
    assert {g["IndexName"]: g["Projection"]["ProjectionType"] for g in kwargs["GlobalSecondaryIndexes"]} == {
        "by_created": "INCLUDE",
        "by_status": "INCLUDE",
        "active_deadlines": "INCLUDE",
    }
