"""The projection framework: stored entries, targets (live or shadow), checkpoints and locks.

A projection applies stream entries in order and writes its rows and its checkpoint (the
stream sequence it reached) in one transaction; an entry at or below the checkpoint was
applied already and is skipped. Each projection has a code version: when the stored version
differs, the projection is rebuilt from its stream before it consumes again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from nats.aio.msg import Msg
from pydantic import ValidationError

from tavern_events.envelope import Model, SessionEvent
from tavern_events.errors import ContractError
from tavern_events.skips import SkipCounter
from tavern_events.union import CURRENT_VERSIONS, EVENT_MODELS, Decoded, decode_or_skip
from tavern_runtime.delivery import delivery
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

SCHEMA = "projector"
LOCK_NAMESPACE = 0x7A70  # first key of the projector's advisory locks
REDACTIONS_LOCK = 1
Conn = Any
SKIPPED = SkipCounter()
"""Events of unknown types or newer versions this process passed over."""
"""An asyncpg connection (asyncpg ships no type information)."""


@dataclass
class Entry:
    """One stored stream message: where it is, what it says, and its headers.

    `event` decodes once: None for an unknown type or newer version (skipped and counted) and
    for malformed data (then `error` says why; the runner dead-letters it).
    """

    stream_seq: int
    subject: str
    data: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    stored_at: datetime | None = None
    stored_ns: int | None = None
    error: str | None = field(default=None, init=False)

    @classmethod
    def of(cls, msg: Msg) -> Entry:
        stream_seq, stored_ns, _ = delivery(msg)
        return cls(stream_seq, msg.subject, msg.data, msg.headers or {}, None, stored_ns)

    def stored_time(self) -> datetime | None:
        if self.stored_at is None and self.stored_ns is not None:
            return datetime.fromtimestamp(self.stored_ns / 1e9, UTC)
        return self.stored_at

    @cached_property
    def event(self) -> Model | None:
        fast = _current(self.subject, self.data)
        if fast is not None:
            return fast
        try:
            found = decode_or_skip(self.data, SKIPPED)
        except ContractError as exc:
            self.error = str(exc)
            log.error("malformed_event", subject=self.subject, stream_seq=self.stream_seq)
            return None
        return found.event if isinstance(found, Decoded) else None

    def session_event(self) -> SessionEvent | None:
        event = self.event
        return event if isinstance(event, SessionEvent) else None


SHADOW_SUFFIX = ".rebuild"


def _current(subject: str, data: bytes) -> Model | None:
    """A session or ledger event of the current version, parsed and validated in one step
    (about twice as fast as `decode`); None sends the entry down the general path."""
    parts = subject.split(".")
    if len(parts) != 5 or parts[1] not in ("session", "ledger"):
        return None
    event_type = f"{parts[3]}/{parts[4]}"
    model = EVENT_MODELS.get(event_type)
    if model is None:
        return None
    try:
        event = model.model_validate_json(data)
    except ValidationError:
        return None
    return event if event.v == CURRENT_VERSIONS[event_type] and event.type == event_type else None


@dataclass(frozen=True)
class Target:
    """Where a projection writes: the live read model, or a shadow being rebuilt."""

    chats_dir: Path = Path("chats")
    shadow: bool = False

    def table(self, name: str) -> str:
        return f"{SCHEMA}.{name}_shadow" if self.shadow else f"{SCHEMA}.{name}"

    def as_shadow(self) -> Target:
        if self.shadow:
            return self
        return Target(self.chats_dir.with_name(self.chats_dir.name + SHADOW_SUFFIX), True)

    def as_live(self) -> Target:
        if not self.shadow:
            return self
        return Target(self.chats_dir.with_name(self.chats_dir.name.removesuffix(SHADOW_SUFFIX)))


class Projection:
    """Base of every projection. Subclasses set the class attributes and `apply`."""

    name: ClassVar[str]
    version: ClassVar[int]
    stream: ClassVar[str]
    filters: ClassVar[tuple[str, ...]]
    tables: ClassVar[tuple[str, ...]] = ()
    by_session: ClassVar[bool] = True
    """Whether one session's part can be rebuilt alone (session-log projections)."""

    async def apply(self, conn: Conn, entries: Sequence[Entry], target: Target) -> None:
        raise NotImplementedError

    async def finish(self, conn: Conn, target: Target) -> None:
        """After the last batch of a run (file projections flush here)."""

    async def after_commit(self, target: Target) -> None:
        """After the transaction of a batch committed (file projections drop stale caches)."""

    async def forget_sessions(self, conn: Conn, target: Target, session_ids: Sequence[str]) -> None:
        """Remove what these sessions contributed (before they are replayed)."""
        for table in self.tables:
            await conn.execute(
                f"DELETE FROM {target.table(table)} WHERE session_id = ANY($1::text[])",
                list(session_ids),
            )

    async def prepare_shadow(self, conn: Conn, target: Target) -> None:
        for table in self.tables:
            await conn.execute(f"DROP TABLE IF EXISTS {target.table(table)}")
            live = target.as_live().table(table)
            await conn.execute(f"CREATE TABLE {target.table(table)} (LIKE {live} INCLUDING ALL)")

    async def swap(self, conn: Conn, shadow: Target) -> None:
        """Make the shadow live (inside the caller's transaction)."""
        for table in self.tables:
            live = shadow.as_live().table(table)
            await conn.execute(f"DROP TABLE {live}")
            await conn.execute(f"ALTER TABLE {shadow.table(table)} RENAME TO {table}")

    async def drop_shadow(self, conn: Conn, shadow: Target) -> None:
        for table in self.tables:
            await conn.execute(f"DROP TABLE IF EXISTS {shadow.table(table)}")

    async def after_swap(self, shadow: Target) -> None:
        """After a swap committed (file projections move directories here)."""


