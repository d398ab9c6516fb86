"""Helpers of the browser tier: which browser to drive, a running console (mesh + URL + API calls with its
credentials) and screenshots."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya_local.mesh import LocalMesh

BROWSER_DIR = Path(__file__).resolve().parent
#: Screenshots of each page (ignored by git): ``tests/browser/artifacts/{name}.png``.
ARTIFACTS = BROWSER_DIR / "artifacts"
#: Flags for a quiet, offline, throwaway chromium (no GPU, no QUIC, no first-run or background traffic).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_or_skip(environ: Mapping[str, str]) -> str:
    """The Chromium binary to drive: ``ASYA_CHROMIUM``, else ``chromium`` on PATH, else ``/usr/bin/chromium``. Skips
    the calling test, saying why and how to fix it, when there is none."""
    path = environ.get("ASYA_CHROMIUM") or shutil.which("chromium", path=environ.get("PATH")) or "/usr/bin/chromium"
    if not Path(path).is_file():
        pytest.skip(
            f"BROWSER TESTS SKIPPED: no chromium at {path}. `make test` installs Debian's chromium with apt-get when "
            "run as root; elsewhere install it (apt-get install chromium) or set ASYA_CHROMIUM to a Chromium binary."
        )
    return path


@dataclass(frozen=True)
class Console:
    """A running mesh and the console's URL on it."""

    mesh: LocalMesh
    headers: dict[str, str]

    @property
    def url(self) -> str:
        return f"{self.mesh.url}/console/"

    def create(self, flow: str, payload: Any) -> str:
        response = httpx.post(
            f"{self.mesh.url}/api/v1/mesh/", params={"flow": flow}, json={"payload": payload}, headers=self.headers
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def view(self, task_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.mesh.url}/api/v1/mesh/{task_id}", headers=self.headers)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot as ``tests/browser/artifacts/{name}.png``."""
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
