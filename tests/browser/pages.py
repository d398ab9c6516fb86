"""Helpers of the browser tier: a running console (mesh + URL + API calls with its credentials) and screenshots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from asya_local.mesh import LocalMesh

#: Screenshots of each page (ignored by git): ``tests/browser/artifacts/{name}.png``.
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


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
