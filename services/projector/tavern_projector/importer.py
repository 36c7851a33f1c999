"""`tavern card import`: validate a file completely, then publish one `asset/imported` event.

One event per import (a card's embedded lorebook travels inside it), with a deterministic id
as `Nats-Msg-Id`: nothing is ever half-imported, and importing the same file twice is one event.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from nats.js import JetStreamContext
from nats.js.api import Header

from tavern_events import subjects
from tavern_events.asset import AssetImported, AssetImportedPayload
from tavern_events.streams import ASSETS
from tavern_events.union import encode
from tavern_projector.domain import cards, png
from tavern_projector.domain.cards import AssetKind, ImportedAsset
from tavern_projector.errors import CardError

MAX_EVENT_BYTES = 900_000
"""Stay under NATS's default 1 MiB payload limit."""


@dataclass(frozen=True)
class Published:
    asset: ImportedAsset
    event: AssetImported
    stream_seq: int
    duplicate: bool


def read_asset(path: Path, kind: AssetKind | None = None) -> ImportedAsset:
    """The validated asset in a file (raises `CardError` naming the bad field)."""
    return cards.decode_file(path.read_bytes(), kind, path.stem)


def event_for(
    asset: ImportedAsset, filename: str | None, image_locator: str | None, now: datetime
) -> AssetImported:
    payload = AssetImportedPayload(
        kind=asset.kind,
        name=asset.name,
        content=asset.content,
        content_hash=asset.content_hash,
        source_format=asset.source_format,
        filename=filename,
        image_locator=image_locator,
    )
    return AssetImported(id=asset.event_id, asset_id=asset.asset_id, ts=now, payload=payload)


def store_image(data: bytes, data_dir: Path) -> str | None:
    """Keep a card's PNG under `<data dir>/assets/images/` (payloads stay small)."""
    if not png.is_png(data):
        return None
    digest = hashlib.sha256(data).hexdigest()
    relative = Path("assets") / "images" / f"{digest}.png"
    target = data_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.write_bytes(data)
    return relative.as_posix()


async def publish(js: JetStreamContext, event: AssetImported) -> tuple[int, bool]:
    body = encode(event)
    if len(body) > MAX_EVENT_BYTES:
        raise CardError("file", f"{len(body)} bytes once encoded: over {MAX_EVENT_BYTES}")
    subject = subjects.asset_event(event.payload.kind, event.asset_id, event.type)
    ack = await js.publish(
        subject, body, stream=ASSETS.name, headers={Header.MSG_ID.value: event.id}, timeout=5
    )
    return ack.seq, bool(ack.duplicate)


async def import_file(
    js: JetStreamContext, path: Path, data_dir: Path, kind: AssetKind | None = None
) -> Published:
    """Validate `path` fully, keep its image, publish its event."""
    data = await asyncio.to_thread(path.read_bytes)
    asset = cards.decode_file(data, kind, path.stem)
    locator = store_image(data, data_dir) if asset.kind == "character" else None
    event = event_for(asset, path.name[:255], locator, datetime.now(UTC))
    seq, duplicate = await publish(js, event)
    return Published(asset, event, seq, duplicate)
