"""Example actors for the `documents` flow: map/reduce over the chunks of a document. Plain Python, no network.

``chunk`` is a fan-in actor (``fan_in`` in asya.yaml): each chunk it yields becomes a slice that ``summarize-chunk``
summarises on its own; the aggregator ``x-fanin-chunk`` merges the summaries, in chunk order, into the input payload
at ``/summaries``; ``digest`` reads the merged document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

#: Words per chunk unless the input says ``"chunk_words"``.
_CHUNK_WORDS = 40


def chunk(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Split the document into chunks of about ``chunk_words`` words, cut at sentence ends where possible."""
    size = int(payload.get("chunk_words", _CHUNK_WORDS))
    sentences = [part.strip() for part in re.split(r"(?<=[.!?])\s+", str(payload["text"])) if part.strip()]
    current: list[str] = []
    index = 0
    for sentence in sentences:
        current.append(sentence)
        if sum(len(s.split()) for s in current) >= size:
            yield {"chunk": index, "text": " ".join(current)}
            index, current = index + 1, []
    if current:
        yield {"chunk": index, "text": " ".join(current)}


def summarize_chunk(payload: dict[str, Any]) -> dict[str, Any]:
    """A one-line summary of one chunk: its first sentence, and how many words it had."""
    text = str(payload["text"])
    first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]
    return {"chunk": payload["chunk"], "words": len(text.split()), "summary": first}


def digest(payload: dict[str, Any]) -> dict[str, Any]:
    """The document's summary: the chunk summaries in order (the aggregator merged them in numeric slice order)."""
    summaries = payload.get("summaries", [])
    return {
        "chunks": len(summaries),
        "words": sum(int(s.get("words", 0)) for s in summaries),
        "summary": " ".join(str(s.get("summary", "")) for s in summaries),
    }
