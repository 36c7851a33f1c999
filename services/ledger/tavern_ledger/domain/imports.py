"""What a JSONL import may store of one evidence row: the write gate, the sensitivity rules and
the lifecycle's supersession rule decide, as they do for every other write.

Order: the target scope (an import into one scope moves every row there, under an id derived
for that scope) -> the session id (from `sourceRef` when the row has none) -> the write gate
(block refuses the row; injection, a sensitive external tool or private data quarantine an active
row) -> the `supersedes` claim (kept only for an authority that may correct, and only where the
superseded row is known).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from tavern_ledger.domain.gates import GateConfig, write_gate
from tavern_ledger.domain.ids import (
    content_hash,
    evidence_id_of_json,
    js_json,
    observation_id,
    session_of_source_ref,
)
from tavern_ledger.domain.lifecycle import CORRECTING_AUTHORITIES
from tavern_ledger.domain.portability import LineInvalid
from tavern_ledger.domain.records import EvidenceRow, ObservationRow, claim_id
from tavern_ledger.domain.text import estimate_tokens


class ImportRefused(LineInvalid):
    """The write gate refuses the row: nothing of it is stored."""


@dataclass(frozen=True)
class ImportedEvidence:
    row: EvidenceRow
    quarantined: tuple[str, ...]
    """The gate's reasons when they put the row in quarantine (empty: stored as it came)."""


def admit_evidence(
    row: EvidenceRow, target_scope: str | None, config: GateConfig
) -> ImportedEvidence:
    """The row as the import stores it (raises ImportRefused when the gate blocks it)."""
    ref = json.loads(row.source_ref or "{}")
    row = replace(row, session_id=row.session_id or session_of_source_ref(ref))
    if row.state == "redacted":  # its text is gone already: nothing to gate
        return ImportedEvidence(_moved(row, ref, target_scope, rewritten=False), ())
    verdict = write_gate(
        row.content,
        source_class=row.source_class,
        claim_domain=row.claim_domain,
        config=config,
        sensitivity=row.sensitivity,
    )
    if not verdict.stored:
        raise ImportRefused("refused by the write gate: " + ", ".join(verdict.reasons))
    rewritten = verdict.text != row.content
    if verdict.action != "allow":
        row = _gated(row, verdict.text, verdict.flags)
    if verdict.action == "quarantine" and row.state == "active":
        row = replace(row, state="quarantined")
    quarantined = verdict.reasons if row.state == "quarantined" else ()
    return ImportedEvidence(_moved(row, ref, target_scope, rewritten=rewritten), quarantined)


def _gated(row: EvidenceRow, text: str, flags: tuple[str, ...]) -> EvidenceRow:
    merged = tuple(dict.fromkeys((*row.flags, *flags)))
    if text == row.content:
        return replace(row, flags=merged)
    return replace(
        row,
        content=text,
        content_hash=content_hash(text),
        tokens=estimate_tokens(text),
        flags=merged,
    )


def _moved(
    row: EvidenceRow, ref: Mapping[str, object], target_scope: str | None, *, rewritten: bool
) -> EvidenceRow:
    """Into `target_scope` under an id of its own there (the same text may live in two scopes);
    a row whose text the gate rewrote gets the id of its new text."""
    scope = target_scope or row.scope_id
    if scope == row.scope_id and not rewritten:
        return row
    placed = js_json({**ref, "importedInto": scope}) if scope != row.scope_id else row.source_ref
    claim = row.metadata.get("claim")
    if row.claim_of is not None and isinstance(claim, dict):  # a claim: apart from its message
        return replace(row, scope_id=scope, id=claim_id(placed, int(claim["n"]), row.content_hash))
    return replace(row, scope_id=scope, id=evidence_id_of_json(placed, row.content_hash))


def supersession(
    row: EvidenceRow, renamed: Mapping[str, str], known: Mapping[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The `supersedes` ids the row may keep and the reasons for those it may not.

    `renamed`: ids this import moved (old -> new); `known`: the scope of each stored row the
    claim names. The lifecycle lets only a user's explicit statement or correction supersede,
    and only evidence of its own scope."""
    if not row.supersedes:
        return (), ()
    if row.authority not in CORRECTING_AUTHORITIES:
        return (), (f"supersedes:authority_{row.authority}_may_not_supersede",)
    kept, refused = [], []
    for old in row.supersedes:
        target = renamed.get(old, old)
        if known.get(target) == row.scope_id:
            kept.append(target)
        else:
            refused.append(f"supersedes:unknown_evidence:{old}")
    return tuple(kept), tuple(refused)


def admit_observation(
    row: ObservationRow, target_scope: str | None, renamed: Mapping[str, str], config: GateConfig
) -> tuple[ObservationRow, tuple[str, ...]]:
    """An imported observation through the gate (the `observation` track), moved with its
    evidence; returns the row and the reasons that quarantined it."""
    verdict = write_gate(
        row.text, source_class="observation", claim_domain=row.claim_domain, config=config
    )
    if not verdict.stored:
        raise ImportRefused("refused by the write gate: " + ", ".join(verdict.reasons))
    if verdict.action == "quarantine" and row.state == "active":
        row = replace(row, state="quarantined")
    quarantined = verdict.reasons if row.state == "quarantined" else ()
    scope = target_scope or row.scope_id
    evidence = tuple(renamed.get(e, e) for e in row.evidence_ids)
    if scope == row.scope_id and evidence == row.evidence_ids and verdict.text == row.text:
        return row, quarantined
    # a moved observation's lineage would point at the other scope's rows: it starts anew
    moved = replace(row, scope_id=scope, evidence_ids=evidence, supersedes=(), text=verdict.text)
    ident = observation_id(
        scope, row.subject, row.predicate, row.claim_domain, moved.text, evidence
    )
    return replace(moved, id=ident), quarantined
