"""Where a durable's reader records the last stream sequence it applied, so that a repaired
durable replays from there (`tavern_runtime.provision.ReplayFrom`).

A durable whose config was changed behind provisioning's back (issue 48: a filter that matched
nothing) passed over every message stored meanwhile; putting its config back does not bring
them back. Its reader's checkpoint does: it is written in the same transaction as what the
reader applied, and the reader applies a message again idempotently, so delivering everything
after the checkpoint once more loses nothing and doubles nothing.

Read as the administrator of the database (`tavern init`, `tavern up`): the tables are their
services' contracts with the operator, named here and nowhere else in the CLI.
"""

from __future__ import annotations

import asyncpg

from tavern_runtime.logs import get_logger
from tavern_runtime.provision import ConsumerSpec, ReplayFrom

log = get_logger(__name__)

CHECKPOINTS: dict[str, str] = {
    "ledger-ingest": "SELECT stream_seq FROM ledger.ingest_checkpoint WHERE consumer = $1",
}
"""Durable -> the query of its reader's checkpoint (the highest stream sequence it committed;
no row: it committed nothing yet). The ledger's ingestion is idempotent by content hash."""

CONNECT_TIMEOUT_S = 5.0


async def checkpoint(database_url: str, spec: ConsumerSpec) -> int | None:
    """The last stream sequence `spec`'s reader applied (0: none yet), None when it keeps no
    checkpoint this module knows of or its table does not exist."""
    query = CHECKPOINTS.get(spec.name)
    if query is None or not database_url:
        return None
    conn = await asyncpg.connect(database_url, timeout=CONNECT_TIMEOUT_S)
    try:
        found = await conn.fetchval(query, spec.name)
    except asyncpg.UndefinedTableError:  # its service never migrated: it applied nothing
        return 0
    finally:
        await conn.close()
    return int(found or 0)


def replay_from(database_url: str) -> ReplayFrom:
    """For provisioning: a repaired durable delivers from its reader's checkpoint + 1."""

    async def start(spec: ConsumerSpec) -> int | None:
        applied = await checkpoint(database_url, spec)
        if applied is None:
            return None
        log.info("replay_point", consumer=spec.name, checkpoint=applied)
        return applied + 1

    return start
