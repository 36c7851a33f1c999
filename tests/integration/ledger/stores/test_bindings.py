"""The `ledger-bindings` consumer: bindings from the session log, idempotent and ordered by seq."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_events.dlq import decode_dead_letter
from tavern_events.ids import new_id
from tavern_events.session import SessionBindingChanged
from tavern_events.union import encode, subject_for
from tests.integration.ledger.stores.conftest import Ledger, created
from tests.support import eventually

pytestmark = pytest.mark.integration


def to_st(session_id: str, seq: int) -> SessionBindingChanged:
    return SessionBindingChanged.model_validate(
        {
            "id": new_id(),
            "session_id": session_id,
            "seq": seq,
            "ts": datetime.now(UTC),
            "payload": {
                "from_architecture": "agent-tavern",
                "from_context_mode": "dsh-native",
                "to_architecture": "st",
            },
        }
    )


async def redeliver(ledger: Ledger, event: object) -> None:
    """The same event again, as a redelivery would hand it to the handler."""
    await ledger.js.publish(
        subject_for(event),  # type: ignore[arg-type]
        encode(event),  # type: ignore[arg-type]
        headers={"Nats-Msg-Id": new_id()},
    )


async def settled(ledger: Ledger) -> bool:
    info = await ledger.js.consumer_info("SESSIONS", "ledger-bindings")
    return bool(info.num_pending == 0 and info.num_ack_pending == 0)


async def test_binding_is_kept_from_session_created(ledger: Ledger) -> None:
    event = created("s1", "chat_1", "char_a", 1, persona_id="p1", agent_id="narrator")
    await ledger.append(event)
    row = await ledger_binding(ledger, "s1")
    assert (row["chat_id"], row["character_id"], row["persona_id"], row["agent_id"]) == (
        "chat_1",
        "char_a",
        "p1",
        "narrator",
    )
    assert (row["architecture"], row["context_mode"], row["updated_seq"]) == (
        "agent-tavern",
        "dsh-native",
        1,
    )


async def ledger_binding(ledger: Ledger, session_id: str) -> dict[str, object]:
    found: dict[str, object] = await eventually(lambda: ledger.binding(session_id), timeout=10)
    return found


async def test_bindings_consumer_is_idempotent_under_redelivery_and_ordered_by_seq(
    ledger: Ledger,
) -> None:
    first = created("s9", "chat_9", None, 1)
    change = to_st("s9", 2)
    await ledger.append(change)  # before its session/created: nacked, delivered again later
    await ledger.append(first)

    async def switched() -> bool:
        row = await ledger.binding("s9")
        return row is not None and row["architecture"] == "st"

    await eventually(switched, timeout=15)
    for event in (first, change, first):
        await redeliver(ledger, event)
    await eventually(lambda: settled(ledger), timeout=10)
    row = await ledger.binding("s9")
    assert row is not None
    assert (row["architecture"], row["context_mode"], row["updated_seq"]) == ("st", None, 2)
    assert row["chat_id"] == "chat_9"
    count = await ledger.db.fetchval("SELECT count(*) FROM ledger.session_binding")
    assert count == 1


async def test_malformed_session_event_is_dead_lettered_and_the_consumer_moves_on(
    ledger: Ledger,
) -> None:
    await ledger.js.publish("tavern.session.s5.session.created", b'{"type": "session/created"}')
    await ledger.open_session("s6", "chat_6")

    async def parked() -> bool:
        info = await ledger.js.stream_info("DLQ")
        return info.state.messages >= 1

    await eventually(parked, timeout=10)
    record = decode_dead_letter((await ledger.js.get_msg("DLQ", 1)).data or b"")
    assert (record.stream, record.stream_seq) == ("SESSIONS", 1)
    assert record.subject == "tavern.session.s5.session.created"
    await eventually(lambda: settled(ledger), timeout=10)
    assert await ledger.binding("s5") is None


async def test_a_request_ahead_of_the_bindings_consumer_reads_the_binding_from_the_log(
    ledger: Ledger,
) -> None:
    """Under load the bindings consumer can lag far behind; a session's first tool call must
    not fail with unknown_session: the store reads the binding from the session's log."""
    await ledger.js.pause_consumer("SESSIONS", "ledger-bindings", "2099-01-01T00:00:00Z")
    try:
        await ledger.append(created("s-fresh", "chat-f", "char_f", ledger.next_seq("s-fresh")))
        await ledger.append(to_st("s-fresh", ledger.next_seq("s-fresh")))
        reply = await ledger.call(
            "memory.write",
            {"session_id": "s-fresh", "turn": 1, "scope": "chat", "content": "likes green tea"},
        )
        assert reply.get("error") is None, reply
        binding = await ledger.binding("s-fresh")
        assert binding is not None
        assert (binding["chat_id"], binding["architecture"]) == ("chat-f", "st")
        unknown = await ledger.call(
            "memory.search", {"session_id": "s-never-created", "turn": 1, "query": "tea"}
        )
        assert unknown["error"]["reason"] == "unknown_session"
    finally:
        await ledger.js.resume_consumer("SESSIONS", "ledger-bindings")


async def test_an_event_postgres_refuses_is_dead_lettered_and_the_rest_of_its_batch_applies(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch goes in one transaction; when Postgres refuses it, the consumer applies it event
    by event and parks only the event refused."""
    from tavern_ledger.scopes import bindings
    from tavern_runtime.pgerrors import StoreRejected

    real = bindings.apply

    async def refusing(conn: object, effect: object) -> bindings.Applied:
        if getattr(effect, "session_id", "") == "s-refused":
            raise StoreRejected("CheckViolationError: refused for the test")
        return await real(conn, effect)  # type: ignore[arg-type]

    monkeypatch.setattr(bindings, "apply", refusing)
    await ledger.js.pause_consumer("SESSIONS", "ledger-bindings", "2099-01-01T00:00:00Z")
    await ledger.append(created("s-before", "chat_b", None, 1))
    await ledger.append(created("s-refused", "chat_r", None, 1))
    await ledger.append(created("s-after", "chat_a", None, 1))
    await ledger.js.resume_consumer("SESSIONS", "ledger-bindings")

    await eventually(lambda: settled(ledger), timeout=10)
    assert await ledger.binding("s-before") is not None
    assert await ledger.binding("s-after") is not None
    assert await ledger.binding("s-refused") is None
    parked = await ledger.js.get_last_msg("DLQ", "tavern.dlq.ledger")
    assert parked.data is not None
    record = decode_dead_letter(parked.data)
    assert record.subject == "tavern.session.s-refused.session.created"
    assert "refused for the test" in record.reason


async def test_a_mode_change_of_a_session_never_created_does_not_hold_up_the_consumer(
    ledger: Ledger,
) -> None:
    await ledger.append(to_st("s-orphan", 2))  # its session/created is not in the log
    await ledger.open_session("s-later", "chat_l")  # applied while the orphan waits

    async def handed_back() -> bool:
        info = await ledger.js.consumer_info("SESSIONS", "ledger-bindings")
        return bool(info.num_redelivered >= 1)

    await eventually(handed_back, timeout=10)
    assert await ledger.binding("s-orphan") is None
