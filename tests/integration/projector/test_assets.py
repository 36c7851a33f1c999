"""Card import (PNG V2/V3, JSON, lorebooks, personas) into read models and the asset RPCs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tavern_events.streams import ASSETS
from tavern_projector.errors import CardError
from tavern_runtime.cards import importer
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import CARDS, import_fixture, scripted_turn

pytestmark = pytest.mark.integration


async def assets_stored(projector: Projector) -> int:
    return int((await projector.bus.js.stream_info(ASSETS.name)).state.messages)


async def test_generated_png_cards_import_with_their_lorebooks(projector: Projector) -> None:
    mira = await import_fixture(projector, "v2_mira.png")
    suqing = await import_fixture(projector, "v3_suqing.png")
    again = await importer.import_file(
        projector.bus.js, CARDS / "v2_mira.json", projector.settings.data_dir
    )
    assert again.duplicate, "the same card as JSON is the same content: one event"
    await projector.caught_up("assets")
    async with projector.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT asset_id, name, source_format FROM projector.characters ORDER BY name"
        )
        books = await conn.fetch("SELECT owner_id, book FROM projector.lorebooks ORDER BY owner_id")
    assert [(r["asset_id"], r["name"], r["source_format"]) for r in rows] == [
        (mira, "Mira", "chara_card_v2"),
        (suqing, "苏青", "chara_card_v3"),
    ], "the ccv3 chunk wins over chara"
    assert sorted(b["owner_id"] for b in books) == sorted([mira, suqing])
    entries = json.loads(books[0]["book"])["entries"]
    assert [e["key"] for e in entries] == [["lighthouse", "lamp room"], ["keeper"]]

    got = await projector.rpc(
        "character.get",
        {
            "character": "苏青",
            "fields": ["name", "nickname", "identity_summary", "description"],
            "max_chars": 8,
        },
    )
    assert got["fields"]["nickname"] == "青青"
    assert got["fields"]["identity_summary"] == "苏青，灯塔学徒。"  # noqa: RUF001
    assert got["fields"]["description"] == "{{char}…"
    assert got["truncated"] is True
    assert got["source"]["id"] == suqing
    refused = await projector.rpc("character.get", {"character": "Mira", "fields": ["secrets"]})
    assert refused["error"]["code"] == "invalid"
    assert "secrets" in refused["error"]["message"]


BROKEN_PNGS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda png: png[: len(png) - 30],
    "bad-crc": lambda png: png[:-12] + b"\x00" * 12,
}
WRONG_TYPES: list[tuple[dict[str, object], str]] = [
    ({"spec": "chara_card_v9"}, "spec"),
    ({"data": "not an object"}, "data"),
    ({"data.name": 42}, "data.name"),
    ({"data.alternate_greetings": "hi"}, "data.alternate_greetings"),
    ({"data.tags": ["ok", 3]}, "data.tags.1"),
    ({"data.character_book.entries.1.keys": "keeper"}, "data.character_book.entries.1.keys"),
    (
        {"data.character_book.entries.0.extensions.probability": 170},
        "data.character_book.entries.0.probability",
    ),
]


async def test_broken_pngs_and_wrongly_typed_cards_are_refused_and_nothing_is_published(
    projector: Projector, tmp_path: Path
) -> None:
    png = (CARDS / "v2_mira.png").read_bytes()
    for name, make in BROKEN_PNGS.items():
        broken = tmp_path / f"{name}.png"
        broken.write_bytes(make(png))
        with pytest.raises(CardError) as refused:
            await importer.import_file(projector.bus.js, broken, projector.settings.data_dir)
        assert refused.value.field == "png", name
    for change, field in WRONG_TYPES:
        card = json.loads((CARDS / "v2_mira.json").read_text())
        for path, value in change.items():
            _set(card, path.split("."), value)
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(card))
        with pytest.raises(CardError) as refused:
            await importer.import_file(projector.bus.js, bad, projector.settings.data_dir)
        assert refused.value.field == field
    assert await assets_stored(projector) == 0
    assert not (projector.settings.data_dir / "assets").exists(), "no image kept either"


def _set(target: object, path: list[str], value: object) -> None:
    *parents, last = path
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]  # type: ignore[index]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value  # type: ignore[index]


async def test_lore_search_activates_the_bound_characters_book(projector: Projector) -> None:
    mira = await import_fixture(projector, "v2_mira.png")
    await import_fixture(projector, "world_cael.json")
    await projector.caught_up("assets")
    await projector.create_session("s1", character_id=mira)
    await scripted_turn(projector, "s1", 1, "Who keeps the lighthouse?", "An old keeper.")
    await projector.caught_up()

    found = await projector.rpc("lore.search", {"session_id": "s1"})
    assert [e["comment"] for e in found["entries"]] == ["Lighthouse"], "keeper needs 'storm' too"
    found = await projector.rpc("lore.search", {"session_id": "s1", "query": "and the storm?"})
    assert [e["comment"] for e in found["entries"]] == ["Lighthouse", "Keeper"]
    assert found["entries"][1]["reason"] == "secondary"
    linked = await projector.rpc(
        "lore.search", {"session_id": "s1", "books": ["world_cael"], "query": "ferry in winter ice"}
    )
    assert "Ferry" in [e["comment"] for e in linked["entries"]]
    tight = await projector.rpc(
        "lore.search", {"session_id": "s1", "query": "storm", "max_tokens": 10}
    )
    assert tight["usedTokens"] <= 10
    assert tight["dropped"]

    scene = await projector.rpc("scene.get", {"session_id": "s1", "max_chars": 20})
    assert (scene["character"], scene["messageCount"], scene["turns"]) == ("Mira", 2, 1)
    assert scene["scenario"].endswith("…")
    assert scene["truncated"] is True


def test_the_cli_names_the_field_it_refuses(tmp_path: Path) -> None:
    broken = tmp_path / "Mira.png"
    broken.write_bytes((CARDS / "v2_mira.png").read_bytes()[:200])
    env = {**os.environ, "TAVERN_NATS_URL": "nats://127.0.0.1:1", "TAVERN_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "tavern"), "card", "import", str(broken)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    said = " ".join((done.stdout + done.stderr).split())  # refusals are one line on stderr
    assert "Mira.png refused: png: truncated" in said


async def test_the_projector_waits_for_its_streams_and_then_consumes(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    import asyncpg
    import nats

    from tavern_projector import catalog
    from tavern_runtime.provision import provision
    from tests.integration.projector.conftest import settings_for

    nc = await nats.connect(nats_url)
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    projector = Projector(None, settings_for(nats_url, database_url, tmp_path), pool)  # type: ignore[arg-type]
    projector.bus = type("Bus", (), {"nc": nc, "js": nc.jetstream()})()
    try:
        await projector.start()  # nothing provisioned: it runs, answers ping, and waits
        await provision(nc.jetstream(), consumers=catalog.CONSUMERS, buckets=())
        await importer.import_file(nc.jetstream(), CARDS / "persona_ren.json", tmp_path)
        await projector.caught_up("assets", timeout=20)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT name FROM projector.personas") == "Ren"
    finally:
        await projector.halt()
        await pool.close()
        await nc.close()
