"""The lexical index's version: postings built by an older tokeniser are rebuilt, once, before
ingestion starts (a query's terms must be made the way the postings were)."""

from __future__ import annotations

from tavern_ledger.domain.claims import CLAIMS_VERSION, claim_domain
from tavern_ledger.domain.text import TERMS_VERSION, terms
from tavern_ledger.evidence import Conn
from tavern_ledger.evidence.rows import INDEXED_KINDS

BATCH = 2000


async def rebuild_postings(conn: Conn, version: int = TERMS_VERSION) -> int | None:
    """Rebuild `ledger.evidence_term` from the readable evidence when it was built by a
    tokeniser older than `version`; the number of rows indexed, or None when it was current.
    One transaction: ingestion (and another replica doing the same) waits on the locks."""
    async with conn.transaction():
        stored = await conn.fetchval("SELECT terms_version FROM ledger.lexicon FOR UPDATE")
        if stored is not None and stored >= version:
            return None
        await conn.execute("LOCK TABLE ledger.evidence_term IN ACCESS EXCLUSIVE MODE")
        await conn.execute("DELETE FROM ledger.evidence_term")
        indexed = 0
        batch: list[tuple[str, str, object, str]] = []
        async for row in conn.cursor(
            "SELECT id, scope_id, observed_at, content FROM ledger.evidence "
            f"WHERE state IN ('active', 'superseded') AND {INDEXED_KINDS}",
            prefetch=BATCH,
        ):
            scope, at, evidence_id = row["scope_id"], row["observed_at"], row["id"]
            batch += [(scope, term, at, evidence_id) for term in terms(row["content"])]
            indexed += 1
            if len(batch) >= BATCH * 8:
                await _copy(conn, batch)
                batch = []
        await _copy(conn, batch)
        await conn.execute(
            "INSERT INTO ledger.lexicon (id, terms_version) VALUES (true, $1) "
            "ON CONFLICT (id) DO UPDATE SET terms_version = excluded.terms_version",
            version,
        )
        return indexed


async def _copy(conn: Conn, records: list[tuple[str, str, object, str]]) -> None:
    if records:
        await conn.copy_records_to_table(
            "evidence_term",
            schema_name="ledger",
            records=records,
            columns=("scope_id", "term", "observed_at", "evidence_id"),
        )


async def reclassify_claims(conn: Conn, version: int = CLAIMS_VERSION) -> int | None:
    """File people's stored messages as statements or directives again when they were filed
    by older rules than `version`; the number of rows changed, or None when current."""
    async with conn.transaction():
        stored = await conn.fetchval("SELECT claims_version FROM ledger.lexicon FOR UPDATE")
        if stored is not None and stored >= version:
            return None
        changed: list[tuple[str, str]] = []
        async for row in conn.cursor(
            "SELECT id, content, claim_domain FROM ledger.evidence "
            "WHERE source_class IN ('user_input', 'user_correction')",
            prefetch=BATCH,
        ):
            domain = claim_domain(row["content"])
            if domain != row["claim_domain"]:
                changed.append((row["id"], domain))
        await conn.executemany(
            "UPDATE ledger.evidence SET claim_domain = $2, updated_at = now() WHERE id = $1",
            changed,
        )
        await conn.execute(
            "INSERT INTO ledger.lexicon (id, terms_version, claims_version) VALUES (true, $1, $2) "
            "ON CONFLICT (id) DO UPDATE SET claims_version = excluded.claims_version",
            TERMS_VERSION,
            version,
        )
        return len(changed)
