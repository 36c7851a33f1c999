"""Observations proposed by the consolidator (acp.md §3.5, §14): validated, gated, their id
derived from their own fields, their authority the weakest of their supporting evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tavern_ledger.domain import release
from tavern_ledger.domain.gates import GateConfig, GateVerdict, write_gate
from tavern_ledger.domain.ids import observation_id
from tavern_ledger.domain.records import ObservationRow
from tavern_ledger.domain.release import ReleaseVerdict
from tavern_ledger.domain.vocabulary import AUTHORITIES, CLAIM_DOMAINS, weakest

PASSED = ReleaseVerdict("pass")
MAX_TEXT_CHARS = 500
MAX_KEY_CHARS = 200
DERIVED_ID = re.compile(r"^obs_[0-9a-f]{24}$")


class ObservationInvalid(ValueError):
    pass


@dataclass(frozen=True)
class Proposal:
    scope_id: str
    subject: str
    predicate: str
    claim_domain: str
    text: str
    evidence_ids: tuple[str, ...]
    observed_at: datetime
    authority: str | None = None


@dataclass(frozen=True)
class Decision:
    row: ObservationRow | None
    verdict: GateVerdict
    release: ReleaseVerdict = PASSED
    derived_authority: str = "single_observation"
    """The weakest supporting authority, whether or not an explicit one was stored instead."""


def validate(p: Proposal) -> None:
    if p.claim_domain not in CLAIM_DOMAINS:
        raise ObservationInvalid(f"unknown claim domain {p.claim_domain!r}")
    if not p.subject.strip() or not p.predicate.strip():
        raise ObservationInvalid("observation subject and predicate must be non-empty")
    if len(p.subject.strip()) > MAX_KEY_CHARS or len(p.predicate.strip()) > MAX_KEY_CHARS:
        raise ObservationInvalid(f"subject and predicate are at most {MAX_KEY_CHARS} characters")
    if not p.text.strip():
        raise ObservationInvalid("observation text must be non-empty")
    if p.authority is not None and p.authority not in AUTHORITIES:
        raise ObservationInvalid(f"unknown authority {p.authority!r}")


def derive_authority(
    explicit: str | None, evidence_authorities: Mapping[str, str], evidence_ids: Sequence[str]
) -> str:
    """acp.md §3.5: an explicit, valid authority wins, stronger or weaker than the evidence;
    else the non-amplification rule: the weakest supporting evidence's (none known ->
    `single_observation`). Only the consolidator and the operator propose observations, and
    the distiller never passes a model's claim of authority on."""
    if explicit is not None:
        return explicit
    found = weakest([evidence_authorities[e] for e in evidence_ids if e in evidence_authorities])
    return found or "single_observation"


def decide(p: Proposal, evidence_authorities: Mapping[str, str], config: GateConfig) -> Decision:
    """Gate the text (the write gate, then the release gate) and build the row (None when the
    write gate blocks it; `quarantined` when either holds it for review)."""
    validate(p)
    text = p.text.strip()[:MAX_TEXT_CHARS]
    verdict = write_gate(
        text, source_class="observation", claim_domain=p.claim_domain, config=config
    )
    derived = derive_authority(None, evidence_authorities, p.evidence_ids)
    if not verdict.stored:
        return Decision(None, verdict, derived_authority=derived)
    stored = verdict.text[:MAX_TEXT_CHARS]
    released = release.gate(stored)
    held = verdict.action == "quarantine" or released.held
    subject, predicate = p.subject.strip(), p.predicate.strip()
    row = ObservationRow(
        id=observation_id(p.scope_id, subject, predicate, p.claim_domain, stored, p.evidence_ids),
        scope_id=p.scope_id,
        subject=subject,
        predicate=predicate,
        claim_domain=p.claim_domain,
        authority=derive_authority(p.authority, evidence_authorities, p.evidence_ids),
        text=stored,
        evidence_ids=p.evidence_ids,
        observed_at=p.observed_at,
        state="quarantined" if held else "active",
        flags=verdict.flags + released.flags,
    )
    return Decision(row, verdict, released, derived)


def backlink_tier(row: ObservationRow, resolvable: set[str] | None = None) -> str:
    """acp.md §14: verifiable / unverifiable_foreign / missing_backlink / unknown."""
    if row.evidence_ids:
        if resolvable is None or all(e in resolvable for e in row.evidence_ids):
            return "verifiable"
        return "unverifiable_foreign"
    if not DERIVED_ID.fullmatch(row.id):
        return "unknown"
    own = observation_id(row.scope_id, row.subject, row.predicate, row.claim_domain, row.text, [])
    return "missing_backlink" if own == row.id else "unverifiable_foreign"
