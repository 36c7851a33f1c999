"""The export's SillyTavern files (pure): cards as SillyTavern's card writer lays them out."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tavern_projector.export import card_json, card_png, persona_backup, saved_chat, world_file
from tavern_runtime.cards import cards, png

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"


def texts(data: bytes) -> list[tuple[str, str]]:
    found = []
    for chunk in png.read_chunks(data):
        if chunk.kind == b"tEXt":
            keyword, _, value = chunk.data.partition(b"\x00")
            found.append((keyword.decode("latin-1"), value.decode("latin-1")))
    return found


def test_a_card_png_gets_chara_then_ccv3_before_iend_and_keeps_its_image() -> None:
    original = (CARDS / "v3_suqing.png").read_bytes()  # has chara and ccv3 already
    stored = cards.decode_file(original).content
    text = card_json(stored)
    written = card_png(original, text)
    kinds = [c.kind for c in png.read_chunks(written)]
    assert kinds[-3:] == [b"tEXt", b"tEXt", b"IEND"]
    image = [c for c in png.read_chunks(original) if c.kind != b"tEXt"]
    assert [c for c in png.read_chunks(written) if c.kind != b"tEXt"] == image
    (chara, v2), (ccv3, v3) = texts(written)
    assert (chara, ccv3) == ("chara", "ccv3"), "the old card chunks are gone"
    assert base64.b64decode(v2).decode() == text
    expected_v3 = json.loads(text) | {"spec": "chara_card_v3", "spec_version": "3.0"}
    compact = json.dumps(expected_v3, ensure_ascii=False, separators=(",", ":"))
    assert base64.b64decode(v3).decode() == compact, "JSON.stringify of the V2 card as V3"
    assert list(json.loads(compact))[:7] == [
        "name",
        "description",
        "personality",
        "scenario",
        "first_mes",
        "mes_example",
        "spec",
    ]


def test_an_exported_card_reads_back_as_the_same_card() -> None:
    original = cards.decode_file((CARDS / "v2_mira.png").read_bytes())
    written = card_png(png.tiny_image(), card_json(original.content))
    again = cards.decode_file(written)
    assert again.name == original.name
    assert again.content["data"]["first_mes"] == original.content["data"]["first_mes"]
    assert again.content["data"]["alternate_greetings"] == ["The lamp flickers as you step in."]


def test_worlds_personas_and_chats_in_sillytaverns_shapes() -> None:
    book = {"name": "Cael", "entries": [{"uid": 3, "key": ["harbour"], "content": "Ice."}]}
    assert world_file(book) == {"entries": {"3": book["entries"][0]}}
    backup = persona_backup([("ren-1", {"name": "Ren", "description": "A traveller."})])
    assert backup == {
        "personas": {"ren-1.png": "Ren"},
        "persona_descriptions": {"ren-1.png": {"description": "A traveller.", "position": 0}},
        "default_persona": None,
    }
    assert saved_chat(b'{"a":1}\n{"b":2}\n') == b'{"a":1}\n{"b":2}'
