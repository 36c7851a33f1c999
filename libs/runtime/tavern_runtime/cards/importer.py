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
from nats.js.errors import NotFoundError

from tavern_events import subjects
from tavern_events.asset import AssetImported, AssetImportedPayload
from tavern_events.reach import LOCAL_OWNER
from tavern_events.streams import ASSETS
from tavern_events.union import Decoded, decode_or_skip, encode
from tavern_runtime import filemodes
from tavern_runtime.cards import cards, png
from tavern_runtime.cards.cards import AssetKind, ImportedAsset
from tavern_runtime.cards.errors import CardError

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


def read_assets(path: Path, kind: AssetKind | None = None) -> list[ImportedAsset]:
    """Every validated asset in a file (a persona backup holds several)."""
    return cards.decode_all(path.read_bytes(), kind, path.stem)


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
        owner=asset.owner,
    )
    return AssetImported(id=asset.event_id, asset_id=asset.asset_id, ts=now, payload=payload)


def store_image(data: bytes, data_dir: Path) -> str | None:
    """Keep a card's PNG under `<data dir>/assets/images/` (payloads stay small)."""
    if not png.is_png(data):
        return None
    digest = hashlib.sha256(data).hexdigest()
    relative = Path("assets") / "images" / f"{digest}.png"
    target = data_dir / relative
    filemodes.private_folder(target.parent)
    if not target.exists():
        filemodes.write_private(target, data)
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
    js: JetStreamContext,
    path: Path,
    data_dir: Path,
    kind: AssetKind | None = None,
    owner: str = LOCAL_OWNER,
) -> Published:
    """Validate `path` fully, keep its image, publish its event (the first, for a file that
    holds several assets: `import_all` reports each)."""
    return (await import_all(js, path, data_dir, kind, owner))[0]


async def import_all(
    js: JetStreamContext,
    path: Path,
    data_dir: Path,
    kind: AssetKind | None = None,
    owner: str = LOCAL_OWNER,
) -> list[Published]:
    """Validate every asset in `path` first, keep a card's image, then publish each one not
    already imported (the same content from the same source format) as `owner`'s."""
    data = await asyncio.to_thread(path.read_bytes)
    assets = [cards.owned_by(a, owner) for a in cards.decode_all(data, kind, path.stem)]
    locator = store_image(data, data_dir) if assets[0].kind == "character" else None
    now = datetime.now(UTC)
    found = []
    for asset in assets:
        event = event_for(asset, path.name[:255], locator, now)
        known = await known_import(js, asset)
        if known is not None:
            found.append(Published(asset, known[0], known[1], True))
            continue
        seq, duplicate = await publish(js, event)
        found.append(Published(asset, event, seq, duplicate))
    return found


async def known_import(
    js: JetStreamContext, asset: ImportedAsset
) -> tuple[AssetImported, int] | None:
    """The asset's last event and its ASSETS seq, when it imported this very content from
    the same source format (a re-import then changes nothing)."""
    subject = subjects.asset_event(asset.kind, asset.asset_id, "asset/imported")
    try:
        msg = await js.get_last_msg(ASSETS.name, subject.rpartition(".")[0] + ".>")
    except NotFoundError:
        return None
    result = decode_or_skip(msg.data or b"")
    if not isinstance(result, Decoded) or not isinstance(result.event, AssetImported):
        return None
    p = result.event.payload
    if (p.content_hash, p.source_format, p.owner) != (
        asset.content_hash,
        asset.source_format,
        asset.owner,
    ):
        return None
    return result.event, msg.seq or 0
