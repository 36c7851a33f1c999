"""Importable assets: character cards (V1, V2 `chara_card_v2`, V3 `chara_card_v3`, as JSON or
PNG with the card in a `tEXt` chunk), lorebooks and personas, validated all or nothing.

A card is stored as V3-shaped content `{spec, spec_version, data}` whatever it came as
(`source_format` says what it was); unknown fields are kept. Every present field must have
its spec type, else `CardError` names it (e.g. `data.character_book.entries.3.keys`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Any, Literal

from tavern_events.asset import content_hash_of
from tavern_events.reach import LOCAL_OWNER
from tavern_runtime.cards import charx, lorebook, png
from tavern_runtime.cards.errors import CardError
from tavern_runtime.cards.fields import Fields

AssetKind = Literal["character", "lorebook", "persona"]
V2, V3 = "chara_card_v2", "chara_card_v3"
TEXT_FIELDS = (
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "creator",
    "character_version",
)
V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
MAX_NAME = 200


@dataclass(frozen=True)
class ImportedAsset:
    """A validated asset, ready to become an `asset/imported` event."""

    kind: AssetKind
    asset_id: str
    name: str
    content: dict[str, Any]
    source_format: str
    owner: str = LOCAL_OWNER
    """The user it is imported for (`owned_by`); its id is derived from it."""

    @property
    def content_hash(self) -> str:
        return content_hash_of(self.content)

    @property
    def event_id(self) -> str:
        """Deterministic, so importing the same content twice is one event (`Nats-Msg-Id`);
        the same content from another source format is another event (it records that)."""
        key = f"{self.kind}/{self.asset_id}/{self.content_hash}/{self.source_format}"
        return f"imp-{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def asset_id_for(kind: str, name: str, owner: str = LOCAL_OWNER) -> str:
    """A subject-safe id stable per kind, name and owner: an ASCII slug plus a short hash.
    The `local` owner's ids are those made before owners existed; another user's card of the
    same name is another asset, so no import ever overwrites someone else's."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", ascii_name).strip("-").lower()[:40]
    key = f"{kind}/{name}" if owner == LOCAL_OWNER else f"{owner}:{kind}/{name}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{slug}-{digest}" if slug else f"{kind}-{digest}"


def owned_by(asset: ImportedAsset, owner: str) -> ImportedAsset:
    """`asset` imported for `owner`: its owner and the id derived from it."""
    return replace(asset, owner=owner, asset_id=asset_id_for(asset.kind, asset.name, owner))


# --- detection ------------------------------------------------------------------------------------


def decode_file(data: bytes, kind: AssetKind | None = None, name_hint: str = "") -> ImportedAsset:
    """Any importable file: PNG card, card JSON, lorebook JSON or persona JSON.

    `name_hint` (the file name's stem) names a world file that carries no name, as
    SillyTavern names world files by their file name."""
    if png.is_png(data):
        if kind not in (None, "character"):
            raise CardError("kind", f"a PNG file holds a character card, not a {kind}")
        return character(card_json_from_png(data))
    if charx.is_charx(data):
        if kind not in (None, "character"):
            raise CardError("kind", f"a CHARX file holds a character card, not a {kind}")
        card = character(charx.card_json(data))
        return replace(card, source_format=f"{card.source_format}+charx")
    raw = _json(data, "file")
    found = kind or detect(raw)
    if found == "character":
        return character(raw)
    if found == "lorebook":
        return lorebook_asset(raw, name_hint)
    return persona(raw)


def decode_all(
    data: bytes, kind: AssetKind | None = None, name_hint: str = ""
) -> list[ImportedAsset]:
    """Every asset in a file: one, or each persona of a SillyTavern persona backup."""
    if not png.is_png(data) and not charx.is_charx(data) and kind in (None, "persona"):
        raw = _json(data, "file")
        if is_persona_backup(raw):
            return persona_backup(raw)
    return [decode_file(data, kind, name_hint)]


def is_persona_backup(raw: Any) -> bool:
    """SillyTavern's Persona panel backup: `{personas, persona_descriptions, default_persona}`."""
    return isinstance(raw, dict) and isinstance(raw.get("personas"), dict)


def persona_backup(raw: dict[str, Any]) -> list[ImportedAsset]:
    """The personas of a backup (avatar -> name, with each avatar's description)."""
    described = raw.get("persona_descriptions")
    described = described if isinstance(described, dict) else {}
    found = []
    for avatar, name in raw["personas"].items():
        about: dict[str, Any] = described.get(avatar) or {}
        about = about if isinstance(about, dict) else {}
        where = f"personas.{avatar}"
        if not isinstance(name, str) or not name.strip():
            raise CardError(where, "expected the persona's name")
        fields = {"name": name, "description": about.get("description", "")}
        if isinstance(about.get("position"), int):
            fields["position"] = about["position"]
        asset = persona(fields)
        found.append(replace(asset, source_format="st_persona_backup"))
    if not found:
        raise CardError("personas", "the backup holds no personas")
    return found


def detect(raw: Any) -> AssetKind:
    if not isinstance(raw, dict):
        raise CardError("file", "expected a JSON object")
    if is_persona_backup(raw):
        return "persona"
    if "spec" in raw or "data" in raw or "first_mes" in raw:
        return "character"
    if "entries" in raw:
        return "lorebook"
    if "name" in raw and "description" in raw:
        return "persona"
    raise CardError("file", "not a character card, lorebook or persona (no spec, entries or name)")


