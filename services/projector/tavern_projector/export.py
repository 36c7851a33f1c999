"""`tavern st export DIR`: the read models written out as a SillyTavern user data folder.

    characters/<card file stem>.png   the card in a `chara` tEXt chunk (base64 V2 JSON), then a
                                      `ccv3` chunk (the same JSON as V3), both before IEND, as
                                      SillyTavern's character-card-parser `write` puts them
    chats/<card file stem>/*.jsonl    every chat, lines joined as `saveChat` joins them (no
                                      trailing newline); files kept aside after edits included
    group chats/<chat id>.jsonl       every group chat, message lines only, as `group/save`
                                      writes them
    groups/<group id>.json            every group's definition, listing its chats
    worlds/<name>.json                every standalone lorebook as a world file (`entries` by uid)
    personas.json                     the personas as the Persona panel's Backup writes them
                                      (restore it there), with avatars in `User Avatars/`

A card imported from a PNG keeps its own image; other cards get a 1x1 placeholder.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tavern_projector.chatfiles import ASIDE_MARK, sibling
from tavern_projector.domain import stformat
from tavern_projector.domain.groupdef import GROUP_CHATS, GROUPS
from tavern_runtime.cards import png

V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")


@dataclass
class Exported:
    characters: int = 0
    chats: int = 0
    groups: int = 0
    worlds: int = 0
    personas: int = 0
    notes: list[str] = field(default_factory=list)


# --- pure -----------------------------------------------------------------------------------------


def card_json(content: dict[str, Any]) -> str:
    """The V2 card text of a stored (V3-shaped) card: the V1 fields on top for old readers,
    then `spec`, `spec_version` and `data`, compact as `JSON.stringify` writes it."""
    data = content.get("data") if isinstance(content.get("data"), dict) else {}
    assert isinstance(data, dict)
    card: dict[str, Any] = {k: data.get(k, "") for k in V1_FIELDS}
    card |= {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}
    return stformat.dumps(card)


def card_png(image: bytes, card: str) -> bytes:
    """`image` with its `chara`/`ccv3` tEXt chunks replaced by `card` (base64) and its V3 form,
    both before IEND: the chunks SillyTavern's writer produces from the same card text."""
    chunks = [c for c in png.read_chunks(image) if not _card_chunk(c)]
    v3 = json.loads(card) | {"spec": "chara_card_v3", "spec_version": "3.0"}
    texts = [
        png.text_chunk("chara", _b64(card)),
        png.text_chunk("ccv3", _b64(stformat.dumps(v3))),
    ]
    body = b"".join(png.encode_chunk(c.kind, c.data) for c in chunks[:-1])
    last = chunks[-1]
    return png.SIGNATURE + body + b"".join(texts) + png.encode_chunk(last.kind, last.data)


def _card_chunk(chunk: png.Chunk) -> bool:
    if chunk.kind != b"tEXt":
        return False
    keyword = chunk.data.split(b"\x00", 1)[0].decode("latin-1").lower()
    return keyword in ("chara", "ccv3")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def world_file(book: dict[str, Any]) -> dict[str, Any]:
    """A stored lorebook as SillyTavern's world file: `{"entries": {"<uid>": entry}}`."""
    entries = book.get("entries") if isinstance(book.get("entries"), list) else []
    assert isinstance(entries, list)
    return {"entries": {str(e.get("uid", i)): e for i, e in enumerate(entries)}}


