"""Ingestion from the SESSIONS stream: idempotent, gated, audited, poison-tolerant."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavern_events.ids import new_id
from tavern_events.streams import DLQ
from tests.integration.ledger.conftest import LedgerBus
from tests.support import eventually
from tests.unit.ledger.builders import (
    assistant_message,
    session_created,
    tool_result,
    user_message,
)

pytestmark = pytest.mark.integration


async def test_same_event_delivered_three_times_stores_one_evidence_row(ledger: LedgerBus) -> None:
    event = user_message("s1", 2, "I like green tea in the morning")
    for _ in range(3):  # three stored copies: a redelivery, a replay, a duplicate publish
        last = await ledger.publish(event, msg_id=new_id())
    await ledger.ingested_through(last)
    await ledger.settled()
    rows = await ledger.evidence(session_id="s1")
    assert [(r["content"], r["source_class"], r["state"]) for r in rows] == [
        ("I like green tea in the morning", "user_input", "active")
    ]
    appended = await ledger.db.fetchval(
        "SELECT count(*) FROM ledger.audit WHERE op = 'append' AND target_id = $1", rows[0]["id"]
    )
    assert appended == 1


async def test_only_human_input_and_tool_output_become_evidence(ledger: LedgerBus) -> None:
    await ledger.publish(session_created("s1"))
    await ledger.publish(user_message("s1", 2, "Please keep configs apart from code"))
    await ledger.publish(assistant_message("s1", 3, "Understood, I will keep them apart"))
    await ledger.publish(
        user_message("s1", 4, "[recall] old memory", source="plugin:ledger", form="recall")
    )
    await ledger.publish(
        user_message("s1", 5, "You repeated a tool", source="plugin:repeat-tool-reminder")
    )
    await ledger.publish(tool_result("s1", 6, "done"))  # a machine receipt
    last = await ledger.publish(tool_result("s1", 7, "Paris has 2.1 million inhabitants"))
    await ledger.ingested_through(last)
    rows = await ledger.evidence(session_id="s1")
    assert [(r["source_class"], r["source_label"]) for r in rows] == [
        ("user_input", "user"),
        ("external_tool", "tool:web_fetch"),
    ]


async def test_secret_in_a_user_message_is_never_stored_and_the_reason_is_audited(
    ledger: LedgerBus,
) -> None:
    event = user_message("s1", 2, "my aws key is AKIAIOSFODNN7EXAMPLE keep it safe")
    last = await ledger.publish(event)
    await ledger.ingested_through(last)
    assert await ledger.evidence(session_id="s1") == []
    stored = await ledger.db.fetchval(
        "SELECT count(*) FROM ledger.evidence WHERE content LIKE '%AKIA%'"
    )
    assert stored == 0
    row = await ledger.db.fetchrow(
        "SELECT reason, payload::text AS payload FROM ledger.audit WHERE op = 'ingest_blocked'"
    )
    assert "secret:aws_access_key" in row["reason"]
    assert "AKIA" not in row["payload"]


async def test_subagent_user_messages_are_downgraded(ledger: LedgerBus) -> None:
    await ledger.publish(session_created("sub1", source="agent:main"))
    last = await ledger.publish(user_message("sub1", 2, "Summarise the repository layout"))
    await ledger.ingested_through(last)
    [row] = await ledger.evidence(session_id="sub1")
    assert (row["source_class"], row["authority"], row["claim_domain"], row["session_type"]) == (
        "agent_authored",
        "agent_inference",
        "experience",
        "subagent",
    )


async def test_poison_message_goes_to_the_dlq_and_ingestion_continues(ledger: LedgerBus) -> None:
    await ledger.publish_raw("tavern.session.s1.user.message", b"{not json")
    last = await ledger.publish(user_message("s1", 2, "The build uses make, not cmake"))
    await ledger.ingested_through(last)
    await ledger.settled()
    assert [r["content"] for r in await ledger.evidence(session_id="s1")] == [
        "The build uses make, not cmake"
    ]

    async def dead_letter() -> dict[str, object] | None:
        msg = await ledger.js.get_last_msg(DLQ.name, "tavern.dlq.ledger")
        return json.loads(msg.data) if msg.data else None

    record = await eventually(dead_letter, timeout=10)
    assert (record["consumer"], record["stream_seq"]) == ("ledger-ingest", 1)


async def test_evidence_facts_are_published_once_with_the_evidence_id(ledger: LedgerBus) -> None:
    event = user_message("s1", 2, "Deploy on Fridays is forbidden here")
    await ledger.publish(event, msg_id=new_id())
    last = await ledger.publish(event, msg_id=new_id())
    await ledger.ingested_through(last)
    [row] = await ledger.evidence(session_id="s1")
    [claim] = await ledger.evidence(claims=True, session_id="s1")

    async def facts() -> list[dict[str, Any]]:
        info = await ledger.js.stream_info("LEDGER")
        assert info.state.messages == 2  # the message and its one claim, each once
        found = [await ledger.js.get_msg("LEDGER", seq) for seq in (1, 2)]
        return [json.loads(m.data or b"{}") for m in found]

    message_fact, claim_fact = await eventually(facts, timeout=10)
    assert message_fact["id"] == message_fact["payload"]["evidence_id"] == row["id"]
    assert message_fact["payload"]["claim_kind"] == "message"
    assert claim_fact["id"] == claim_fact["payload"]["evidence_id"] == claim["id"]
    assert (claim_fact["payload"]["claim_kind"], claim_fact["payload"]["claim_of"]) == (
        "fact",
        row["id"],
    )


async def test_a_message_that_fails_inside_a_batch_is_isolated_and_dead_lettered(
    ledger: LedgerBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tavern_ledger.domain import admission, ingestion

    real = admission.admit_draft

    def fragile(draft, scope_id, gate):  # type: ignore[no-untyped-def]
        if "explode" in draft.text:
            raise ValueError("cannot store this one")
        return real(draft, scope_id, gate)

    monkeypatch.setattr(ingestion, "admit_draft", fragile)
    await ledger.publish(user_message("s1", 2, "first fine message"))
    await ledger.publish(user_message("s1", 3, "this one will explode"))
    last = await ledger.publish(user_message("s1", 4, "last fine message"))
    await ledger.ingested_through(last)
    await ledger.settled()
    contents = [r["content"] for r in await ledger.evidence(session_id="s1")]
    assert contents == ["first fine message", "last fine message"]

    async def parked() -> dict[str, object]:
        msg = await ledger.js.get_last_msg(DLQ.name, "tavern.dlq.ledger")
        assert msg.data is not None
        found: dict[str, object] = json.loads(msg.data)
        return found

    record = await eventually(parked, timeout=10)
    assert record["stream_seq"] == 2
    assert "cannot store this one" in str(record["reason"])


async def test_a_session_is_scoped_and_typed_by_its_creation_whatever_order_batches_commit(
    ledger: LedgerBus,
) -> None:
    """Replicas share the ingest durable, so a batch with a session's first messages may commit
    before the batch with its `session/created`. Stored in that order here: the scope (its chat)
    and the type (a subagent) still come from the creation in the log."""
    await ledger.js.pause_consumer("SESSIONS", "ledger-ingest", "2099-01-01T00:00:00Z")
    await ledger.publish(user_message("late1", 2, "Summarise the open pull requests"))
    await ledger.publish(user_message("never", 2, "A session whose log has no creation"))
    last = await ledger.publish(session_created("late1", chat_id="chat-l", source="agent:main"))
    await ledger.js.resume_consumer("SESSIONS", "ledger-ingest")
    await ledger.ingested_through(last)

    [row] = await ledger.evidence(session_id="late1")
    assert (row["scope_id"], row["session_type"], row["authority"]) == (
        "chat-l",
        "subagent",
        "agent_inference",
    )
    [orphan] = await ledger.evidence(session_id="never")
    assert (orphan["scope_id"], orphan["session_type"]) == ("never", "root")
