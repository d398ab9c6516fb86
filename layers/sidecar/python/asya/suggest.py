"""The "did you mean" hint of every name error (manifest keys and actors, handler attributes): one implementation,
so a typo gets the same suggestion wherever it is made."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["did_you_mean", "did_you_mean_attribute"]


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``candidates`` to ``word``, or ``""`` when none is close."""
    import difflib  # only a name error needs it: kept off the actor's start-up

    close = difflib.get_close_matches(word, sorted(candidates), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def did_you_mean_attribute(owner: object, name: str) -> str:
    """The hint for a missing attribute ``name`` of ``owner`` (a module, a class or an instance), offered among its
    names that are not dunders."""
    return did_you_mean(name, (n for n in dir(owner) if not n.startswith("__")))