def persona_backup(personas: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The Persona panel's backup: `{personas, persona_descriptions, default_persona}`, keyed by
    avatar file (one per persona, `<asset id>.png`)."""
    names: dict[str, str] = {}
    described: dict[str, Any] = {}
    for asset_id, content in personas:
        avatar = f"{asset_id}.png"
        names[avatar] = str(content.get("name") or asset_id)
        described[avatar] = {
            "description": str(content.get("description") or ""),
            "position": content.get("position", 0),
        }
    return {"personas": names, "persona_descriptions": described, "default_persona": None}


def saved_chat(data: bytes) -> bytes:
    """A chat file as SillyTavern's saveChat writes it: the same lines, no trailing newline."""
    return data.rstrip(b"\n")


# --- writing --------------------------------------------------------------------------------------


async def export_folder(
    pool: Any,
    chats_dir: Path,
    data_dir: Path,
    dest: Path,
    progress: Callable[[str], None] = lambda what: None,
    owner: str | None = None,
) -> Exported:
    """Write the SillyTavern user data folder `dest` from the read models: everything, or
    only what belongs to `owner` (their cards, worlds, personas and chats)."""
    done = Exported()
    async with pool.acquire() as conn:
        cards = await conn.fetch(
            "SELECT asset_id, name, content, image_locator, file_stem FROM projector.characters"
            " WHERE $1::text IS NULL OR owner = $1 ORDER BY name",
            owner,
        )
        books = await conn.fetch(
            "SELECT name, book FROM projector.lorebooks WHERE owner_id IS NULL"
            " AND ($1::text IS NULL OR owner = $1) ORDER BY name",
            owner,
        )
        personas = await conn.fetch(
            "SELECT asset_id, content FROM projector.personas"
            " WHERE $1::text IS NULL OR owner = $1 ORDER BY name",
            owner,
        )
        keys = None if owner is None else await _chat_keys(conn, owner)
        groups = None if owner is None else await _group_files(conn, owner)
    rows = Rows(list(cards), list(books), list(personas), keys, groups)
    await asyncio.to_thread(_write_all, rows, chats_dir, data_dir, dest, done, progress)
    return done


@dataclass(frozen=True)
class Rows:
    cards: list[Any]
    books: list[Any]
    personas: list[Any]
    chat_keys: frozenset[str] | None
    """The chats to write (None: every chat file)."""
    group_files: frozenset[str] | None = None
    """The group definitions to write, by file id (None: every one)."""


async def _chat_keys(conn: Any, owner: str) -> frozenset[str]:
    rows = await conn.fetch(
        """SELECT c.chat_key FROM projector.chats c
           JOIN projector.sessions s ON s.session_id = c.session_id WHERE s.owner = $1""",
        owner,
    )
    return frozenset(str(r["chat_key"]) for r in rows)


async def _group_files(conn: Any, owner: str) -> frozenset[str]:
    """The definitions of `owner`'s group chats (each owner's are its own: groupdef.file_id)."""
    rows = await conn.fetch(
        """SELECT DISTINCT c.group_id FROM projector.chats c
           JOIN projector.sessions s ON s.session_id = c.session_id
           WHERE s.owner = $1 AND c.group_id IS NOT NULL""",
        owner,
    )
    return frozenset(str(r["group_id"]) for r in rows)


def _chat_wanted(relative: Path, keys: frozenset[str] | None) -> bool:
    """A chat file (or one kept aside beside it) of a chat in `keys`."""
    if keys is None:
        return True
    key = relative.with_suffix("").as_posix()
    return key in keys or key.split(ASIDE_MARK)[0] in keys


def _write_all(
    rows: Rows,
    chats_dir: Path,
    data_dir: Path,
    dest: Path,
    done: Exported,
    progress: Callable[[str], None],
) -> None:
    cards, books, personas = rows.cards, rows.books, rows.personas
    for row in cards:
        _write_card(row, data_dir, dest, done)
        progress("character")
    for row in books:
        name = stformat.safe_name(str(row["name"]), "Lorebook")
        _write(dest / "worlds" / f"{name}.json", json.dumps(world_file(_json(row["book"]))))
        done.worlds += 1
        progress("lorebook")
    _write_personas([(r["asset_id"], _json(r["content"])) for r in personas], dest, done)
    for path in sorted(chats_dir.rglob("*.jsonl")) if chats_dir.exists() else []:
        if not _chat_wanted(path.relative_to(chats_dir), rows.chat_keys):
            continue
        target = dest / "chats" / path.relative_to(chats_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(saved_chat(path.read_bytes()))
        done.chats += 1
        progress("chat")
    _write_groups(chats_dir, dest, done, progress, rows)


def _write_groups(
    chats_dir: Path, dest: Path, done: Exported, progress: Callable[[str], None], rows: Rows
) -> None:
    """Group chats and their groups' definitions, as the projector wrote them beside the
    chats (in SillyTavern's layout already); an owner's export holds only theirs."""
    for folder, pattern in ((GROUP_CHATS, "*.jsonl"), (GROUPS, "*.json")):
        source = sibling(chats_dir, folder)
        for path in sorted(source.glob(pattern)) if source.exists() else []:
            if not _group_wanted(folder, path, rows):
                continue
            _write(dest / folder / path.name, saved_chat(path.read_bytes()))
            if folder == GROUPS:
                done.groups += 1
            else:
                done.chats += 1
            progress("group" if folder == GROUPS else "chat")


def _group_wanted(folder: str, path: Path, rows: Rows) -> bool:
    if folder == GROUPS:
        return rows.group_files is None or path.stem in rows.group_files
    return _chat_wanted(Path(GROUP_CHATS) / path.name, rows.chat_keys)


def _write_card(row: Any, data_dir: Path, dest: Path, done: Exported) -> None:
    content = _json(row["content"])
    image = _image(data_dir, row["image_locator"])
    stem = row["file_stem"] or stformat.safe_name(str(row["name"]), "character")
    _write(dest / "characters" / f"{stem}.png", card_png(image, card_json(content)))
    done.characters += 1
    if row["image_locator"] and image == PLACEHOLDER:
        done.notes.append(f"{stem}.png: its image was not found; a placeholder stands in")


PLACEHOLDER = png.tiny_image()


def _image(data_dir: Path, locator: str | None) -> bytes:
    if not locator:
        return PLACEHOLDER
    try:
        data = (data_dir / locator).read_bytes()
    except OSError:
        return PLACEHOLDER
    return data if png.is_png(data) else PLACEHOLDER


def _write_personas(personas: list[tuple[str, dict[str, Any]]], dest: Path, done: Exported) -> None:
    if not personas:
        return
    backup = persona_backup(personas)
    _write(dest / "personas.json", json.dumps(backup, indent=4, ensure_ascii=False))
    for avatar in backup["personas"]:
        _write(dest / "User Avatars" / avatar, PLACEHOLDER)
    done.personas = len(personas)


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)


def _json(value: Any) -> dict[str, Any]:
    found = json.loads(value) if isinstance(value, str) else value
    return found if isinstance(found, dict) else {}
