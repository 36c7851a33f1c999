"""Asset read models from the ASSETS stream: characters (with their embedded lorebooks),
lorebooks and personas, each with the user it belongs to (`owner`, from its event). An import
of content already held changes nothing, and an asset never changes owner once projected."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from tavern_events import subjects
from tavern_events.asset import AssetImported, AssetImportedPayload, AssetRemoved, AssetUpdated
from tavern_events.envelope import AssetEvent
from tavern_events.streams import ASSETS
from tavern_projector.domain import stformat
from tavern_projector.errors import CardError
from tavern_projector.framework import Conn, Entry, Projection, Target
from tavern_runtime.cards import cards, lorebook
from tavern_runtime.logs import get_logger

log = get_logger(__name__)


class AssetsProjection(Projection):
    name: ClassVar[str] = "assets"
    version: ClassVar[int] = 2
    """2: characters keep the file stem they were imported from."""
    stream: ClassVar[str] = ASSETS.name
    filters: ClassVar[tuple[str, ...]] = (subjects.ASSETS_ALL,)
    tables: ClassVar[tuple[str, ...]] = ("characters", "lorebooks", "personas")
    by_session: ClassVar[bool] = False

    async def apply(self, conn: Conn, entries: Sequence[Entry], target: Target) -> None:
        for entry in entries:
            event = entry.event
            if isinstance(event, AssetImported | AssetUpdated):
                await self._upsert(conn, target, event)
            elif isinstance(event, AssetRemoved):
                await self._remove(conn, target, event)

    async def _upsert(
        self, conn: Conn, target: Target, event: AssetImported | AssetUpdated
    ) -> None:
        kind = event.payload.kind
        if kind == "character":
            await upsert_character(conn, target, event)
        elif kind == "lorebook":
            book = lorebook.normalised(event.payload.content)
            await upsert_book(conn, target, event, event.asset_id, None, book)
        elif kind == "persona":
            await upsert_persona(conn, target, event)

    async def _remove(self, conn: Conn, target: Target, event: AssetRemoved) -> None:
        table = {"character": "characters", "lorebook": "lorebooks", "persona": "personas"}
        name = table.get(event.payload.kind)
        if name is None:
            return
        await conn.execute(f"DELETE FROM {target.table(name)} WHERE asset_id = $1", event.asset_id)
        if name == "characters":
            await conn.execute(
                f"DELETE FROM {target.table('lorebooks')} WHERE owner_id = $1", event.asset_id
            )


async def upsert_character(conn: Conn, target: Target, event: AssetImported | AssetUpdated) -> None:
    p, table = event.payload, target.table("characters")
    source = p.source_format if isinstance(p, AssetImportedPayload) else None
    stem = stformat.card_stem(p.filename) if isinstance(p, AssetImportedPayload) else None
    await conn.execute(
        f"""INSERT INTO {table} (asset_id, name, content, content_hash,
               source_format, image_locator, updated_at, file_stem, owner)
            VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (asset_id) DO UPDATE SET name = EXCLUDED.name,
               content = EXCLUDED.content, content_hash = EXCLUDED.content_hash,
               source_format = COALESCE(EXCLUDED.source_format, {table}.source_format),
               image_locator = EXCLUDED.image_locator, updated_at = EXCLUDED.updated_at,
               file_stem = COALESCE(EXCLUDED.file_stem, {table}.file_stem)
            WHERE {table}.content_hash <> EXCLUDED.content_hash
               OR {table}.source_format IS DISTINCT FROM
                  COALESCE(EXCLUDED.source_format, {table}.source_format)""",
        event.asset_id,
        p.name,
        json.dumps(p.content),
        p.content_hash,
        source,
        p.image_locator,
        event.ts,
        stem,
        p.owner,
    )
    book = _embedded(event)
    await conn.execute(
        f"DELETE FROM {target.table('lorebooks')} WHERE owner_id = $1", event.asset_id
    )
    if book is not None:
        await upsert_book(conn, target, event, event.asset_id, event.asset_id, book)


def _embedded(event: AssetImported | AssetUpdated) -> dict[str, Any] | None:
    try:
        return cards.embedded_book(event.payload.content)
    except CardError as exc:
        log.error("embedded_book_invalid", asset_id=event.asset_id, error=exc.message)
        return None


async def upsert_book(
    conn: Conn,
    target: Target,
    event: AssetEvent,
    asset_id: str,
    owner_id: str | None,
    book: dict[str, Any],
) -> None:
    name = book.get("name") or getattr(event.payload, "name", asset_id)
    await conn.execute(
        f"""INSERT INTO {target.table("lorebooks")} (asset_id, name, owner_id, book,
               content_hash, updated_at, owner)
            VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7)
            ON CONFLICT (asset_id) DO UPDATE SET name = EXCLUDED.name,
               owner_id = EXCLUDED.owner_id, book = EXCLUDED.book,
               content_hash = EXCLUDED.content_hash, updated_at = EXCLUDED.updated_at""",
        asset_id,
        name,
        owner_id,
        json.dumps(book),
        event.payload.content_hash,
        event.ts,
        event.payload.owner,
    )


async def upsert_persona(conn: Conn, target: Target, event: AssetImported | AssetUpdated) -> None:
    p = event.payload
    await conn.execute(
        f"""INSERT INTO {target.table("personas")} (asset_id, name, content, content_hash,
               updated_at, owner)
            VALUES ($1, $2, $3::jsonb, $4, $5, $6)
            ON CONFLICT (asset_id) DO UPDATE SET name = EXCLUDED.name,
               content = EXCLUDED.content, content_hash = EXCLUDED.content_hash,
               updated_at = EXCLUDED.updated_at""",
        event.asset_id,
        p.name,
        json.dumps(p.content),
        p.content_hash,
        event.ts,
        p.owner,
    )
