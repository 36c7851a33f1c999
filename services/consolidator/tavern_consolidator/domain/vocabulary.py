"""The closed vocabularies the consolidator reasons with (research/acp.md §1, §4.5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

CLAIM_DOMAINS: tuple[str, ...] = (
    "user_fact",
    "user_preference",
    "work",
    "experience",
    "style",
    "external_fact",
)
AUTHORITY_RANK: Mapping[str, int] = {
    "user_correction": 6,
    "user_explicit": 5,
    "system_policy": 4,
    "external_information": 3,
    "single_observation": 2,
    "agent_inference": 1,
    "agent_self_evaluation": 0,
}
AGENT_AUTHORITIES = frozenset({"single_observation", "agent_inference", "agent_self_evaluation"})
"""Authorities only agent-authored evidence declares."""
HUMAN_AUTHORITIES = frozenset({"user_explicit", "user_correction"})

Strength = Literal["strong", "negative_only", "weak", "not_eligible"]


def strength(authority: str) -> Strength:
    """acp.md §4.5: how much a piece of evidence counts toward promoting a behaviour."""
    if authority in HUMAN_AUTHORITIES:
        return "strong"
    if authority == "single_observation":
        return "negative_only"
    if authority == "agent_self_evaluation":
        return "weak"
    return "not_eligible"
