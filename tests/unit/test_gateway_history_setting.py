"""``ASYA_HISTORY_ALL_TASKS`` (P-HIST-10): the body cut of the run history a gateway records for every task."""

from __future__ import annotations

import pytest

from asya_gateway.config import GatewayConfig, GatewayConfigError

pytestmark = pytest.mark.unit


def test_unset_records_only_the_flows_that_ask() -> None:
    assert GatewayConfig.from_env({}).history_all_tasks is None
    assert GatewayConfig.from_env({"ASYA_HISTORY_ALL_TASKS": " "}).history_all_tasks is None


def test_a_byte_count_in_bounds_is_the_cut() -> None:
    assert GatewayConfig.from_env({"ASYA_HISTORY_ALL_TASKS": "4096"}).history_all_tasks == 4096


@pytest.mark.parametrize("raw", ["lots", "63", "262145", "-1"])
def test_a_bad_value_is_refused_naming_the_variable_and_the_value(raw: str) -> None:
    with pytest.raises(GatewayConfigError) as caught:
        GatewayConfig.from_env({"ASYA_HISTORY_ALL_TASKS": raw})
    assert "ASYA_HISTORY_ALL_TASKS" in str(caught.value) and repr(raw) in str(caught.value)
