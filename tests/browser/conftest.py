"""Browser tier: the web console (``/console/``) in Debian's headless ``chromium``, driven by Playwright for Python,
against a local mesh (``LocalMesh``, as the e2e tier starts it) of ``tests/browser/mesh/asya.yaml``.

The browser is ``/usr/bin/chromium`` (env ``ASYA_CHROMIUM`` names another), launched by executable path with a fresh
user data directory; Playwright's own browser download is never used (it cannot be reached from these machines).
``make test`` installs ``chromium`` with apt-get when it runs as root. Without a browser every test here skips, with
a reason that says so in the ``-ra`` summary. Screenshots of each page go to ``tests/browser/artifacts/`` (ignored).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from asya.manifest import Manifest, load_manifest
from asya_local.mesh import LocalMesh
from tests.browser.pages import ARTIFACTS, BROWSER_DIR, CHROMIUM_FLAGS, Console, chromium_or_skip

#: Upper bound of one wait in the page (a bound, not a timing assertion).
WAIT_MS = 30_000


# module scope, not session: Playwright's sync API keeps an event loop registered as running on the main thread while
# it is started, and under pytest-xdist a worker runs other tiers' tests after this module (async handlers and
# asyncio.run would then refuse to start a loop); leaving the module stops it
@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One persistent chromium context (fresh user data dir) for the session."""
    executable = chromium_or_skip(os.environ)
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        pytest.skip(f"BROWSER TESTS SKIPPED: the playwright package is missing ({exc}); run `make install`")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=executable,
            headless=True,
            args=list(CHROMIUM_FLAGS),
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(WAIT_MS)
        # `expect` keeps its own bound (5 s by default), which a loaded 2-core box overruns: the same bound for both
        expect.set_options(timeout=WAIT_MS)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    """A new tab; fails the test on any uncaught error in the console's JavaScript."""
    tab = browser_context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield tab
    finally:
        tab.close()
    assert not errors, f"uncaught JavaScript errors in the console: {errors}"


@pytest.fixture(scope="session")
def console_manifest() -> Manifest:
    return load_manifest(BROWSER_DIR / "mesh" / "asya.yaml")


@pytest.fixture(scope="module")
def console(console_manifest: Manifest) -> Iterator[Console]:
    """The browser mesh with the manifest's auth (``iam``: not enforced locally, as under ``asya dev``), recording a
    run history as ``asya dev`` does (the task page's step timeline)."""
    with LocalMesh(console_manifest, port=0, record_history=True) as mesh:
        yield Console(mesh, headers={})
