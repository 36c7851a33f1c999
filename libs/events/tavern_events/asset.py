"""Asset events (ASSETS stream): character cards, lorebooks, personas, presets.

Every asset belongs to the user who imported or made it (`owner`, as `session/created` records
a session's). Events written before owners were recorded read as `local`, the default owner of
a single-user install, so a replay rebuilds the same owners.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import Field, JsonValue

from tavern_events.envelope import AssetEvent, Id, Payload
from tavern_events.parts import Sha256Hex
from tavern_events.reach import LOCAL_OWNER

AssetKind = Literal["character", "lorebook", "persona", "preset"]


def content_hash_of(content: dict[str, JsonValue]) -> str:
    """sha256 hex of the canonical JSON of `content` (sorted keys, compact, UTF-8)."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class AssetImportedPayload(Payload):
    kind: AssetKind
    name: str = Field(min_length=1, max_length=200)
    content: dict[str, JsonValue]
    content_hash: Sha256Hex
    source_format: str | None = Field(default=None, max_length=64)
    """What was imported: `chara_card_v3`, `chara_card_v2`, `st_world_info`..."""
    filename: str | None = Field(default=None, max_length=255)
    image_locator: str | None = Field(default=None, max_length=1024)
    owner: Id = LOCAL_OWNER
    """The user the asset belongs to (`local` for the operator's and for older events)."""


class AssetImported(AssetEvent):
    """An asset entered the tavern (idempotent by content hash)."""

    type: Literal["asset/imported"] = "asset/imported"
    payload: AssetImportedPayload


class AssetUpdatedPayload(Payload):
    kind: AssetKind
    name: str = Field(min_length=1, max_length=200)
    content: dict[str, JsonValue]
    content_hash: Sha256Hex
    previous_hash: Sha256Hex | None = None
    image_locator: str | None = Field(default=None, max_length=1024)
    owner: Id = LOCAL_OWNER
    """Who the asset belongs to; an update never moves an asset to another owner."""


class AssetUpdated(AssetEvent):
    """An asset was edited; `content` is the whole new content."""

    type: Literal["asset/updated"] = "asset/updated"
    payload: AssetUpdatedPayload


class AssetRemovedPayload(Payload):
    kind: AssetKind
    name: str = Field(min_length=1, max_length=200)
    content_hash: Sha256Hex | None = None
    reason: str | None = Field(default=None, max_length=500)
    owner: Id = LOCAL_OWNER


class AssetRemoved(AssetEvent):
    """An asset was removed."""

    type: Literal["asset/removed"] = "asset/removed"
    payload: AssetRemovedPayload
