"""The console under ``gateway.auth.mode: api_key`` (GW-AUTH-4): the static assets load without a key, every API call
the page makes needs one, the page asks for it, keeps it in sessionStorage and sends ``X-API-Key``, and follows a
task's SSE stream with it (EventSource cannot send headers, so the page reads the stream with fetch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from asya.manifest import parse_manifest
from asya_local.mesh import LocalMesh
from tests.browser.pages import BROWSER_DIR, Console, screenshot

pytestmark = pytest.mark.browser

KEY = "console-test-key"


@pytest.fixture(scope="module")
def keyed_console() -> Iterator[Console]:
    data = yaml.safe_load((BROWSER_DIR / "mesh" / "asya.yaml").read_text(encoding="utf-8"))
    data["gateway"] = {"auth": {"mode": "api_key", "api_key_secret": "asya/console-test"}}
    manifest = parse_manifest(data, base_dir=BROWSER_DIR / "mesh")
    with LocalMesh(manifest, port=0, gateway_env={"ASYA_API_KEYS": KEY}) as mesh:
        yield Console(mesh, headers={"X-API-Key": KEY})


def test_gw_auth_4_assets_are_public_and_the_api_still_needs_the_key(keyed_console: Console) -> None:
    base = keyed_console.mesh.url
    for asset in ("/console/", "/console/console.js", "/console/console.css"):
        answer = httpx.get(base + asset)
        assert answer.status_code == 200, asset
        assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert httpx.get(base + "/console").status_code == 307
    assert httpx.get(base + "/console/secrets.txt").json() == {"error": "not found"}
    assert httpx.get(base + "/console/../api/v1/mesh/").status_code in (401, 404)
    for method, path in (("GET", "/api/v1/mesh/"), ("GET", "/api/v1/system/mesh")):
        assert httpx.request(method, base + path).json() == {"error": "authentication required"}
    assert httpx.get(base + "/api/v1/system/mesh", headers={"X-API-Key": KEY}).json()["auth"] == "api_key"


def test_gw_auth_4_console_asks_for_the_key_and_follows_a_task_with_it(page: Any, keyed_console: Console) -> None:
    task_id = keyed_console.create("write", {"topic": "keyed", "words": 3})
    page.goto(keyed_console.url + "#/tasks")
    form = page.locator("#key-form")
    form.wait_for()
    screenshot(page, "api-key")
    page.fill("#key-input", "wrong-key")
    page.click("#key-form button[type=submit]")
    page.locator("#banner").filter(has_text="refused").wait_for()
    page.fill("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    page.locator(f'[data-task-row="{task_id}"]').wait_for()
    assert page.evaluate("sessionStorage.getItem('asya.console.apiKey')") == KEY
    assert page.locator("#key-button").is_visible()

    page.click(f'[data-task-row="{task_id}"] a')
    page.locator("main h1 .badge[data-status=succeeded]").wait_for()
    page.locator('#fly:text-is("keyed word1 word2")').wait_for()  # the stream, read with fetch and the key
    assert json.loads(page.locator("#result pre").text_content())["reviewed"] is True

    page.click("#key-button")
    page.click("#key-forget")
    assert page.evaluate("sessionStorage.getItem('asya.console.apiKey')") is None
    page.locator("#key-form").wait_for()
