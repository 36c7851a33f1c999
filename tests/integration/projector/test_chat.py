"""The chat projection against a real loop: SillyTavern JSONL, exactly once, rebuildable."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.request import AgentRequest
from tavern_projector.domain.stformat import MONTHS
from tavern_runtime.cards import importer
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import scripted_turn

pytestmark = pytest.mark.integration

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"


def st_date(event: SessionEvent) -> str:
    ts = event.ts.astimezone(UTC)
    hour, half = ts.hour % 12 or 12, "pm" if ts.hour >= 12 else "am"
    return f"{MONTHS[ts.month - 1]} {ts.day}, {ts.year} {hour}:{ts.minute:02d}{half}"


def js_date(event: SessionEvent) -> str:
    ts = event.ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def mark(event: SessionEvent, **more: Any) -> dict[str, Any]:
    return {
        "architecture": "agent-tavern",
        "contextMode": "dsh-native",
        "sessionId": event.session_id,
        "eventSeq": event.seq,
        "messageId": event.id,
        "turn": event.turn,
        "step": event.step,
        **more,
    }


def expected_lines(log: list[SessionEvent], character: str, user: str) -> list[dict[str, Any]]:
    """What SillyTavern would have written for this log, built independently of the projector."""
    lines, started = [], None
    for event in log:
        if isinstance(event, AgentRequest):
            started = event
        if isinstance(event, UserMessage) and event.source == "user":
            extra = {"isSmallSys": False, "agentTavern": mark(event)}
            lines.append(
                {
                    "name": user,
                    "is_user": True,
                    "is_system": False,
                    "send_date": st_date(event),
                    "mes": event.payload.text,
                    "extra": extra,
                }
            )
        if isinstance(event, AssistantMessage) and not event.payload.tool_calls:
            p = event.payload
            extra = {"api": p.provider, "model": p.model, "agentTavern": mark(event)}
            gen = {
                "send_date": st_date(event),
                "gen_started": js_date(started or event),
                "gen_finished": js_date(event),
            }
            lines.append(
                {
                    "extra": extra,
                    "name": character,
                    "is_user": False,
                    "send_date": st_date(event),
                    "mes": p.content,
                    "gen_started": gen["gen_started"],
                    "gen_finished": gen["gen_finished"],
                    "swipe_info": [{**gen, "extra": extra}],
                    "swipe_id": 0,
                    "swipes": [p.content],
                }
            )
    return lines


async def import_fixture(projector: Projector, name: str) -> str:
    published = await importer.import_file(
        projector.bus.js, CARDS / name, projector.settings.data_dir
    )
    return published.asset.asset_id


async def test_conversation_writes_a_sillytavern_chat_field_by_field(projector: Projector) -> None:
    character = await import_fixture(projector, "v2_mira.png")
    persona = await import_fixture(projector, "persona_ren.json")
    await projector.caught_up("assets")
    await projector.create_session("s1", character_id=character, persona_id=persona)
    await projector.bus.engine()
    await projector.bus.say("s1", "Hello, is anyone here?")
    await projector.bus.turns_ended("s1", 1)
    await projector.bus.say("s1", 'call echo with {"text": "lantern"}')
    log = await projector.bus.turns_ended("s1", 2)
    await projector.caught_up("chat")

    path = projector.chat_file("v2_mira/s1")
    data = path.read_bytes()
    header, *lines = [json.loads(line) for line in data.decode().splitlines()]
    created = log[0]
    assert header == {
        "user_name": "Ren",
        "character_name": "Mira",
        "create_date": created.ts.astimezone(UTC).strftime("%Y-%m-%d@%Hh%Mm%Ss"),
        "chat_metadata": {"agentTavern": {"sessionId": "s1"}},
    }
    expected = expected_lines(log, "Mira", "Ren")
    assert [line["is_user"] for line in expected] == [True, False, True, False]
    for got, want in zip(lines, expected, strict=True):
        assert list(got) == list(want), "keys in SillyTavern's order"
        assert got == want
    compact = [
        json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in [header, *expected]
    ]
    assert data == ("\n".join(compact) + "\n").encode(), "compact JSON, one object per line"
    row = await projector.chat_row("s1")
    assert (row["status"], row["message_count"], row["chat_key"]) == ("ok", 4, "v2_mira/s1")


async def test_a_message_held_by_a_lost_fetch_is_still_projected_in_order(
    idle_projector: Projector,
) -> None:
    projector = idle_projector
    await projector.create_session("s1", chat_id="tale")
    await scripted_turn(projector, "s1", 1, "first", "one")
    # A fetch that took session/created and was lost: it stays unacknowledged for ack_wait.
    lost = await projector.bus.js.pull_subscribe_bind(durable="projector-chat", stream="SESSIONS")
    held = await lost.fetch(1, timeout=5)
    assert held[0].subject.endswith("session.created")
    await projector.start()
    await scripted_turn(projector, "s1", 2, "second", "two")
    await projector.caught_up("chat")
    lines = projector.chat_file("Assistant/tale").read_text().splitlines()
    assert json.loads(lines[0])["chat_metadata"] == {"agentTavern": {"sessionId": "s1"}}
    assert [json.loads(x)["mes"] for x in lines[1:]] == ["first", "one", "second", "two"]
    status = await projector.rpc("status", {})
    chat = next(p for p in status["projections"] if p["projection"] == "chat")
    assert chat["gaps_filled"] >= 1


async def test_a_malformed_event_is_dead_lettered_and_passed_over(projector: Projector) -> None:
    await projector.create_session("s1")
    await scripted_turn(projector, "s1", 1, "first", "one")
    ack = await projector.bus.js.publish("tavern.session.sx.user.message", b"{not json")
    await scripted_turn(projector, "s1", 2, "second", "two")
    await projector.caught_up()
    lines = projector.chat_file("Assistant/s1").read_text().splitlines()
    assert [json.loads(x)["mes"] for x in lines[1:]] == ["first", "one", "second", "two"]
    letter = await projector.bus.js.get_last_msg("DLQ", "tavern.dlq.projector")
    record = json.loads(letter.data or b"{}")
    assert (record["stream"], record["stream_seq"]) == ("SESSIONS", ack.seq)
    assert "not JSON" in record["reason"]
