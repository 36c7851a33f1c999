"""Memory as users get it, under the shipped defaults: what a person stated as fact in one
session is recalled in later sessions of the chat and in new chats with the same character;
their directives to the assistant stay in the session they were given in; a private chat keeps
its memory to itself; an as-of recall is the view of its moment."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tavern_events.group import GroupBinding
from tavern_ledger.evidence import lexicon
from tests.integration.ledger.conftest import LedgerBus
from tests.unit.ledger.builders import at, session_created, user_message

pytestmark = pytest.mark.integration


async def _ingest(ledger: LedgerBus, *events: object) -> None:
    last = 0
    for event in events:
        last = await ledger.publish(event)  # type: ignore[arg-type]
    await ledger.ingested_through(last)


async def test_a_fact_reaches_later_sessions_and_new_chats_with_the_character(
    ledger: LedgerBus,
) -> None:
    await _ingest(
        ledger,
        session_created("a1", chat_id="chat-a", character_id="mira"),
        user_message("a1", 2, "My sister Ines works as a pediatric nurse in Porto"),
        session_created("a2", chat_id="chat-a", character_id="mira"),
        session_created("b1", chat_id="chat-b", character_id="mira"),
        session_created("z1", chat_id="chat-z", character_id="other"),
    )
    for session in ("a2", "b1"):
        reply = await ledger.rpc("recall", session_id=session, query="what does Ines do?")
        assert "pediatric nurse in Porto" in reply["text"], session
        assert "earlier session a1" in reply["text"]
    elsewhere = await ledger.rpc("recall", session_id="z1", query="what does Ines do?")
    assert "Porto" not in elsewhere["text"]


async def test_a_directive_stays_in_its_session_while_facts_cross(ledger: LedgerBus) -> None:
    await _ingest(
        ledger,
        session_created("a1", chat_id="chat-a", character_id="mira"),
        user_message("a1", 2, "From now on always answer me in French"),
        user_message("a1", 3, "以后请用英文回答我的问题"),
        user_message("a1", 4, "I speak French at home with my grandmother"),
        session_created("a2", chat_id="chat-a", character_id="mira"),
    )
    same = await ledger.rpc("recall", session_id="a1", query="answer in French or English?")
    assert "always answer me in French" in same["text"]
    later = await ledger.rpc("recall", session_id="a2", query="answer in French or English?")
    assert "French at home with my grandmother" in later["text"]
    assert "always answer me in French" not in later["text"]
    assert "英文回答" not in later["text"]


async def test_a_private_chat_keeps_its_memory_to_itself(ledger: LedgerBus) -> None:
    await _ingest(
        ledger,
        session_created("p1", chat_id="chat-p", character_id="mira", memory_reach="chat"),
        user_message("p1", 2, "I am planning a surprise party for Dana on Friday"),
        session_created("b1", chat_id="chat-b", character_id="mira"),
        user_message("b1", 2, "Dana loves chocolate cake"),
        session_created("p2", chat_id="chat-p", character_id="mira", memory_reach="chat"),
    )
    outside = await ledger.rpc("recall", session_id="b1", query="Dana surprise party Friday")
    assert "surprise party" not in outside["text"]
    inside = await ledger.rpc("recall", session_id="p2", query="Dana surprise party chocolate")
    assert "surprise party" in inside["text"]
    assert "chocolate cake" not in inside["text"]


async def test_as_of_recall_takes_no_carry_over_from_the_live_session(ledger: LedgerBus) -> None:
    await _ingest(
        ledger,
        session_created("s1", chat_id="chat-s", character_id="mira"),
        user_message("s1", 2, "The team meets in room Lisbon on Mondays"),
        user_message("s1", 30, "The team also meets in room Oslo some Mondays"),
    )
    query = "room Oslo Lisbon Mondays"
    after_both = (at(30) + timedelta(seconds=1)).isoformat()
    asked: dict[str, Any] = {"session_id": "s1", "query": query, "explain": True, "turn": 3}
    fresh = await ledger.rpc("recall", **asked, step=2, as_of=after_both)
    live = await ledger.rpc("recall", **asked, step=1)
    assert "room Oslo" in live["text"]
    assert "room Lisbon" in live["text"]
    # The next step's as-of recall: the live step's items would carry a hysteresis boost.
    again = await ledger.rpc("recall", **asked, step=2, as_of=after_both)
    assert [(i["evidence_id"], i["score"]) for i in again["ranked"]] == [
        (i["evidence_id"], i["score"]) for i in fresh["ranked"]
    ]
    old_view = await ledger.rpc("recall", **asked, step=2, as_of=at(10).isoformat())
    assert "room Lisbon" in old_view["text"]
    assert "room Oslo" not in old_view["text"]


async def test_messages_stored_before_claims_were_filed_are_filed_once_at_start(
    ledger: LedgerBus,
) -> None:
    await _ingest(
        ledger,
        session_created("a1", chat_id="chat-a", character_id="mira"),
        user_message("a1", 2, "Always answer me in French"),
        user_message("a1", 3, "I grew up in Marseille"),
    )
    # As rows were filed before: every message of a person a `user_fact`.
    await ledger.db.execute("UPDATE ledger.evidence SET claim_domain = 'user_fact'")
    await ledger.db.execute("UPDATE ledger.lexicon SET claims_version = 0")
    assert await lexicon.reclassify_claims(ledger.db) == 2  # the message and its claim
    assert await lexicon.reclassify_claims(ledger.db) is None
    domains = {r["content"]: r["claim_domain"] for r in await ledger.evidence(session_id="a1")}
    assert domains == {"Always answer me in French": "style", "I grew up in Marseille": "user_fact"}


async def test_a_group_member_recalls_its_own_memory_beside_the_group_chats(
    ledger: LedgerBus,
) -> None:
    group = GroupBinding.model_validate(
        {"group_id": "g1", "members": [{"character_id": "mira"}, {"character_id": "cael"}]}
    )
    await _ingest(
        ledger,
        session_created("m1", chat_id="chat-m", character_id="mira"),
        user_message("m1", 2, "My sister Ines works as a pediatric nurse in Porto"),
        # as the loop creates a group chat: its own memory is its chat's
        session_created("g1", character_id="mira", memory_reach="chat", group=group),
        user_message("g1", 2, "The lighthouse bell rang at midnight for Ines"),
    )
    query = "what about Ines: her work and the bell?"
    mira = await ledger.rpc(
        "recall", session_id="g1", query=query, member="mira", member_name="Mira", explain=True
    )
    chat_part, _, own_part = mira["text"].partition("[Mira's own memory]")
    assert chat_part.startswith("[This group chat's memory]\n")
    assert "bell rang at midnight" in chat_part
    assert "pediatric nurse in Porto" in own_part, "Mira's memory from her own chat"
    assert "earlier session m1" in own_part
    whose = {item["memory"] for item in mira["items"]}
    assert whose == {"[This group chat's memory]", "[Mira's own memory]"}

    cael = await ledger.rpc("recall", session_id="g1", query=query, member="cael")
    assert "bell rang at midnight" in cael["text"]
    assert "pediatric nurse" not in cael["text"], "not Cael's memory"
    plain = await ledger.rpc("recall", session_id="g1", query=query)
    assert "pediatric nurse" not in plain["text"], "the group chat's memory alone"
    assert "[This group chat" not in plain["text"]
