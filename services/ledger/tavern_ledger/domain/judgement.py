"""Which earlier claims a model's judgement may end (`claim.supersede`): pure checks of the new
claim and each target, so that a model's answer can never reach beyond what a correction said
in chat could end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.domain.segments import FACTUAL


@dataclass(frozen=True)
class Verdict:
    """Targets to end now, and those the claim had ended before (asked again: nothing)."""

    to_end: tuple[EvidenceRow, ...]
    unchanged: tuple[str, ...]


class Refused(ValueError):
    """The judgement names a claim it may not end (the whole request is refused)."""


def of_fact(row: EvidenceRow) -> bool:
    """An active claim of fact of a person (a fact, a preference, a correction)."""
    return row.state == "active" and row.claim_kind in FACTUAL and row.claim_of is not None


def verdict(claim: EvidenceRow, ids: Sequence[str], found: Mapping[str, EvidenceRow]) -> Verdict:
    """What `claim` ends of the targets `ids` (`found`: those that exist); raises `Refused`."""
    if not of_fact(claim):
        raise Refused(f"{claim.id} is not an active claim of fact")
    to_end: list[EvidenceRow] = []
    unchanged: list[str] = []
    for target_id in dict.fromkeys(ids):
        target = found.get(target_id)
        if target is None:
            raise Refused(f"{target_id} names no evidence")
        if target.state == "superseded" and target.id in claim.supersedes:
            unchanged.append(target.id)
            continue
        problem = _refusal(claim, target)
        if problem:
            raise Refused(f"{target.id}: {problem}")
        to_end.append(target)
    return Verdict(tuple(to_end), tuple(unchanged))


def _refusal(claim: EvidenceRow, target: EvidenceRow) -> str | None:
    if target.id == claim.id:
        return "a claim does not end itself"
    if not of_fact(target):
        return "not an active claim of fact"
    if target.scope_id != claim.scope_id:
        return "another scope's claim"
    if target.source_label != claim.source_label:
        return "another speaker's claim"
    if target.claim_of == claim.claim_of:
        return "a claim of the same message"
    if target.observed_at > claim.observed_at:
        return "said after the claim"
    return None
