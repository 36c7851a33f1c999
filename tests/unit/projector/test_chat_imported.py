"""An imported SillyTavern chat, projected: the file comes back as SillyTavern wrote it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, AssistantMessagePayload
from tavern_projector.domain import chat, stformat
from tavern_projector.domain.chat import ChatBinding
from tavern_runtime import chatimport, stchat
from tavern_runtime.chatimport import ChatTarget

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sillytavern" / "default-user"
LONG = FIXTURES / "chats" / "default_Mira" / "Mira - 2026-12-01@21h20m05s.jsonl"
BERLIN = ZoneInfo("Europe/Berlin")


def numbered(data: bytes) -> list[SessionEvent]:
    events = chatimport.plan(
        stchat.parse_chat(data),
        source="x",
        session_id="st-abc",
        target=ChatTarget("st", None),
        tz=BERLIN,
        fallback=datetime(2026, 12, 2, tzinfo=UTC),
    )
    return [e.model_copy(update={"seq": n}) for n, e in enumerate(events, start=1)]


def project(events: list[SessionEvent]) -> chat.ChatState:
    state = chat.new_chat(
        ChatBinding("st-abc", "st-abc", "Assistant", "User"), events[0].ts, BERLIN
    )
    for event in events:
        chat.apply(state, event, BERLIN)
    return state


def without_marks(value: dict[str, object]) -> dict[str, object]:
    found = json.loads(json.dumps(value))
    found.get("extra", {}).pop("agentTavern", None)
    found.get("chat_metadata", {}).pop("agentTavern", None)
    return found  # type: ignore[no-any-return]


def test_every_line_and_the_header_come_back_as_the_file_held_them() -> None:
    original = [json.loads(line) for line in LONG.read_text().split("\n")]
    state = project(numbered(LONG.read_bytes()))
    projected = [json.loads(line) for line in state.render().decode().splitlines()]
    assert len(projected) == len(original)
    assert state.binding.key == "Mira/st-abc", "named by the file's character"
    for ours, theirs in zip(projected, original, strict=True):
        assert without_marks(ours) == theirs
        assert list(ours) == list(theirs), "fields in their order"
    marks = [line["extra"]["agentTavern"]["eventSeq"] for line in projected[1:]]
    assert marks == list(range(4, 12))
    assert projected[0]["chat_metadata"]["agentTavern"] == {"sessionId": "st-abc"}


def test_a_file_read_back_resumes_after_its_last_imported_line() -> None:
    events = numbered(LONG.read_bytes())
    state = project(events)
    again = chat.from_file(state.binding, *stformat.parse(state.render()))
    assert again.last_seq == events[-3].seq, "the last line's seq"
    before = again.render()
    for event in events:  # redelivered: nothing changes
        chat.apply(again, event, BERLIN)
    assert again.render() == before


def test_a_swipe_after_the_import_joins_the_imported_swipes() -> None:
    events = numbered(LONG.read_bytes())
    state = project(events)
    swipe = AssistantMessage(
        id="e-swipe",
        session_id="st-abc",
        seq=len(events) + 1,
        ts=datetime(2026, 12, 3, tzinfo=UTC),
        turn=1,
        step=1,
        form="swipe",
        payload=AssistantMessagePayload(content="Ask again at dawn."),
    )
    chat.apply(state, swipe, BERLIN)
    last = state.messages[-1]
    assert last["swipes"] == [
        "The ferry? Not in this ice.",
        "Tomorrow, if the harbour thaws.",
        "Ask again at dawn.",
    ]
    assert (last["swipe_id"], last["mes"]) == (2, "Ask again at dawn.")


def test_a_redacted_imported_line_is_blanked_and_the_event_left_as_it_was() -> None:
    events = numbered(LONG.read_bytes())
    state = chat.new_chat(ChatBinding("st-abc", "st-abc", "A", "U"), events[0].ts, BERLIN)
    state.redacted = {5}
    for event in events:
        chat.apply(state, event, BERLIN)
    assert state.messages[1]["mes"] == chat.REDACTED
    assert events[4].payload.imported["mes"].startswith("Is anyone here?")


def test_a_greeting_is_the_first_line_as_get_first_message_writes_it() -> None:
    state = chat.new_chat(
        ChatBinding("s1", "s1", "Mira", "Ren"), datetime(2026, 12, 1, tzinfo=UTC), UTC
    )
    greeting = AssistantMessage(
        id="e-greet",
        session_id="s1",
        seq=3,
        ts=datetime(2026, 12, 1, 21, 20, tzinfo=UTC),
        turn=1,
        form="greeting",
        payload=AssistantMessagePayload(
            content="Hello Ren.", swipes=("Hello {{user}}.", "Evening, {{user}}.")
        ),
    )
    chat.apply(state, greeting, UTC)
    (line,) = state.messages
    assert list(line) == [
        "name",
        "is_user",
        "is_system",
        "send_date",
        "mes",
        "extra",
        "swipe_id",
        "swipes",
        "swipe_info",
    ]
    assert (line["name"], line["mes"], line["swipe_id"], line["swipe_info"]) == (
        "Mira",
        "Hello Ren.",
        0,
        [],
    )
    assert line["swipes"] == ["Hello {{user}}.", "Evening, {{user}}."]
    assert line["send_date"] == "December 1, 2026 9:20pm"
    assert line["extra"]["agentTavern"]["eventSeq"] == 3
