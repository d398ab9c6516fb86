"""A2A at ``POST /a2a/`` and the agent card (GW-A2A-1..14): see ``asya_gateway.a2a.endpoint`` and
``asya_gateway.a2a.card``."""

from __future__ import annotations

from asya_gateway.a2a.card import CARD_PATHS, a2a_skills, agent_card, base_url, build_card
from asya_gateway.a2a.endpoint import a2a_endpoint, resume_task

__all__ = ["CARD_PATHS", "a2a_endpoint", "a2a_skills", "agent_card", "base_url", "build_card", "resume_task"]
