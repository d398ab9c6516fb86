"""The HTTP reporter's SSRF guard (P-STAT-18; issue 18 security): ``x-asya-gateway-url`` is honoured only when it is
an absolute http(s) URL with a host; the API key goes only to the configured gateway's origin."""

from __future__ import annotations

import pytest

from asya.exceptions import ManifestError
from asya.gatewayurl import gateway_base, is_gateway_url, same_origin
from asya.manifest import parse_manifest

pytestmark = pytest.mark.unit

ENV = "https://gw.example.com"


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://internal:70/x",
        "ftp://gw.example.com",
        "javascript:alert(1)",
        "http://",
        "https:///path-only",
        "http://:8080",
        "//gw.example.com",
        "gw.example.com",
        "http://user:pass@gw.example.com",
        "http://gw.example.com\r\nX-Forged: 1",
        "http://gw example.com",
        "http://gw.example.com:99999",
        "http://gw.example.com:port",
        "http://" + "a" * 3000 + ".com",
        "",
        5,
        None,
        {"url": ENV},
    ],
)
def test_p_stat_18_an_unsafe_gateway_url_header_is_ignored(url: object) -> None:
    assert not is_gateway_url(url)
    assert gateway_base(url, ENV) == ENV
    assert gateway_base(url, "") is None, "with no env URL, reporting is off"


@pytest.mark.parametrize("url", ["http://10.0.0.5:8080", "https://gw.example.com/", "HTTPS://GW.example.com"])
def test_p_stat_18_a_valid_gateway_url_header_wins_over_the_env(url: str) -> None:
    assert is_gateway_url(url)
    assert gateway_base(url, ENV) == url


def test_p_stat_18_header_wins_env_is_the_fallback_and_neither_is_off() -> None:
    assert gateway_base("http://10.0.0.5:8080/", ENV) == "http://10.0.0.5:8080/"
    assert gateway_base(None, ENV) == ENV
    assert gateway_base(None, "") is None


@pytest.mark.parametrize(
    ("base", "sends"),
    [
        ("https://gw.example.com", True),
        ("https://GW.example.com:443/x", True),
        ("http://gw.example.com", False),
        ("https://gw.example.com:8443", False),
        ("https://gw.example.com.evil.test", False),
        ("https://evil.test", False),
    ],
)
def test_p_stat_18_the_api_key_goes_only_to_the_configured_origin(base: str, sends: bool) -> None:
    assert same_origin(base, ENV) is sends
    assert same_origin(base, "") is False


@pytest.mark.parametrize(
    "url", ["http://:8080", "ftp://gw.example.com", "file:///etc/passwd", "https://u:p@gw.example.com"]
)
def test_gw_gen_9_callback_url_follows_the_same_rule(url: str) -> None:
    """The manifest's ``gateway.callback_url``, which the gateway stamps as ``x-asya-gateway-url`` (GW-CREATE-7), is
    refused at load by the rule the reporter applies, so no envelope carries a URL the reporter would ignore."""
    with pytest.raises(ManifestError, match=r"gateway\.callback_url: must be an absolute http\(s\) URL"):
        parse_manifest({"namespace": "demo", "actors": {"a": {"handler": "m.f"}}, "gateway": {"callback_url": url}})