def rows_json(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows as a JSON array, for one `INSERT ... SELECT FROM jsonb_populate_recordset(NULL::
    <table>, $1::jsonb)`: the table's row type reads each column (times in ISO 8601)."""
    return json.dumps(rows, default=_iso)


def _iso(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


# --- checkpoints and locks ------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    name: str
    version: int
    stream_seq: int


def lock_key(name: str) -> int:
    """A stable 32-bit advisory-lock key for a projection name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True)


async def lock_projection(conn: Conn, name: str) -> None:
    """Serialise writers of one projection (live batches, replays, standby replicas)."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_NAMESPACE, lock_key(name))


async def lock_redactions(conn: Conn, *, exclusive: bool) -> None:
    """Writers of redactible content share this lock; applying a redaction holds it alone."""
    kind = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    await conn.execute(f"SELECT {kind}($1, $2)", LOCK_NAMESPACE, REDACTIONS_LOCK)


async def read_checkpoint(conn: Conn, name: str) -> Checkpoint | None:
    row = await conn.fetchrow(
        "SELECT version, stream_seq FROM projector.checkpoints WHERE name = $1 FOR UPDATE", name
    )
    return None if row is None else Checkpoint(name, row["version"], row["stream_seq"])


async def write_checkpoint(conn: Conn, name: str, version: int, stream_seq: int) -> None:
    await conn.execute(
        """INSERT INTO projector.checkpoints (name, version, stream_seq, updated_at)
           VALUES ($1, $2, $3, now())
           ON CONFLICT (name) DO UPDATE
           SET version = EXCLUDED.version, stream_seq = EXCLUDED.stream_seq, updated_at = now()""",
        name,
        version,
        stream_seq,
    )


async def checkpoints(pool: Any) -> dict[str, Checkpoint]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT name, version, stream_seq FROM projector.checkpoints")
    return {r["name"]: Checkpoint(r["name"], r["version"], r["stream_seq"]) for r in rows}


def fresh(entries: Sequence[Entry], checkpoint: int) -> list[Entry]:
    """The entries past the checkpoint, in stream order (a redelivery applies nothing twice)."""
    return sorted((e for e in entries if e.stream_seq > checkpoint), key=lambda e: e.stream_seq)
