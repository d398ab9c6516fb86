"""Pure rules of the HTTP reporter (PROTOCOL P-STAT-18): the SSRF guard and origins (``asya.gatewayurl``), the circuit
breaker, which requests carry the API key, the ``ASYA_REPORTER``/``ASYA_GATEWAY_*`` configuration, and that the HTTP
reporter overrides every reporting method (none may fall through to a store write)."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import pytest

from asya.config import ActorConfig, ConfigError
from asya.gatewayurl import endpoint, gateway_base, is_gateway_url, origin, same_origin
from asya.httpreport import CircuitBreaker, GatewayClient, HttpReporter
from asya.reporting import Reporter

BASE = {"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "normalize"}


@pytest.mark.parametrize(
    "value",
    ["http://gw.example", "HTTPS://GW.example:8443/prod/", "http://127.0.0.1:8080", "http://[::1]:80/x"],
)
def test_p_stat_18_gateway_urls_pass_the_guard(value: str) -> None:
    assert is_gateway_url(value)
    assert gateway_base(value, "http://configured") == value


@pytest.mark.parametrize(
    "value",
    [
        "file:///etc/passwd",
        "http:///no-host",
        "https://",
        "ftp://example.com/",
        "gopher://h/",
        "//example.com/x",
        "/api/v1",
        "example.com",
        "http://h:99999/",
        "http://h:port/",
        "http://bad host/",
        "http://h/\n",
        "https://u@h",  # user info: credentials in a URL an envelope names are refused too
        "",
        7,
        None,
        ["http://h"],
    ],
)
def test_p_stat_18_other_values_are_refused_by_the_ssrf_guard(value: Any) -> None:
    assert not is_gateway_url(value)
    assert gateway_base(value, "http://configured") == "http://configured"
    assert gateway_base(value, "") is None


def test_p_stat_18_origins_compare_scheme_host_and_default_port() -> None:
    assert origin("HTTP://GW.Example/prod") == ("http", "gw.example", 80)
    assert origin("https://gw.example") == ("https", "gw.example", 443)
    assert same_origin("http://gw.example/a", "http://GW.example:80/b")
    assert not same_origin("http://gw.example", "https://gw.example")
    assert not same_origin("http://gw.example", "http://gw.example:8080")
    assert not same_origin("http://gw.example", "http://gw.example.evil.test")
    assert not same_origin("http://user@evil.test/@gw.example", "http://gw.example")
    assert not same_origin("file:///x", "file:///x")


def test_p_stat_18_endpoint_keeps_the_base_path_and_encodes_the_id() -> None:
    assert endpoint("https://h/prod/", "a/b c", "/events") == "https://h/prod/api/v1/mesh/a%2Fb%20c/events"
    assert endpoint("http://h", "id") == "http://h/api/v1/mesh/id"


def test_p_stat_18_api_key_only_for_the_configured_origin() -> None:
    client = GatewayClient(logger=logging.getLogger("t"), api_key_url="http://gw.example:8080", api_key="k")
    assert client.headers("http://gw.example:8080/other/", "e1") == {"X-Asya-Envelope-ID": "e1", "X-API-Key": "k"}
    assert client.headers("http://elsewhere:8080", "e1") == {"X-Asya-Envelope-ID": "e1"}
    assert client.headers("http://gw.example", "e1") == {"X-Asya-Envelope-ID": "e1"}
    keyless = GatewayClient(logger=logging.getLogger("t"), api_key_url="http://gw.example:8080")
    assert keyless.headers("http://gw.example:8080", "e2") == {"X-Asya-Envelope-ID": "e2"}


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_p_stat_18_breaker_opens_after_three_consecutive_failures_for_60_seconds() -> None:
    clock = _Clock()
    breaker = CircuitBreaker(monotonic=clock)
    assert breaker.failure() is False and breaker.failure() is False
    breaker.success()  # consecutive: a success starts the count again
    assert [breaker.failure() for _ in range(3)] == [False, False, True]
    assert not breaker.allow()
    clock.now += 59.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.allow()  # the trial request
    assert breaker.failure() is True  # the trial failed: open again at once
    assert not breaker.allow()
    clock.now += 60
    breaker.success()
    assert breaker.allow() and breaker.failure() is False


def test_breaker_refuses_a_threshold_below_one() -> None:
    with pytest.raises(ValueError, match="threshold must be >= 1, got 0"):
        CircuitBreaker(threshold=0)


def test_p_stat_18_configuration_defaults_to_the_store() -> None:
    config = ActorConfig.from_env(BASE)
    assert (config.reporter, config.gateway_url, config.gateway_api_key) == ("store", "", "")


def test_p_stat_18_a_gateway_url_turns_the_http_reporter_on_and_the_key_stays_out_of_repr() -> None:
    config = ActorConfig.from_env({**BASE, "ASYA_GATEWAY_URL": "https://gw.example/prod/", "ASYA_GATEWAY_API_KEY": "s"})
    assert (config.reporter, config.gateway_url, config.gateway_api_key) == ("http", "https://gw.example/prod/", "s")
    assert "'s'" not in repr(config)
    header_only = ActorConfig.from_env({**BASE, "ASYA_REPORTER": "HTTP"})
    assert (header_only.reporter, header_only.gateway_url) == ("http", "")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ASYA_REPORTER": "kafka"}, "ASYA_REPORTER must be 'store' or 'http', got 'kafka'"),
        ({"ASYA_GATEWAY_URL": "file:///etc/passwd"}, "ASYA_GATEWAY_URL must be an absolute http or https URL"),
        ({"ASYA_GATEWAY_URL": "http:///x"}, "with a host, got 'http:///x'"),
        ({"ASYA_REPORTER": "store", "ASYA_GATEWAY_URL": "http://h"}, "ASYA_GATEWAY_URL is set but ASYA_REPORTER is"),
        ({"ASYA_REPORTER": "http", "ASYA_GATEWAY_API_KEY": "k"}, "ASYA_GATEWAY_API_KEY needs ASYA_GATEWAY_URL"),
    ],
)
def test_p_stat_18_bad_reporter_configuration_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ActorConfig.from_env({**BASE, **env})
    assert message in str(caught.value)


def test_p_ack_8_http_reporter_overrides_every_reporting_method() -> None:
    """A reporting method added to ``Reporter`` later must be given an HTTP form too, never inherit a store write."""
    public = {name for name, _ in inspect.getmembers(Reporter, inspect.isfunction) if not name.startswith("_")}
    assert public
    inherited = {name for name in public if getattr(HttpReporter, name) is getattr(Reporter, name)}
    assert inherited == set()
