"""SillyTavern chat files read as SillyTavern writes them, and planned as session logs (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tavern_events.chat import ChatImported, ChatLine
from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.session import SessionCreated
from tavern_events.union import decode, encode
from tavern_runtime import chatimport, stchat
from tavern_runtime.chatimport import ChatTarget
from tavern_runtime.stchat import ChatFileError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sillytavern" / "default-user"
LONG = FIXTURES / "chats" / "default_Mira" / "Mira - 2026-12-01@21h20m05s.jsonl"
BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)


def planned(data: bytes, tz: ZoneInfo = BERLIN, **target: Any) -> list[SessionEvent]:
    chat = stchat.parse_chat(data)
    return list(
        chatimport.plan(
            chat,
            source="chats/default_Mira/x.jsonl",
            session_id="st-abc",
            target=ChatTarget(**target),
            tz=tz,
            fallback=NOW,
        )
    )


def test_a_file_sillytavern_wrote_parses_with_its_quirks() -> None:
    data = LONG.read_bytes()
    assert not data.endswith(b"\n"), "saveChat writes no trailing newline"
    chat = stchat.parse_chat(data)
    assert chat.header["chat_metadata"]["note_depth"] == 4
    assert len(chat.lines) == 8
    kinds = [stchat.kind_of(line) for line in chat.lines]
    assert kinds == [
        "character",
        "user",
        "character",
        "character",
        "hidden",
        "system",
        "user",
        "character",
    ]
    assert chat.lines[1]["is_system"] == "", "kept as written"
    assert chat.lines[0]["swipe_info"][0] == {}
    assert "swipes_info" in chat.lines[3]


def test_crlf_bom_and_blank_lines_are_tolerated() -> None:
    data = LONG.read_bytes().replace(b"\n", b"\r\n\r\n")
    chat = stchat.parse_chat(b"\xef\xbb\xbf" + data)
    assert chat.lines == stchat.parse_chat(LONG.read_bytes()).lines


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "holds no lines"),
        (b'{"user_name":"a"}\n{"mes":', "line 2: not JSON"),
        (b'{"user_name":"a"}\n[1]', "line 2: not a JSON object"),
        (b'{"mes":"hi","is_user":true}', "line 1: not a chat header"),
        (b'{"user_name":"a"}\n{"mes":3}', "line 2: `mes` is not text"),
        (b'{"user_name":"a"}\n{"mes":"x","swipes":"x"}', "line 2: `swipes`"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_what_is_not_a_chat_is_refused_naming_the_line(data: bytes, message: str) -> None:
    with pytest.raises(ChatFileError, match=message):
        stchat.parse_chat(data)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("December 1, 2026 9:20pm", datetime(2026, 12, 1, 21, 20, tzinfo=BERLIN)),
        ("June 19, 2023 12:05am", datetime(2023, 6, 19, 0, 5, tzinfo=BERLIN)),
        ("Dec 1, 2026 12:30pm", datetime(2026, 12, 1, 12, 30, tzinfo=BERLIN)),
        ("2024-7-12@01h31m37s", datetime(2024, 7, 12, 1, 31, 37, tzinfo=BERLIN)),
        ("2024-6-5 @14h 56m 50s 682ms", datetime(2024, 6, 5, 14, 56, 50, tzinfo=BERLIN)),
        (1764624300000, datetime(2025, 12, 1, 21, 25, tzinfo=UTC)),
        ("1764624300000", datetime(2025, 12, 1, 21, 25, tzinfo=UTC)),
        ("2026-12-01T21:22:10.120Z", datetime(2026, 12, 1, 21, 22, 10, 120000, tzinfo=UTC)),
        ("", None),
        ("not a date", None),
        (True, None),
        ("February 30, 2026 1:00pm", None),
    ],
)
def test_send_dates_in_every_form_sillytavern_used(value: object, expected: object) -> None:
    assert stchat.send_time(value, BERLIN) == expected


def test_a_chat_becomes_a_log_of_its_lines_with_their_dates() -> None:
    events = planned(LONG.read_bytes(), architecture="st", context_mode=None, character_id="mira")
    types = [type(e).__name__ for e in events]
    assert types == [
        "SessionCreated",
        "TurnStarted",
        "ChatImported",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
        "AssistantMessage",
        "ChatLine",
        "ChatLine",
        "UserMessage",
        "AssistantMessage",
        "TurnStopping",
        "TurnEnded",
    ]
    assert {e.turn for e in events[1:]} == {1}, "one turn that no model ran"
    created, imported = events[0], events[2]
    assert isinstance(created, SessionCreated)
    assert isinstance(imported, ChatImported)
    assert created.payload.architecture == "st"
    assert created.payload.character_id == "mira"
    assert created.ts == datetime(2026, 12, 1, 20, 20, 5, tzinfo=UTC), "create_date, Berlin"
    assert imported.payload.header["chat_metadata"]["chat_id_hash"] == 5349612098251734
    assert imported.payload.lines == 8
    greeting, user, sendas, hidden, narrator = (
        events[3:9:1][0],
        events[4],
        events[6],
        events[7],
        events[8],
    )
    assert isinstance(greeting, AssistantMessage)
    assert isinstance(user, UserMessage)
    assert greeting.payload.content == "The lamp flickers as you step in.", "the chosen swipe"
    assert greeting.form == "greeting", "the chat opens with it, as a new chat's greeting"
    assert greeting.payload.imported is not None
    assert greeting.payload.imported["swipes"][0] == "The door creaks open."
    assert user.source == "user"
    assert user.payload.name == "Ren"
    assert user.ts == datetime(2026, 12, 1, 20, 22, tzinfo=UTC)
    assert isinstance(sendas, AssistantMessage)
    assert sendas.payload.imported is not None
    assert sendas.payload.imported["name"] == "Tamsin"
    assert (sendas.payload.provider, sendas.payload.model) == ("manual", "slash command")
    assert isinstance(hidden, ChatLine)
    assert hidden.payload.reason == "hidden"
    assert isinstance(narrator, ChatLine)
    assert narrator.payload.reason == "system"
    last = events[-3]
    assert isinstance(last, AssistantMessage)
    assert last.payload.imported is not None
    assert last.payload.content == "The ferry? Not in this ice.", "swipe_id 0 stays chosen"
    assert last.payload.imported["swipe_id"] == 0
    assert len(last.payload.imported["swipes"]) == 2


def test_every_planned_event_round_trips_the_contract() -> None:
    for event in planned(LONG.read_bytes()):
        assert decode(encode(event)) == event


def test_ids_are_deterministic_and_a_bad_date_takes_the_one_before() -> None:
    lines = [
        json.dumps({"user_name": "Ren", "character_name": "Mira", "create_date": "?"}),
        json.dumps(
            {"name": "Ren", "is_user": True, "send_date": "June 19, 2023 2:20pm", "mes": "a"}
        ),
        json.dumps({"name": "Mira", "is_user": False, "send_date": "garbled", "mes": "b"}),
    ]
    data = "\n".join(lines).encode()
    first, again = planned(data, ZoneInfo("UTC")), planned(data, ZoneInfo("UTC"))
    assert [e.id for e in first] == [e.id for e in again]
    times = [e.ts for e in first]
    assert set(times) == {datetime(2023, 6, 19, 14, 20, tzinfo=UTC)}


def test_session_ids_follow_the_files_place_and_header() -> None:
    chat = stchat.parse_chat(LONG.read_bytes())
    one = chatimport.session_id_for("default_Mira/a.jsonl", chat)
    assert one == chatimport.session_id_for("default_Mira/a.jsonl", chat)
    assert one != chatimport.session_id_for("default_Other/a.jsonl", chat)
    assert one.startswith("st-")
    assert len(one) <= 64


def test_a_chat_imported_for_a_user_is_theirs_in_a_session_of_its_own() -> None:
    chat = stchat.parse_chat(LONG.read_bytes())
    local = chatimport.session_id_for("default_Mira/a.jsonl", chat)
    assert local == chatimport.session_id_for("default_Mira/a.jsonl", chat, "local")
    alices = chatimport.session_id_for("default_Mira/a.jsonl", chat, "alice")
    assert alices != local
    assert alices != chatimport.session_id_for("default_Mira/a.jsonl", chat, "bob")
    created = planned(LONG.read_bytes(), owner="alice")[0]
    assert created.type == "session/created"
    assert created.payload.owner == "alice"
    assert planned(LONG.read_bytes())[0].payload.owner == "local"
