"""`tavern st import PATH`: what a SillyTavern folder holds, and bringing it in.

PATH is one chat file (`*.jsonl`), a character's chats folder (`chats/<card stem>/`), or a
whole user data folder (`data/<user>/`: `characters/`, `worlds/`, `settings.json` personas,
`chats/`). Cards, lorebooks and personas are published to ASSETS as `tavern card import` does;
each chat becomes a session log (`tavern_runtime.chatimport`). Every file gets a row in the
report: imported, skipped (already there, or not imported by design) or refused, with why.
A group chat (`group chats/<chat id>.jsonl`) becomes a group session bound by the definition in
`groups/` that lists it (`tavern_runtime.stgroups`); its member cards must be in the folder.
SillyTavern's own `backups/` are copies of the chats and are left alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, Literal

import nats.errors
from nats.aio.client import Client

from tavern_events import subjects
from tavern_runtime import chatimport, stchat, stgroups
from tavern_runtime.cards import cards, importer
from tavern_runtime.chatimport import ChatTarget, Status
from tavern_runtime.errors import TavernError
from tavern_runtime.sessionlog import SessionLogReader, SessionLogWriter

ItemKind = Literal["character", "lorebook", "persona", "personas", "chat", "group", "group chat"]
CARD_SUFFIXES = (".png", ".json", ".charx")
"""SillyTavern keeps cards as PNG; JSON and CHARX cards are read too."""
NO_GROUP = "no group definition in groups/ lists this chat"


@dataclass(frozen=True)
class Item:
    kind: ItemKind
    path: Path
    source: str
    """The path as the report names it (relative to PATH's folder)."""
    stem: str = ""
    """A chat's character folder: the card's file stem."""


Shown = Status | Literal["valid"]
"""What a file's row says; `valid` when only checked (`--check`)."""


@dataclass(frozen=True)
class Row:
    source: str
    kind: str
    status: Shown
    reason: str


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    def add(self, source: str, kind: str, status: Shown, reason: str) -> None:
        self.rows.append(Row(source, kind, status, reason))

    def count(self, status: Shown) -> int:
        return sum(1 for row in self.rows if row.status == status)


class NotImportable(TavernError):
    code = "invalid"


# --- what a path holds ----------------------------------------------------------------------------


def discover(path: Path) -> list[Item]:
    """The importable files under `path`, assets before chats; raises `NotImportable`."""
    if path.is_file():
        if path.suffix.lower() != ".jsonl":
            raise NotImportable(f"{path.name}: not a chat file (*.jsonl)")
        return [Item("chat", path, f"{path.parent.name}/{path.name}", path.parent.name)]
    if not path.is_dir():
        raise NotImportable(f"{path}: no such file or folder")
    if any((path / name).exists() for name in ("chats", "characters", "settings.json")):
        return _user_folder(path)
    chats = sorted(path.glob("*.jsonl"))
    if not chats:
        raise NotImportable(
            f"{path}: not a chat file, a character's chats folder or a SillyTavern user data "
            "folder (no *.jsonl, chats/, characters/ or settings.json)"
        )
    return [Item("chat", p, f"{path.name}/{p.name}", path.name) for p in chats]


def _user_folder(root: Path) -> list[Item]:
    def rel(p: Path) -> str:
        return p.relative_to(root).as_posix()

    items = [
        Item("character", p, rel(p), p.stem)
        for p in _files(root / "characters")
        if p.suffix.lower() in CARD_SUFFIXES
    ]
    items += [Item("lorebook", p, rel(p)) for p in _files(root / "worlds") if p.suffix == ".json"]
    if (root / "settings.json").is_file():
        items.append(Item("personas", root / "settings.json", "settings.json"))
    if (root / "personas.json").is_file():  # a persona backup, as `tavern st export` writes
        items.append(Item("persona", root / "personas.json", "personas.json"))
    for folder in sorted(p for p in (root / "chats").glob("*") if p.is_dir()):
        items += [Item("chat", p, rel(p), folder.name) for p in sorted(folder.glob("*.jsonl"))]
    items += [Item("group", p, rel(p)) for p in _files(root / "groups") if p.suffix == ".json"]
    chats = [p for p in _files(root / "group chats") if p.suffix == ".jsonl"]
    items += [Item("group chat", p, rel(p), p.stem) for p in chats]
    return items


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []


def personas_of(settings: Any) -> list[dict[str, Any]]:
    """The personas in SillyTavern's settings.json (`power_user.personas`: avatar -> name, and
    `power_user.persona_descriptions`: avatar -> description, position...)."""
    power = settings.get("power_user") if isinstance(settings, dict) else None
    names = power.get("personas") if isinstance(power, dict) else None
    if not isinstance(names, dict):
        return []
    described = power.get("persona_descriptions") if isinstance(power, dict) else None
    described = described if isinstance(described, dict) else {}
    found = []
    for avatar, name in names.items():
        about = described.get(avatar)
        about = about if isinstance(about, dict) else {}
        found.append(
            {
                "name": name,
                "description": about.get("description", ""),
                "position": about.get("position", 0),
                "avatar": avatar,
            }
        )
    return found


# --- bringing it in -------------------------------------------------------------------------------


Advance = Callable[[int, int], None]
"""Progress: (files done, chat lines written) since the last call."""


@dataclass
class Importer:
    nc: Client | None
    """None: check only (parse and validate, publish nothing)."""
    data_dir: Path
    tz: tzinfo
    target: ChatTarget = field(default_factory=ChatTarget)
    advance: Advance = lambda files, lines: None
    report: Report = field(default_factory=Report)
    characters: dict[str, str] = field(default_factory=dict)
    """Card file stem -> asset id (imported in this run)."""
    personas: dict[str, str] = field(default_factory=dict)
    """Persona name -> asset id."""
    member_cards: dict[str, stgroups.Card] = field(default_factory=dict)
    """Card file stem -> the card as a group member (imported in this run)."""
    groups: dict[str, Any] = field(default_factory=dict)
    """Group chat id -> the definition that lists it."""

    async def run(self, items: list[Item]) -> Report:
        for item in items:
            await self._one(item)
            self.advance(1, 0)
        return self.report

    async def _one(self, item: Item) -> None:
        try:
            if item.kind == "group":
                self._group(item)
            elif item.kind == "group chat":
                await self._group_chat(item)
            elif item.kind == "personas":
                await self._personas(item)
            elif item.kind == "chat":
                await self._chat(item)
            else:
                await self._asset(item)
        except TavernError as exc:
            self.report.add(item.source, item.kind, "refused", exc.message)
        except OSError as exc:
            self.report.add(item.source, item.kind, "refused", f"cannot read: {exc.strerror}")

    async def _asset(self, item: Item) -> None:
        kinds: dict[str, cards.AssetKind] = {"character": "character", "persona": "persona"}
        kind = kinds.get(item.kind, "lorebook")
        if self.nc is None:
            for found in importer.read_assets(item.path, kind):
                asset = cards.owned_by(found, self.target.owner)
                self._known(item, asset)
                self.report.add(item.source, kind, "valid", _described(asset))
            return
        js = self.nc.jetstream()
        imported = await importer.import_all(js, item.path, self.data_dir, kind, self.target.owner)
        for published in imported:
            self._known(item, published.asset)
            status: Status = "skipped" if published.duplicate else "imported"
            verb = "already imported" if published.duplicate else "imported"
            self.report.add(item.source, kind, status, f"{verb}: {_described(published.asset)}")

    def _known(self, item: Item, asset: cards.ImportedAsset) -> None:
        if asset.kind == "character":
            self.characters[item.stem] = asset.asset_id
            self.member_cards[item.stem] = stgroups.Card(asset.asset_id, asset.name, _talk(asset))
        elif asset.kind == "persona":
            self.personas[asset.name] = asset.asset_id

    async def _personas(self, item: Item) -> None:
        try:
            settings = json.loads(item.path.read_bytes())
        except ValueError as exc:
            raise NotImportable(f"settings.json is not JSON ({exc})") from None
        found = personas_of(settings)
        if not found:
            self.report.add(item.source, "persona", "skipped", "no personas in settings")
        for raw in found:
            await self._persona(item, raw)

    async def _persona(self, item: Item, raw: dict[str, Any]) -> None:
        where = f"{item.source}: {raw.get('avatar')}"
        try:
            asset = cards.owned_by(cards.persona(raw), self.target.owner)
        except TavernError as exc:
            self.report.add(where, "persona", "refused", exc.message)
            return
        self.personas[asset.name] = asset.asset_id
        if self.nc is None:
            self.report.add(where, "persona", "valid", _described(asset))
            return
        js = self.nc.jetstream()
        event = importer.event_for(asset, item.path.name, None, datetime.now(UTC))
        duplicate = await importer.known_import(js, asset) is not None
        if not duplicate:
            _, duplicate = await importer.publish(js, event)
        verb = "already imported" if duplicate else "imported"
        self.report.add(
            where, "persona", "skipped" if duplicate else "imported", f"{verb}: {_described(asset)}"
        )

    async def _character_of(self, stem: str, name: Any) -> str | None:
        """The chat's card: imported in this run (by file stem), given, or known by name."""
        found = self.characters.get(stem) or self.target.character_id
        if found is None and stem not in self.characters:
            found = await _known_asset(self.nc, "character", name)
            self.characters[stem] = found or ""
        return found or None

    async def _persona_of(self, name: Any) -> str | None:
        if not isinstance(name, str):
            return self.target.persona_id
        if name not in self.personas:
            self.personas[name] = await _known_asset(self.nc, "persona", name) or ""
        return self.personas[name] or self.target.persona_id

    def _group(self, item: Item) -> None:
        """A group definition: kept for the group chats it lists (they are its sessions)."""
        try:
            definition = json.loads(item.path.read_bytes())
        except ValueError as exc:
            raise NotImportable(f"the group definition is not JSON ({exc})") from None
        chats = stgroups.chats_of(definition)
        for chat_id in chats:
            self.groups[chat_id] = definition
        name = definition.get("name") if isinstance(definition, dict) else None
        members = definition.get("members") if isinstance(definition, dict) else None
        count = len(members) if isinstance(members, list) else 0
        status: Shown = "valid" if self.nc is None else "skipped"
        said = f"group {name!r}: {count} members, read for its {len(chats)} chats (group sessions)"
        self.report.add(item.source, "group", status, said)

    async def _group_chat(self, item: Item) -> None:
        definition = self.groups.get(item.stem)
        if definition is None:
            self.report.add(item.source, "group chat", "skipped", NO_GROUP)
            return
        try:
            group = stgroups.group_of(definition, self.member_cards)
        except stgroups.GroupRefused as exc:
            self.report.add(item.source, "group chat", "refused", str(exc))
            return
        chat = stchat.parse_chat(item.path.read_bytes(), group=True)
        target = ChatTarget(
            self.target.architecture,
            self.target.context_mode,
            group.binding.members[0].character_id,
            await self._persona_of(chat.header.get("user_name")),
            group=group.binding,
            cast=group.cast,
            owner=self.target.owner,
        )
        await self._write_chat(item, chat, f"group chats/{item.path.name}", target, "group chat")

    async def _chat(self, item: Item) -> None:
        chat = stchat.parse_chat(item.path.read_bytes())
        source = f"{item.stem}/{item.path.name}"
        target = ChatTarget(
            self.target.architecture,
            self.target.context_mode,
            await self._character_of(item.stem, chat.header.get("character_name")),
            await self._persona_of(chat.header.get("user_name")),
            owner=self.target.owner,
        )
        await self._write_chat(item, chat, source, target, "chat")

    async def _write_chat(
        self, item: Item, chat: stchat.StChat, source: str, target: ChatTarget, kind: str
    ) -> None:
        session_id = chatimport.session_id_for(source, chat, target.owner)
        events = chatimport.plan(
            chat,
            source=item.source,
            session_id=session_id,
            target=target,
            tz=self.tz,
            fallback=_mtime(item.path),
            title=item.path.stem,
        )
        if self.nc is None:
            why = chatimport.oversized(events)
            status: Shown = "refused" if why else "valid"
            reason = why or f"{len(chat.lines)} lines, to become session {session_id}"
            self.report.add(item.source, kind, status, reason)
            self.advance(0, len(chat.lines))
            return
        outcome = await chatimport.write(
            SessionLogWriter(self.nc),
            SessionLogReader(self.nc.jetstream()),
            events,
            lambda lines: self.advance(0, lines),
        )
        self.report.add(item.source, kind, outcome.status, outcome.reason)
        if outcome.status != "imported":
            self.advance(0, len(chat.lines))


async def _known_asset(nc: Client | None, kind: str, name: Any) -> str | None:
    """The id of a character or persona the projector knows by this name (None: unknown, or
    the projector did not answer)."""
    if nc is None or not isinstance(name, str) or not name.strip():
        return None
    body = {"character": name[:200], "kind": kind, "fields": ["name"], "max_chars": 10}
    try:
        reply = await nc.request(
            subjects.rpc("projector", "character.get"), json.dumps(body).encode(), timeout=3
        )
        found = json.loads(reply.data)
    except (nats.errors.Error, ValueError):
        return None
    source = found.get("source") if isinstance(found, dict) else None
    asset_id = source.get("id") if isinstance(source, dict) else None
    return asset_id if isinstance(asset_id, str) else None


def _talk(asset: cards.ImportedAsset) -> float:
    """A card's talkativeness (SillyTavern keeps it as a string in `data`), else 0.5."""
    data = asset.content.get("data")
    raw = data.get("talkativeness") if isinstance(data, dict) else None
    try:
        value = float(raw) if raw is not None else 0.5
    except (TypeError, ValueError):
        return 0.5
    return min(1.0, max(0.0, value))


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _described(asset: cards.ImportedAsset) -> str:
    return f"{asset.kind} {asset.name!r} as {asset.asset_id} ({asset.source_format})"


def line_count(items: list[Item]) -> int:
    """Message lines in the chats (for the progress bar's total; unreadable files count 0)."""
    total = 0
    for item in items:
        if item.kind in ("chat", "group chat"):
            try:
                total += max(0, item.path.read_bytes().count(b"\n{"))
            except OSError:
                continue
    return total
