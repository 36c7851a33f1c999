"""Corrections said in conversation, applied where they are ingested: the claims of each new
correcting message end the earlier claims they clearly contradict (`domain.contradiction`,
judged with the sentence model), in the same transaction as the rows, with lineage and audit as
`ledger correct` writes them. A correction that matches nothing stays a new claim beside the old
ones; it never takes anything away."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from tavern_ledger import audit
from tavern_ledger.changes import Actor, commit_change
from tavern_ledger.domain import lifecycle
from tavern_ledger.domain.contradiction import Stated, contradicted, probe_terms
from tavern_ledger.domain.extract import SESSION_EVENT_INGEST
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.embedding import Embedder
from tavern_ledger.evidence import Conn
from tavern_ledger.evidence import rows as evidence
from tavern_runtime.logs import get_logger

log = get_logger(__name__)


async def apply_spoken_corrections(
    conn: Conn, rows: Sequence[EvidenceRow], now: datetime, embedder: Embedder
) -> int:
    """End what the batch's new correcting messages contradict; returns how many claims."""
    messages = {r.id: r for r in rows if r.claim_kind == "message"}
    groups: dict[str, list[EvidenceRow]] = {}
    for row in rows:
        if _spoken_correction(row) and row.claim_of in messages:
            groups.setdefault(row.claim_of, []).append(row)
    replaced = 0
    for message_id, claims in groups.items():
        replaced += await _apply(conn, messages[message_id], claims, now, embedder)
    return replaced


def _spoken_correction(row: EvidenceRow) -> bool:
    """A claim correcting a fact, said in conversation. A corrected directive replaces nothing
    here: the rules channel drafts rules from directives said again and again."""
    return (
        row.claim_kind == "correction"
        and row.state == "active"
        and row.ingest == SESSION_EVENT_INGEST
    )


async def _apply(
    conn: Conn,
    message: EvidenceRow,
    claims: Sequence[EvidenceRow],
    now: datetime,
    embedder: Embedder,
) -> int:
    found = await evidence.statements_before(conn, claims[0], probe_terms(message.content))
    # A person corrects what they said themselves: in a chat of several people (`user:<name>`
    # labels) another speaker's claim is not theirs to end.
    stated = [s for s in found if s.source_label == message.source_label]
    if not stated:
        return 0
    chosen, similarity = await asyncio.to_thread(
        contradicted,
        embedder.embed,
        message.content,
        [c.content for c in claims],
        [Stated(s.id, s.content, s.claim_of or "") for s in stated],
    )
    if not chosen:
        return 0
    actor = Actor("user", f"correction said in session {message.session_id}")
    by_id = {s.id: s for s in stated}
    column = {s.id: j for j, s in enumerate(stated)}
    ended: dict[str, list[EvidenceRow]] = {}
    for target_id in chosen:
        # The clause nearest in meaning carries the lineage (the first when the whole is).
        rows = similarity[1:]
        best = max(range(len(claims)), key=lambda i: rows[i][column[target_id]])
        ended.setdefault(claims[best].id, []).append(by_id[target_id])
    for claim in claims:
        if claim.id in ended:
            await supersede_claims(conn, claim, ended[claim.id], actor, now, matched_by="meaning")
    log.info("spoken_correction_applied", session_id=message.session_id, superseded=len(chosen))
    return len(chosen)


async def supersede_claims(
    conn: Conn,
    claim: EvidenceRow,
    targets: Sequence[EvidenceRow],
    actor: Actor,
    now: datetime,
    *,
    matched_by: str,
    decision: str | None = None,
) -> None:
    """End `targets` by `claim`, as a correction does: each `superseded` with its validity
    ending when the claim was said (a `supersede` audit entry and LEDGER fact each), the claim's
    `supersedes` naming them and a `correct` entry saying how they were matched. Spoken
    corrections and the consolidator's model judgement (`claims.py`) both end claims here."""
    for target in targets:
        change = lifecycle.apply(target, "supersede", now, at=claim.observed_at)
        await commit_change(conn, change, "supersede", actor, now, replaced_by=claim.id)
    chosen = [t.id for t in targets]
    lineage = replace(
        claim,
        supersedes=tuple(dict.fromkeys((*claim.supersedes, *chosen))),
        valid_from=claim.valid_from or claim.observed_at,
        updated_at=now,
    )
    await evidence.save_change(conn, lineage)
    entry = _correct_entry(lineage, chosen, actor, matched_by, decision)
    await audit.append_one(conn, entry)


def _correct_entry(
    row: EvidenceRow, chosen: Sequence[str], actor: Actor, matched_by: str, decision: str | None
) -> AuditEntry:
    extra = {"decision": decision} if decision else {}
    return AuditEntry(
        op="correct",
        scope_id=row.scope_id,
        actor=actor.name,
        reason=actor.reason,
        target_id=row.id,
        payload={
            "contentHash": row.content_hash,
            "state": row.state,
            "corrects": list(chosen),
            "matched_by": matched_by,
            "claim_of": row.claim_of,
            "session_id": row.session_id,
            "source_event_id": row.source_event_id,
            **extra,
        },
    )
