"""Example actors for the `text-pipeline` and `sentences` flows. Plain Python, no network.

Each handler receives only the payload and returns (or yields) the next payload: the sidecar layer does the routing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_POSITIVE = {"good", "great", "love", "happy", "excellent", "nice", "friendly", "hello", "wonderful", "best"}
_NEGATIVE = {"bad", "awful", "hate", "sad", "terrible", "poor", "worst", "angry", "broken", "slow"}


def normalize(payload: dict[str, Any]) -> dict[str, Any]:
    """Lowercase the text and collapse whitespace."""
    text = str(payload["text"])
    return {**payload, "normalized": " ".join(text.lower().split())}


class Analyzer:
    """Scores sentiment with a small lexicon; the lexicon is built once per container."""

    def __init__(self) -> None:
        self._lexicon = {word: 1 for word in _POSITIVE} | {word: -1 for word in _NEGATIVE}

    def process(self, payload: dict[str, Any]) -> dict[str, Any]:
        words = re.findall(r"[a-z']+", payload.get("normalized") or str(payload.get("text", "")).lower())
        score = sum(self._lexicon.get(word, 0) for word in words)
        sentiment = "positive" if score > 0 else "negative" if score < 0 else "neutral"
        return {**payload, "words": len(words), "score": score, "sentiment": sentiment}


def summarize(payload: dict[str, Any]) -> Iterator[Any]:
    """Build a one-line summary, streaming it word by word as live partial output (FLY) unless the input says
    ``"stream": false``."""
    words = str(payload.get("normalized", payload.get("text", ""))).split()
    summary = f"A {payload.get('sentiment', 'neutral')} text of {len(words)} words"
    if words:
        summary += f" starting with '{' '.join(words[:3])}'"
    summary += "."
    if payload.get("stream", True):
        for index, word in enumerate(summary.split(" ")):
            yield "FLY", word if index == 0 else f" {word}"
    yield {**payload, "summary": summary}


def split_sentences(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Fan out: one payload per sentence. The first keeps the task id; the others are children (P-FAN-2)."""
    sentences = [part.strip() for part in re.split(r"(?<=[.!?])\s+", str(payload["text"])) if part.strip()]
    for index, sentence in enumerate(sentences):
        yield {"text": sentence, "index": index, "of": len(sentences)}


def request_review(payload: dict[str, Any]) -> Iterator[Any]:
    """Ask a human to approve the analysis before it is published: the pause metadata the next hop (x-pause) shows
    as the prompt and the form of `asya resume` (P-PAUSE-3)."""
    yield (
        "SET",
        ".headers.x-asya-pause",
        {
            "prompt": f"Publish this {payload.get('sentiment', 'neutral')} text? {payload.get('normalized', '')[:80]}",
            "fields": [
                {"name": "approved", "type": "boolean", "required": True, "prompt": "Publish it?"},
                {"name": "note", "type": "string", "prompt": "A note for the record", "payload_key": "/review/note"},
            ],
        },
    )
    yield payload


def publish(payload: dict[str, Any]) -> dict[str, Any]:
    """The last step after the review: published when the reviewer approved."""
    return {**payload, "published": payload.get("approved") is True}
