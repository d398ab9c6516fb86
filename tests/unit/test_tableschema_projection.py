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


def test_gw_data_8_every_task_index_projects_keys_only() -> None:
    """R2: indexes project keys only, so a status or progress update that changes no index key writes no index;
    ``active_deadlines`` and ``by_status`` are gone (GW-DATA-2, GW-BACK-1)."""
    assert all(gsi.projection == () for gsi in tableschema.GSIS)
    kwargs = tableschema.boto3_create_table_kwargs("t")
    assert {g["IndexName"]: g["Projection"] for g in kwargs["GlobalSecondaryIndexes"]} == {
        "by_created": {"ProjectionType": "KEYS_ONLY"},
        "by_outcome": {"ProjectionType": "KEYS_ONLY"},
        "long_deadlines": {"ProjectionType": "KEYS_ONLY"},
    }


def test_gw_data_2_index_keys_are_the_attributes_the_store_writes() -> None:
    """``by_outcome`` is sparse on ``gsi2pk`` (written by a failed or canceled terminal write) and sorts on the
    creation key ``gsi1sk`` every task carries from its creation: an index whose sort key no item had would stay
    empty, and the failed/canceled list filter with it."""
    keys = {gsi.name: (gsi.partition_key, gsi.sort_key) for gsi in tableschema.GSIS}
    assert keys == {
        "by_created": ("gsi1pk", "gsi1sk"),
        "by_outcome": ("gsi2pk", "gsi1sk"),
        "long_deadlines": ("gsi3pk", "gsi3sk"),
    }
    kwargs = tableschema.boto3_create_table_kwargs("t")
    defined = {a["AttributeName"] for a in kwargs["AttributeDefinitions"]}
    assert defined == {"pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi3pk", "gsi3sk"}
