"""The ledger's closed vocabularies: source classes, authorities and their trust ranks, claim
domains, states, sensitivities, and the metadata keys evidence may carry (research/acp.md §1, §4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

SourceClass = Literal["system", "user_input", "user_correction", "external_tool", "agent_authored"]
Authority = Literal[
    "system_policy",
    "user_explicit",
    "user_correction",
    "single_observation",
    "agent_inference",
    "agent_self_evaluation",
    "external_information",
]
ClaimDomain = Literal[
    "user_fact", "user_preference", "work", "experience", "style", "external_fact"
]
EvidenceState = Literal["active", "quarantined", "superseded", "redacted"]
ObservationState = Literal["active", "superseded", "quarantined"]
Sensitivity = Literal["public", "private", "sensitive", "secret"]
SessionType = Literal["root", "subagent", "fork"]

SOURCE_CLASSES: tuple[SourceClass, ...] = (
    "system",
    "user_input",
    "user_correction",
    "external_tool",
    "agent_authored",
)
AUTHORITIES: tuple[Authority, ...] = (
    "system_policy",
    "user_explicit",
    "user_correction",
    "single_observation",
    "agent_inference",
    "agent_self_evaluation",
    "external_information",
)
"""Declaration order, not a trust order (see AUTHORITY_RANK)."""
AUTHORITY_RANK: Mapping[str, int] = {
    "user_correction": 6,
    "user_explicit": 5,
    "system_policy": 4,
    "external_information": 3,
    "single_observation": 2,
    "agent_inference": 1,
    "agent_self_evaluation": 0,
}
CLAIM_DOMAINS: tuple[ClaimDomain, ...] = (
    "user_fact",
    "user_preference",
    "work",
    "experience",
    "style",
    "external_fact",
)
EVIDENCE_STATES: tuple[EvidenceState, ...] = ("active", "quarantined", "superseded", "redacted")
SENSITIVITIES: tuple[Sensitivity, ...] = ("public", "private", "sensitive", "secret")
INSTRUCTIONAL: frozenset[str] = frozenset({"user_input", "user_correction"})
"""Source classes whose text may read as an instruction: those that do (claims.py) are kept out
of other sessions' recall."""

FIXED_AUTHORITY: Mapping[str, Authority] = {
    "system": "system_policy",
    "user_input": "user_explicit",
    "user_correction": "user_correction",
    "external_tool": "external_information",
}
"""sourceClass -> its only authority; `agent_authored` may declare any (acp.md §21.13)."""

METADATA_KEYS: frozenset[str] = frozenset(
    {"ttlDays", "reviewStatus", "scenarioTags", "sourceVersion", "claim"}
)
CLAIM_KINDS: frozenset[str] = frozenset(
    {"message", "fact", "preference", "directive", "question", "chatter", "correction"}
)
TRUSTED_INGESTS: frozenset[str] = frozenset({"session-event", "user-correction"})
"""Ingest paths whose writes may land active; any other path is quarantined (fail closed)."""


def authority_for(source_class: str, agent_kind: str = "") -> Authority:
    """The authority a source class declares at write time."""
    fixed = FIXED_AUTHORITY.get(source_class)
    if fixed is not None:
        return fixed
    if agent_kind == "self_eval":
        return "agent_self_evaluation"
    if agent_kind == "inference":
        return "agent_inference"
    return "single_observation"


def consistency_error(source_class: str, authority: str) -> str | None:
    """Why `authority` may not be declared by `source_class`, or None when it may."""
    if source_class not in SOURCE_CLASSES:
        return f"unknown source class {source_class!r}"
    if authority not in AUTHORITIES:
        return f"unknown authority {authority!r}"
    expected = FIXED_AUTHORITY.get(source_class)
    if expected is not None and authority != expected:
        return (
            f"authority {authority!r} inconsistent with sourceClass {source_class!r} "
            f"(expected {expected!r})"
        )
    return None


def metadata_error(metadata: Mapping[str, object]) -> str | None:
    """The first metadata key outside the whitelist, described; None when all are allowed."""
    for key in metadata:
        if key not in METADATA_KEYS:
            allowed = ", ".join(sorted(METADATA_KEYS))
            return f"metadata key {key!r} not allowed (allowed: {allowed})"
    return _claim_error(metadata.get("claim"))


def _claim_error(claim: object) -> str | None:
    """A claim's record (`kind`, and for a claim cut from a message `of` and `n`) is whole."""
    if claim is None:
        return None
    if not isinstance(claim, Mapping) or claim.get("kind") not in CLAIM_KINDS:
        return "metadata claim must name a kind: " + ", ".join(sorted(CLAIM_KINDS))
    if claim["kind"] != "message" and not (
        isinstance(claim.get("of"), str) and isinstance(claim.get("n"), int)
    ):
        return "metadata claim of a message's claim names the message (of) and its place (n)"
    return None


def weakest(authorities: list[str]) -> str | None:
    """The lowest-ranked known authority (the non-amplification rule), None if none is known."""
    known = [a for a in authorities if a in AUTHORITY_RANK]
    return min(known, key=lambda a: AUTHORITY_RANK[a]) if known else None