def card_json_from_png(data: bytes) -> Any:
    """The card JSON in a PNG: `ccv3` preferred, else `chara` (base64 UTF-8 JSON)."""
    texts = png.text_chunks(png.read_chunks(data))
    for keyword in ("ccv3", "chara"):
        if keyword in texts:
            return _json(_base64(texts[keyword], f"png.{keyword}"), f"png.{keyword}")
    raise CardError("png", "no character data (no tEXt chunk named ccv3 or chara)")


def _base64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise CardError(where, "not valid base64") from None


def _json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise CardError(where, "not UTF-8 text") from None
    except ValueError as exc:
        raise CardError(where, f"not valid JSON ({exc})") from None


# --- characters -----------------------------------------------------------------------------------


def character(raw: Any) -> ImportedAsset:
    """A card of any version, as V3-shaped content."""
    top = Fields(raw, "")
    spec = top.get("spec")
    if spec in (V2, V3):
        data = top.child("data")
        if data is None:
            raise CardError("data", "required for a " + str(spec) + " card")
        content = _card(data, spec == V3)
        source = str(spec)
    elif top.has("spec"):
        raise CardError("spec", f"unsupported card spec {spec!r} (expected {V2} or {V3})")
    else:
        content = _card(_v1(top), v3=False)
        source = "chara_card_v1"
    name = content["data"]["name"]
    return ImportedAsset("character", asset_id_for("character", name), name, content, source)


def _v1(top: Fields) -> Fields:
    missing = [f for f in V1_FIELDS if f not in top.raw]
    if missing:
        raise CardError(missing[0], "required in a V1 card (no spec field)")
    return Fields(top.raw, "")


def _card(data: Fields, v3: bool) -> dict[str, Any]:
    prefix = "data." if data.path else ""
    fields: dict[str, Any] = dict(data.raw)
    fields["name"] = _name(data)
    for name in TEXT_FIELDS:
        fields[name] = data.string(name)
    fields["alternate_greetings"] = data.strings("alternate_greetings")
    fields["tags"] = data.strings("tags")
    fields["extensions"] = data.mapping("extensions")
    fields["group_only_greetings"] = data.strings("group_only_greetings")
    fields |= _v3_fields(data) if v3 else {}
    if data.has("character_book"):
        lorebook.character_book(data.get("character_book"), f"{prefix}character_book", "")
    for key in ("spec", "spec_version", "data") if not prefix else ():
        fields.pop(key, None)
    return {"spec": V3, "spec_version": "3.0", "data": fields}


def _name(data: Fields) -> str:
    name = data.string("name").strip()
    if not name:
        raise data.fail("name", "must be a non-empty string")
    if len(name) > MAX_NAME:
        raise data.fail("name", f"longer than {MAX_NAME} characters")
    return name


def _v3_fields(data: Fields) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if data.has("nickname"):
        found["nickname"] = data.string("nickname")
    if data.has("creator_notes_multilingual"):
        notes = data.child("creator_notes_multilingual")
        assert notes is not None
        found["creator_notes_multilingual"] = {k: notes.string(k) for k in notes.raw}
    if data.has("source"):
        found["source"] = data.strings("source")
    for stamp in ("creation_date", "modification_date"):
        if data.has(stamp):
            found[stamp] = data.opt_number(stamp, 0)
    if data.has("assets"):
        found["assets"] = _assets(data)
    return found


def _assets(data: Fields) -> list[dict[str, Any]]:
    value = data.get("assets")
    if not isinstance(value, list):
        raise data.fail("assets", "expected a list of {type, uri, name, ext}")
    assets = []
    for index, item in enumerate(value):
        asset = Fields(item, f"{data.where('assets')}.{index}")
        for key in ("type", "uri", "name", "ext"):
            asset.string(key)
        assets.append(dict(asset.raw))
    return assets


def embedded_book(content: dict[str, Any]) -> dict[str, Any] | None:
    """The normalised character book of stored card content, if it has one."""
    data = content.get("data")
    if not isinstance(data, dict) or data.get("character_book") is None:
        return None
    name = str(data.get("name", ""))
    return lorebook.character_book(data["character_book"], "data.character_book", name)


# --- lorebooks and personas -----------------------------------------------------------------------


def lorebook_asset(raw: Any, name_hint: str = "") -> ImportedAsset:
    """A standalone world file (entries keyed by uid) or a bare character book (entries list)."""
    top = Fields(raw, "")
    name = (top.string("name").strip() or name_hint.strip() or "Lorebook")[:MAX_NAME]
    entries = top.get("entries")
    if isinstance(entries, list) and any(isinstance(e, dict) and "keys" in e for e in entries):
        book = lorebook.character_book(raw, "", name)
        source = "character_book"
    else:
        book = lorebook.world_file(raw, name)
        source = "st_world_info"
    return ImportedAsset("lorebook", asset_id_for("lorebook", name), name, book, source)


def persona(raw: Any) -> ImportedAsset:
    """A user persona: `{name, description, position?}` (SillyTavern persona description)."""
    top = Fields(raw, "")
    name = _name(top)
    content = {
        "name": name,
        "description": top.string("description"),
        "position": top.number("position", 0, 0, 4),
        "title": top.string("title"),
    }
    return ImportedAsset("persona", asset_id_for("persona", name), name, content, "persona")
