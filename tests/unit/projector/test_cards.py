"""Card, lorebook and persona decoding: versions, containers, and refusals naming the field."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tavern_projector.errors import CardError
from tavern_runtime.cards import cards, lorebook, png

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"


def fixture(name: str) -> bytes:
    return (CARDS / name).read_bytes()


def card_png(**texts: dict[str, Any]) -> bytes:
    encoded = {k: base64.b64encode(json.dumps(v).encode()).decode() for k, v in texts.items()}
    return png.with_text(png.tiny_image(), encoded)


def test_v1_v2_v3_all_become_v3_shaped_content() -> None:
    v1 = {k: "" for k in cards.V1_FIELDS} | {"name": "Old", "talkativeness": "0.4"}
    found = [
        cards.character(v1),
        cards.decode_file(fixture("v2_mira.json")),
        cards.decode_file(fixture("v3_suqing.png")),
    ]
    assert [(a.source_format, a.name) for a in found] == [
        ("chara_card_v1", "Old"),
        ("chara_card_v2", "Mira"),
        ("chara_card_v3", "苏青"),
    ]
    assert all(a.content["spec"] == "chara_card_v3" for a in found)
    assert found[0].content["data"]["talkativeness"] == "0.4", "unknown fields are kept"
    assert found[2].content["data"]["nickname"] == "青青"
    assert found[1].event_id == cards.decode_file(fixture("v2_mira.png")).event_id


def test_ccv3_is_preferred_over_chara() -> None:
    v2 = json.loads(fixture("v2_mira.json"))
    v3 = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {**v2["data"], "name": "Mira v3"}}
    assert cards.decode_file(card_png(chara=v2, ccv3=v3)).name == "Mira v3"
    assert cards.decode_file(card_png(chara=v2)).name == "Mira"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"GIF89a", "file"),
        (png.tiny_image(), "png"),
        (fixture("v2_mira.png")[:-40], "png"),
        (png.with_text(png.tiny_image(), {"chara": "%%%"}), "png.chara"),
        (
            png.with_text(png.tiny_image(), {"chara": base64.b64encode(b"{nope").decode()}),
            "png.chara",
        ),
    ],
    ids=["not-png", "no-card", "truncated", "bad-base64", "bad-json"],
)
def test_broken_files_are_refused(data: bytes, field: str) -> None:
    with pytest.raises(CardError) as refused:
        cards.decode_file(data)
    assert refused.value.field == field


@pytest.mark.parametrize(
    ("card", "field"),
    [
        ({"spec": "chara_card_v2"}, "data"),
        ({"spec": "chara_card_v2", "data": {"name": " "}}, "data.name"),
        (
            {"spec": "chara_card_v3", "data": {"name": "x", "assets": [{"uri": 5}]}},
            "data.assets.0.uri",
        ),
        ({"spec": "chara_card_v2", "data": {"name": "x", "extensions": []}}, "data.extensions"),
        ({"name": "x", "description": ""}, "personality"),
        (
            {"spec": "chara_card_v2", "data": {"name": "x", "character_book": {"entries": {}}}},
            "data.character_book.entries",
        ),
    ],
)
def test_malformed_cards_name_the_field(card: dict[str, Any], field: str) -> None:
    with pytest.raises(CardError) as refused:
        cards.character(card)
    assert refused.value.field == field


def test_embedded_book_maps_to_world_info_fields() -> None:
    content = cards.decode_file(fixture("v2_mira.json")).content
    book = cards.embedded_book(content)
    assert book is not None
    assert (book["scan_depth"], book["token_budget"], book["recursive_scanning"]) == (4, 500, False)
    first, second = book["entries"]
    assert (first["uid"], first["key"], first["position"], first["order"]) == (
        1,
        ["lighthouse", "lamp room"],
        0,
        100,
    )
    assert (second["keysecondary"], second["position"], second["selective"]) == (["storm"], 1, True)


def test_book_entry_options_from_extensions_and_enabled() -> None:
    raw = {
        "entries": [
            {
                "keys": ["a"],
                "content": "A",
                "enabled": False,
                "position": "after_char",
                "extensions": {
                    "position": 4,
                    "case_sensitive": True,
                    "group": "g",
                    "delay_until_recursion": True,
                },
            }
        ]
    }
    (entry,) = lorebook.character_book(raw, "book", "b")["entries"]
    assert (entry["disable"], entry["position"], entry["caseSensitive"], entry["group"]) == (
        True,
        4,
        True,
        "g",
    )
    assert entry["delayUntilRecursion"] == 1


def test_world_files_and_personas() -> None:
    world = cards.decode_file(fixture("world_cael.json"), name_hint="world_cael")
    assert (world.kind, world.name, world.source_format) == (
        "lorebook",
        "world_cael",
        "st_world_info",
    )
    assert [e["uid"] for e in world.content["entries"]] == [0, 1]
    assert lorebook.normalised(world.content) == world.content, "re-reading is idempotent"
    persona = cards.decode_file(fixture("persona_ren.json"))
    assert (persona.kind, persona.content["description"]) == (
        "persona",
        "A traveller caught in the storm.",
    )
    with pytest.raises(CardError, match=r"entries\.0\.order: expected a number"):
        cards.decode_file(b'{"entries": {"0": {"order": "high"}}}')


def test_asset_ids_are_subject_safe_and_stable() -> None:
    assert cards.asset_id_for("character", "Mira") == cards.asset_id_for("character", "Mira")
    assert cards.asset_id_for("character", "苏青").startswith("character-")
    assert cards.asset_id_for("lorebook", "Mira") != cards.asset_id_for("character", "Mira")


def _charx(files: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_charx_card_imports_with_its_v3_assets_kept() -> None:
    card: dict[str, Any] = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "Mira",
            "description": "The keeper's apprentice.",
            "personality": "",
            "scenario": "",
            "first_mes": "Hello.",
            "mes_example": "",
            "assets": [
                {
                    "type": "icon",
                    "uri": "embeded://assets/icon/main.png",
                    "name": "main",
                    "ext": "png",
                }
            ],
        },
    }
    data = _charx({"card.json": json.dumps(card).encode(), "assets/icon/main.png": b"\x89PNG"})
    found = cards.decode_file(data)
    assert (found.name, found.source_format) == ("Mira", "chara_card_v3+charx")
    assert found.content["data"]["assets"] == card["data"]["assets"]


def test_a_broken_charx_is_refused_naming_why() -> None:
    with pytest.raises(CardError, match=r"no card\.json"):
        cards.decode_file(_charx({"other.json": b"{}"}))
    with pytest.raises(CardError, match="not valid JSON"):
        cards.decode_file(_charx({"card.json": b"{"}))
    with pytest.raises(CardError, match="not a valid zip"):
        cards.decode_file(b"PK\x03\x04 broken")


def test_a_sillytavern_persona_backup_is_each_of_its_personas() -> None:
    backup = {
        "personas": {"ren.png": "Ren", "k.png": "Keeper"},
        "persona_descriptions": {"ren.png": {"description": "A traveller.", "position": 0}},
        "default_persona": "ren.png",
    }
    found = cards.decode_all(json.dumps(backup).encode())
    assert [(a.kind, a.name, a.source_format) for a in found] == [
        ("persona", "Ren", "st_persona_backup"),
        ("persona", "Keeper", "st_persona_backup"),
    ]
    assert found[0].content["description"] == "A traveller."
    with pytest.raises(CardError, match="holds no personas"):
        cards.decode_all(b'{"personas": {}}')


def test_the_same_content_from_another_format_is_another_event() -> None:
    v2 = cards.decode_file(fixture("v2_mira.json"))
    assert replace(v2, source_format="chara_card_v3").event_id != v2.event_id


def test_an_assets_id_is_its_owners_and_the_local_owners_is_the_id_from_before_owners() -> None:
    before = cards.asset_id_for("character", "Mira")
    assert cards.asset_id_for("character", "Mira", "local") == before
    alices = cards.asset_id_for("character", "Mira", "alice")
    assert alices != before
    assert alices != cards.asset_id_for("character", "Mira", "bob")
    assert alices.startswith("mira-")
    asset = cards.decode_file(fixture("v2_mira.json"))
    owned = cards.owned_by(asset, "alice")
    assert (owned.owner, owned.asset_id) == (
        "alice",
        cards.asset_id_for("character", "Mira", "alice"),
    )
    assert owned.event_id != asset.event_id, "each owner's import is an event of its own"
    assert owned.content_hash == asset.content_hash
