"""The manifest's member-blaming error, apart so that every block module can raise it without importing another.

A check that spans several members of one block raises :class:`MemberError` naming the member it blames, so the
loader reports the member's whole path (``deployment.vpc.subnet_ids``) instead of the block's.
"""

from __future__ import annotations

__all__ = ["MemberError"]


class MemberError(ValueError):
    """A check of a whole block that blames one of its members: ``member`` is its path inside the block
    (``rules[0].policy``), ``reason`` says what is wrong (naming the bad value where there is one)."""

    def __init__(self, member: str, reason: str) -> None:
        super().__init__(f"{member}: {reason}")
        self.member = member
        self.reason = reason
