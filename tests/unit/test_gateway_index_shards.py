"""The gateway's created-index shard count from its environment (``ASYA_INDEX_SHARDS``, set from ``capacity``)."""

from __future__ import annotations

import pytest

from asya.envnames import ENV
from asya_gateway.config import GatewayConfig, GatewayConfigError

pytestmark = pytest.mark.unit


def test_unset_is_the_eight_shards_every_deployment_has() -> None:
    assert GatewayConfig.from_env({}).index_shards == 8


def test_a_derived_count_is_read() -> None:
    assert GatewayConfig.from_env({ENV.index_shards: "32"}).index_shards == 32


@pytest.mark.parametrize("raw", ["4", "x", "2048", "-8"])
def test_a_count_outside_8_to_1024_names_the_variable_and_value(raw: str) -> None:
    with pytest.raises(
        GatewayConfigError, match=f"ASYA_INDEX_SHARDS must be a whole number from 8 to 1024, got '{raw}'"
    ):
        GatewayConfig.from_env({ENV.index_shards: raw})
