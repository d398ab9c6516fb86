"""The hop count and its ceiling (PROTOCOL P-HOP-1 (R3), ``asya.hops``) and the concurrency settings of the manifest
(issue 26 item 6), as pure functions."""

from __future__ import annotations

from typing import Any

import pytest

from asya import routing
from asya.config import ActorConfig, ConfigError
from asya.hops import DEFAULT_MAX_HOPS, ceiling_message, hop_count, over_ceiling
from asya.manifest import Manifest

ENV = {"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "a"}


@pytest.mark.parametrize(("value", "count"), [(None, 0), (3, 3), (0, 0), (-1, 0), ("7", 0), (True, 0), (2.0, 0)])
def test_p_hop_1_a_count_that_is_not_a_non_negative_integer_counts_as_zero(value: Any, count: int) -> None:
    headers = {} if value is None else {"x-asya-hops": value}
    assert hop_count(headers) == count


def test_p_hop_1_every_send_of_a_hop_carries_the_input_count_plus_one() -> None:
    trace = routing.Trace.for_hop({"x-asya-hops": 9}, enabled=False)
    assert trace.headers({"x-asya-hops": 0, "k": "v"}) == {"x-asya-hops": 10, "k": "v"}
    assert routing.Trace.for_hop({}, enabled=True).headers({})["x-asya-hops"] == 1


def test_p_hop_1_the_ceiling() -> None:
    assert DEFAULT_MAX_HOPS == 1000
    assert not over_ceiling({"x-asya-hops": 999}, 1000)
    assert over_ceiling({"x-asya-hops": 1000}, 1000)
    assert ceiling_message(1000) == "hop ceiling 1000 reached"


def test_p_hop_1_asya_max_hops_is_read_once_into_the_config() -> None:
    assert ActorConfig.from_env(ENV).max_hops == 1000
    assert ActorConfig.from_env({**ENV, "ASYA_MAX_HOPS": "25"}).max_hops == 25
    for bad in ("2.5", "none", "0"):
        with pytest.raises(ConfigError, match="ASYA_MAX_HOPS"):
            ActorConfig.from_env({**ENV, "ASYA_MAX_HOPS": bad})


def _manifest(**extra: Any) -> dict[str, Any]:
    actor = {"handler": "m.f", **extra.pop("actor", {})}
    return {"namespace": "x", "actors": {"a": actor}, "flows": {"f": {"route": ["a"]}}, **extra}


def test_manifest_max_hops_default_and_bounds() -> None:
    assert Manifest.model_validate(_manifest()).max_hops == 1000
    assert Manifest.model_validate(_manifest(max_hops=20)).max_hops == 20
    with pytest.raises(ValueError, match="max_hops"):
        Manifest.model_validate(_manifest(max_hops=0))


def test_max_concurrency_over_the_reservation_is_refused() -> None:
    with pytest.raises(ValueError, match="max_concurrency: 5 is over reserved_concurrency 3"):
        Manifest.model_validate(_manifest(actor={"max_concurrency": 5, "reserved_concurrency": 3}))
    manifest = Manifest.model_validate(_manifest(actor={"max_concurrency": 3, "reserved_concurrency": 3}))
    (actor, *_) = manifest.deployed_actors()
    assert (actor.max_concurrency, actor.reserved_concurrency) == (3, 3)
    with pytest.raises(ValueError, match="reserved_concurrency"):
        Manifest.model_validate(_manifest(actor={"reserved_concurrency": 0}))
