"""The README's flow picture (docs/flow.png), drawn by the web console itself, in the same headless Chromium the
browser tests drive.

Against a running ``asya dev --manifest asya.yaml`` (the example mesh), it creates a ``triage`` task with the
README's ``asya call triage`` input (the negative branch, a map over its parts, one more analysis), waits for it to
end, opens its task page and saves the page's flow card: the program as the console draws it, with the path the task
took highlighted. The drawing's scroll box is lifted so the whole flow is in the picture::

    asya dev --manifest asya.yaml --port 8080 &
    python -m tests.browser.pictures http://127.0.0.1:8080 docs/flow.png
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from tests.browser.pages import CHROMIUM_FLAGS, chromium_or_skip

#: The README's example input: negative, one part, one more analysis round.
TRIAGE_INPUT = {"text": "a bad and slow day", "parts": [{"chunk": 0, "text": "One."}], "reviews": 1}

_TERMINAL = {"succeeded", "failed", "canceled"}


def _finished_task(base: str) -> str:
    """A ``triage`` task created and followed to its end over the task's event stream."""
    with httpx.Client(base_url=base, timeout=30) as client:
        created = client.post("/api/v1/mesh/", params={"flow": "triage"}, json={"payload": TRIAGE_INPUT})
        created.raise_for_status()
        task_id = str(created.json()["id"])
        with client.stream("GET", f"/api/v1/mesh/{task_id}/events", timeout=None) as events:
            for line in events.iter_lines():
                if line.startswith("data:") and json.loads(line[5:]).get("status") in _TERMINAL:
                    break
        status = client.get(f"/api/v1/mesh/{task_id}").json()["status"]
        if status != "succeeded":
            raise SystemExit(f"the triage task {task_id} ended {status}, not succeeded")
        return task_id


def draw_flow(base: str, out: Path) -> None:
    task_id = _finished_task(base)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_or_skip(os.environ), args=list(CHROMIUM_FLAGS[1:]), headless=True
        )
        # the console's CSP refuses inline styles; the picture's one style lifts the drawing's scroll box (and hides
        # the button that does the same on the page)
        page = browser.new_page(viewport={"width": 620, "height": 1000}, bypass_csp=True)
        page.goto(f"{base}/console/#/task/{task_id}")
        card = page.locator("#flow")
        # drawn at once, redrawn with the path once the view and the run history are read: wait for the path's end
        card.locator(".flow-node.kind-end.visited").wait_for()
        page.add_style_tag(
            content=".flow-drawing { max-height: none !important; overflow: visible !important; }"
            " .flow-expand { display: none !important; }"
        )
        card.screenshot(path=str(out))
        browser.close()


if __name__ == "__main__":
    draw_flow(sys.argv[1].rstrip("/"), Path(sys.argv[2]))
