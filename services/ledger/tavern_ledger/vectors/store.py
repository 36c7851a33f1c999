"""asyncpg queries of `ledger.evidence_vector`. Vectors travel as flat `real[]` parameters
(binary, no text formatting of 512 floats a row) and are cast to `vector` in the statement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tavern_ledger.evidence import Conn

READABLE = "('active', 'superseded')"
"""The states recall may read (`evidence.rows.INDEXED_STATES`): the only rows with a vector."""
CLAIMS = "coalesce(e.claim_kind, '') NOT IN ('message', 'question', 'chatter')"
"""The rows recall injects (`evidence.rows.RECALLABLE`): claims, not the messages kept whole
beside them, nor questions and small talk."""

WRITE = f"""
WITH readable AS (
    SELECT e.id, e.scope_id FROM ledger.evidence e
    WHERE e.id = ANY($1::text[]) AND e.state IN {READABLE} AND {CLAIMS}
    ORDER BY e.id
    FOR SHARE OF e
), given AS (
    SELECT ids.id, ($2::real[])[(ids.n - 1) * $3 + 1 : ids.n * $3]::vector AS embedding
    FROM unnest($1::text[]) WITH ORDINALITY AS ids (id, n)
)
INSERT INTO ledger.evidence_vector (evidence_id, scope_id, model, embedding)
SELECT r.id, r.scope_id, $4, g.embedding FROM readable r JOIN given g ON g.id = r.id
ON CONFLICT (evidence_id) DO UPDATE
SET model = excluded.model, embedding = excluded.embedding, created_at = now()
WHERE ledger.evidence_vector.model <> excluded.model
"""
"""Rows are locked while their vectors go in: a redaction committing meanwhile either waits
and then drops the vector (its trigger), or went first and the row is no longer readable."""

NEAREST_EXACT = """
SELECT evidence_id, distance FROM (
    SELECT evidence_id, embedding <=> $2::real[]::vector AS distance
    FROM ledger.evidence_vector WHERE scope_id = $1 AND model = $3
    OFFSET 0
) scoped
ORDER BY distance LIMIT $4
"""
"""Every distance of the scope (the subquery keeps the planner off the graph)."""

NEAREST_GRAPH = """
SELECT evidence_id, embedding <=> $2::real[]::vector AS distance
FROM ledger.evidence_vector WHERE scope_id = $1 AND model = $3
ORDER BY embedding <=> $2::real[]::vector LIMIT $4
"""

MISSING = f"""
SELECT e.id, e.content FROM ledger.evidence e
LEFT JOIN ledger.evidence_vector v ON v.evidence_id = e.id
WHERE e.state IN {READABLE} AND {CLAIMS} AND (v.evidence_id IS NULL OR v.model <> $1)
  AND e.id > $2
ORDER BY e.id LIMIT $3
"""

MISSING_COUNT = f"""
SELECT count(*) FROM ledger.evidence e
LEFT JOIN ledger.evidence_vector v ON v.evidence_id = e.id
WHERE e.state IN {READABLE} AND {CLAIMS} AND (v.evidence_id IS NULL OR v.model <> $1)
"""


@dataclass(frozen=True)
class Unembedded:
    evidence_id: str
    content: str


async def available(conn: Conn) -> bool:
    """The table exists (made now if the extension appeared since the migration ran)."""
    return bool(await conn.fetchval("SELECT ledger.ensure_evidence_vector()"))


async def drop_graph(conn: Conn) -> None:
    await conn.execute("DROP INDEX IF EXISTS ledger.evidence_vector_hnsw")


async def build_graph(conn: Conn) -> None:
    """The HNSW index, built over every vector (nothing when it exists)."""
    await conn.execute("SELECT ledger.ensure_evidence_vector_graph()")


async def write(conn: Conn, ids: Sequence[str], flat: list[float], model: str) -> None:
    """Store the vectors of `ids` (`flat` holds them one after another) for the rows that are
    still readable; a row's vector by another model is replaced."""
    if ids:
        await conn.execute(WRITE, list(ids), flat, len(flat) // len(ids), model)


async def nearest(
    conn: Conn, scope_id: str, vector: list[float], model: str, limit: int, *, exact: bool
) -> list[tuple[str, float]]:
    """The `limit` vectors of the scope closest to `vector`: (evidence id, cosine distance).
    Through the graph, pgvector's iterative scan reads on until `limit` rows of the scope are
    found (its order then is nearly sorted: the caller sorts)."""
    if exact:
        rows = await conn.fetch(NEAREST_EXACT, scope_id, vector, model, limit)
    else:
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        rows = await conn.fetch(NEAREST_GRAPH, scope_id, vector, model, limit)
    return [(r["evidence_id"], float(r["distance"])) for r in rows]


async def scope_size(conn: Conn, scope_id: str, model: str) -> int:
    found = await conn.fetchval(
        "SELECT count(*) FROM ledger.evidence_vector WHERE scope_id = $1 AND model = $2",
        scope_id,
        model,
    )
    return int(found)


async def missing(conn: Conn, model: str, after: str, limit: int) -> list[Unembedded]:
    """Readable rows with no vector by `model`, in id order after `after`."""
    rows = await conn.fetch(MISSING, model, after, limit)
    return [Unembedded(r["id"], r["content"]) for r in rows]


async def missing_count(conn: Conn, model: str) -> int:
    return int(await conn.fetchval(MISSING_COUNT, model))
