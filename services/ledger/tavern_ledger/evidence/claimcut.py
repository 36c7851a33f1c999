"""Claims for messages stored before claims were cut: at start, once, a person's messages
without claims are filed as messages and cut into claims (`domain.admission.cut`), which take
the message's state and validity; a correction's claims take over the lineage of what the
message replaced. Idempotent: claim ids derive from the message and the claim's text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tavern_ledger.domain.admission import PEOPLE, cut
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.domain.segments import FACTUAL, SEGMENTS_VERSION
from tavern_ledger.domain.text import TERMS_VERSION
from tavern_ledger.evidence import Conn
from tavern_ledger.evidence import rows as evidence
from tavern_runtime.logs import get_logger

log = get_logger(__name__)
BATCH = 1000
_PEOPLE_SQL = ", ".join(f"'{c}'" for c in sorted(PEOPLE))


async def cut_stored_messages(conn: Conn, version: int = SEGMENTS_VERSION) -> int | None:
    """Cut the stored messages of people that have no claims yet, when claims were cut by an
    older version than `version` (or never); the number of messages cut, or None when current.
    One transaction: ingestion (and another replica doing the same) waits on the lock."""
    async with conn.transaction():
        stored = await conn.fetchval("SELECT segments_version FROM ledger.lexicon FOR UPDATE")
        if stored is not None and stored >= version:
            return None
        claims_of: dict[str, list[EvidenceRow]] = {}
        lineage: list[EvidenceRow] = []
        done = 0
        while batch := await _uncut(conn):
            for message in batch:
                claims_of[message.id] = await _cut_one(conn, message)
                if message.supersedes:
                    lineage.append(message)
            done += len(batch)
            log.info("claims_cut_progress", messages=done)
        await _carry_lineage(conn, lineage, claims_of)
        await conn.execute(
            "INSERT INTO ledger.lexicon (id, terms_version, segments_version) VALUES (true, $1, $2)"
            " ON CONFLICT (id) DO UPDATE SET segments_version = excluded.segments_version",
            TERMS_VERSION,
            version,
        )
        return done


async def _uncut(conn: Conn) -> list[EvidenceRow]:
    found = await conn.fetch(
        f"SELECT {evidence.COLUMNS} FROM ledger.evidence WHERE claim_kind IS NULL "
        f"AND source_class IN ({_PEOPLE_SQL}) AND ingest = 'session-event' "
        f"ORDER BY created_at, id LIMIT {BATCH}"
    )
    return [evidence.row_of(r) for r in found]


async def _cut_one(conn: Conn, message: EvidenceRow) -> list[EvidenceRow]:
    kept, claims = cut(message)
    if evidence.indexed(message):  # a message is no longer read by recall: its claims are
        await evidence.remove_postings(conn, message)
    await evidence.save_change(conn, kept)
    await evidence.insert(conn, claims)
    return claims


async def _carry_lineage(
    conn: Conn, corrections: Sequence[EvidenceRow], claims_of: dict[str, list[EvidenceRow]]
) -> None:
    """A correction that replaced whole messages now replaced their claims of fact."""
    for message in corrections:
        ended = [
            c.id
            for old in message.supersedes
            for c in claims_of.get(old, [])
            if c.claim_kind in FACTUAL
        ]
        for claim in claims_of.get(message.id, []):
            if claim.claim_kind == "correction" and ended:
                await evidence.save_change(conn, _with_lineage(claim, ended))


def _with_lineage(claim: EvidenceRow, ended: Sequence[str]) -> EvidenceRow:
    return replace(claim, supersedes=tuple(dict.fromkeys((*claim.supersedes, *ended))))
