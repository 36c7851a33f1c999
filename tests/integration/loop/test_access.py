"""Principals through the running loop: a session belongs to the sender of its first input;
another user's input, and an input without a genuine current principal, is rejected with the
reason and runs nothing; the operator may act in any session; forks keep their owner."""

from __future__ import annotations

from datetime import UTC, datetime

import nats
import pytest
from nats.aio.client import Client

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.input import MessageInput, MessageInputPayload
from tavern_events.union import encode
from tavern_runtime import principals
from tavern_runtime.auth import Credentials
from tests.integration.loop.conftest import LoopBus
from tests.support import TEST_AUTH_KEY, eventually, signed_user

pytestmark = pytest.mark.integration

ALICE, BOB = signed_user("alice"), signed_user("bob")  # signed when used


def ended(events: list[SessionEvent], turn: int) -> tuple[str, str | None]:
    [end] = [e for e in events if e.type == "turn/end" and e.turn == turn]
    return end.payload.outcome, end.payload.reason


def user_texts(events: list[SessionEvent]) -> list[str]:
    return [e.payload.text for e in events if e.type == "user/message" and e.source == "user"]


async def test_a_session_belongs_to_its_first_sender_and_refuses_another_user(
    bus: LoopBus,
) -> None:
    await bus.engine()
    await bus.say("s1", "hello, I am Alice", headers=ALICE)
    events = await bus.turns_ended("s1", 1)
    [created] = [e for e in events if e.type == "session/created"]
    assert created.payload.owner == "alice"
    assert ended(events, 1)[0] == "completed"

    bob_input = await bus.say("s1", "Bob reads along", headers=BOB)
    events = await bus.turns_ended("s1", 2)
    outcome, reason = ended(events, 2)
    assert outcome == "rejected"
    assert reason is not None
    assert f"input {bob_input} refused: forbidden" in reason
    assert "user:bob" in reason
    assert "Bob reads along" not in user_texts(events)

    await bus.say("s1", "still Alice", headers=ALICE)
    events = await bus.turns_ended("s1", 3)
    assert ended(events, 3)[0] == "completed"
    await bus.say("s1", "the operator looks in")  # the bus client signs as the operator
    events = await bus.turns_ended("s1", 4)
    assert ended(events, 4)[0] == "completed"
    assert user_texts(events) == ["hello, I am Alice", "still Alice", "the operator looks in"]


async def test_inputs_without_a_genuine_current_principal_are_rejected(bus: LoopBus) -> None:
    await bus.engine()
    await bus.say("s2", "mine", headers=ALICE)
    await bus.turns_ended("s2", 1)
    forged = Credentials(b"not-the-deployment-key-0123456789abcdef").headers(
        principals.user("alice")
    )
    expired = Credentials(TEST_AUTH_KEY.encode(), clock=lambda: 1_000_000.0).headers(
        principals.user("alice")
    )
    plain = await nats.connect(bus.url)  # publishes without any principal
    try:
        await publish(plain, "s2", "no principal at all", {})
        await publish(plain, "s2", "forged", forged)
        await publish(plain, "s2", "expired", expired)
    finally:
        await plain.close()
    events = await bus.turns_ended("s2", 4)
    reasons = [ended(events, turn) for turn in (2, 3, 4)]
    assert [outcome for outcome, _ in reasons] == ["rejected"] * 3
    assert all("unauthenticated" in (reason or "") for _, reason in reasons)
    assert "signature" in (reasons[1][1] or "")
    assert "expired" in (reasons[2][1] or "")
    assert user_texts(events) == ["mine"]


async def publish(nc: Client, session_id: str, text: str, headers: dict[str, str]) -> None:
    command = MessageInput(
        input_id=new_id(),
        session_id=session_id,
        ts=datetime.now(UTC),
        payload=MessageInputPayload(text=text),
    )
    subject = subjects.session_input(session_id, "message")
    await nc.jetstream().publish(
        subject, encode(command), headers={"Nats-Msg-Id": command.input_id, **headers}
    )


async def test_a_fork_belongs_to_its_parents_owner_and_bob_cannot_fork_alices_session(
    bus: LoopBus,
) -> None:
    await bus.engine()
    await bus.say("s3", "hello", headers=ALICE)
    await bus.turns_ended("s3", 1)
    await bus.command("s3", "fork", headers=BOB, args={"session_id": "s3-bob"})
    events = await bus.turns_ended("s3", 2)
    assert ended(events, 2)[0] == "rejected"
    await bus.command("s3", "fork", headers=ALICE, args={"session_id": "s3-child"})
    events = await bus.turns_ended("s3", 3)
    assert ended(events, 3)[0] == "completed"
    child = await eventually(lambda: bus.log("s3-child"), timeout=10)
    assert child[0].type == "session/created"
    assert child[0].payload.owner == "alice"
    assert await bus.log("s3-bob") == []


async def test_a_user_may_not_bind_a_new_session_to_an_existing_chat(bus: LoopBus) -> None:
    await bus.engine()
    await bus.command("s4", "create", headers=BOB, args={"chat_id": "chat-of-alice"})
    events = await bus.turns_ended("s4", 1)
    [created] = [e for e in events if e.type == "session/created"]
    assert (created.payload.owner, created.payload.chat_id) == ("bob", "s4")
    outcome, reason = ended(events, 1)
    assert outcome != "completed"
    assert "only the operator" in (reason or "")
    await bus.command("s5", "create", args={"chat_id": "chat-kept"})  # as the operator
    events = await bus.turns_ended("s5", 1)
    [created] = [e for e in events if e.type == "session/created"]
    assert (created.payload.owner, created.payload.chat_id) == ("local", "chat-kept")


async def test_bobs_cancel_queued_behind_alices_message_does_not_cancel_her_turn(
    bus: LoopBus,
) -> None:
    # each message and cancel wait together when their session is picked up
    await bus.say("s6", "hello", headers=ALICE)
    await bus.cancel("s6", headers=BOB)
    await bus.say("s7", "hello", headers=ALICE)
    await bus.cancel("s7", headers=ALICE)
    await bus.engine()
    assert ended(await bus.turns_ended("s6", 1), 1)[0] == "completed"
    assert ended(await bus.turns_ended("s7", 1), 1)[0] == "cancelled"
