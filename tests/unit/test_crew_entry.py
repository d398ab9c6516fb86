"""Every crew module's ``lambda_handler`` builds its runtime once per Lambda container, from the environment."""

from __future__ import annotations

from typing import Any

import pytest

from asya.config import ActorConfig
from asya_crew import aggregator, pause, resume, sink, sump
from asya_crew.entry import lambda_entry


class _Recording:
    built: list[ActorConfig] = []

    def __init__(self, config: ActorConfig) -> None:
        self.config = config
        type(self).built.append(config)

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"batchItemFailures": [], "runtime": id(self), "event": event}


def test_lambda_entry_builds_the_runtime_on_the_first_call_and_reuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYA_NAMESPACE", "demo")
    monkeypatch.setenv("ASYA_ACTOR", "x-sink")
    monkeypatch.setattr(_Recording, "built", [])
    handler = lambda_entry(_Recording)
    assert _Recording.built == []  # nothing is built at import or definition time
    first = handler({"Records": []}, None)
    second = handler({"Records": [1]}, None)
    assert len(_Recording.built) == 1
    assert _Recording.built[0].actor == "x-sink"
    assert first["runtime"] == second["runtime"]
    assert second["event"] == {"Records": [1]}


def test_every_crew_module_exposes_its_own_lambda_handler() -> None:
    handlers = [m.lambda_handler for m in (aggregator, pause, resume, sink, sump)]
    assert len({id(h) for h in handlers}) == 5
    assert all(h.__name__ == "lambda_handler" for h in handlers)
