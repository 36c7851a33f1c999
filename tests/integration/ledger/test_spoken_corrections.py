"""Corrections said in chat, under the shipped defaults: the earlier claim they contradict is
superseded with lineage and audit (the messages stay as they were said), in English and in
Chinese, within a session and across sessions and chats of a character; as-of before the
correction still shows the old fact; a correction that matches nothing takes nothing away; a
redelivery changes nothing."""
# ruff: noqa: RUF001 - full-width punctuation is test data

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.ledger.conftest import LedgerBus
from tests.unit.ledger.builders import at, session_created, user_message

pytestmark = pytest.mark.integration


async def _ingest(ledger: LedgerBus, *events: object) -> int:
    last = 0
    for event in events:
        last = await ledger.publish(event)  # type: ignore[arg-type]
    await ledger.ingested_through(last)
    return last


async def _by_text(ledger: LedgerBus, **where: object) -> dict[str, dict[str, Any]]:
    """The claims cut from the messages matching `where`, by their text."""
    return {str(r["content"]): r for r in await ledger.evidence(claims=True, **where)}


async def test_a_correction_in_the_same_session_supersedes_the_fact_it_contradicts(
    ledger: LedgerBus,
) -> None:
    await _ingest(
        ledger,
        session_created("s1", chat_id="chat-a", character_id="mira"),
        user_message("s1", 2, "I live in Paris"),
        user_message("s1", 3, "My sister lives in Lyon"),
        user_message("s1", 4, "I work at the Louvre bookshop"),
        user_message("s1", 20, "Actually, I moved to Berlin last month"),
    )
    rows = await _by_text(ledger, session_id="s1")
    old, new = rows["I live in Paris"], rows["I moved to Berlin last month"]
    assert old["state"] == "superseded"
    assert old["valid_until"] == at(20)
    assert (new["state"], new["source_class"], new["claim_kind"], list(new["supersedes"])) == (
        "active",
        "user_correction",
        "correction",
        [old["id"]],
    )
    messages = await ledger.evidence(session_id="s1")
    assert [m["state"] for m in messages] == ["active"] * 4  # as they were said
    assert rows["My sister lives in Lyon"]["state"] == "active"
    assert rows["I work at the Louvre bookshop"]["state"] == "active"

    now = await ledger.rpc("recall", session_id="s1", query="where do I live?")
    assert "Berlin" in now["text"]
    assert "I live in Paris" not in now["text"]
    before = await ledger.rpc(
        "recall", session_id="s1", query="where do I live?", as_of=at(10).isoformat()
    )
    assert "I live in Paris" in before["text"]
    assert "Berlin" not in before["text"]

    superseded = (await ledger.rpc("audit", op="supersede"))["items"]
    assert [(e["target_id"], e["actor"]) for e in superseded] == [(old["id"], "user")]
    [correct] = (await ledger.rpc("audit", op="correct"))["items"]
    assert correct["target_id"] == new["id"]
    history = await ledger.rpc("history", evidence_id=new["id"])
    assert old["id"] in str(history)


async def test_a_chinese_correction_in_another_chat_of_the_character_supersedes(
    ledger: LedgerBus,
) -> None:
    await _ingest(
        ledger,
        session_created("a1", chat_id="chat-a", character_id="mira"),
        user_message("a1", 2, "我住在北京"),
        user_message("a1", 3, "我妹妹住在天津"),
        session_created("b1", chat_id="chat-b", character_id="mira"),
        user_message("b1", 2, "更正：我现在搬到上海了", ts=at(40)),
        session_created("c1", chat_id="chat-c", character_id="mira"),
    )
    a = await _by_text(ledger, session_id="a1")
    [b] = await ledger.evidence(claims=True, session_id="b1")
    assert a["我住在北京"]["state"] == "superseded"
    assert a["我妹妹住在天津"]["state"] == "active"
    assert list(b["supersedes"]) == [a["我住在北京"]["id"]]
    later = await ledger.rpc("recall", session_id="c1", query="我住在哪里")
    assert "上海" in later["text"]
    assert "我住在北京" not in later["text"]


async def test_a_correction_that_matches_nothing_takes_nothing_away(ledger: LedgerBus) -> None:
    await _ingest(
        ledger,
        session_created("s1", chat_id="chat-a", character_id="mira"),
        user_message("s1", 2, "I drive a blue Toyota"),
        user_message("s1", 3, "Kevin coaches a youth team in Leeds"),
        user_message("s1", 4, "Correction: my dentist appointment is on Friday, not Monday"),
        user_message("s1", 5, "其实我的猫叫咪咪"),
    )
    rows = await ledger.evidence(claims=True, session_id="s1")
    assert [r["state"] for r in rows] == ["active"] * 4
    assert all(list(r["supersedes"]) == [] for r in rows)
    assert (await ledger.rpc("audit", op="supersede"))["items"] == []


async def test_a_redelivered_correction_supersedes_once(ledger: LedgerBus) -> None:
    correction = user_message("s1", 9, "Correction: Kevin now coaches in Manchester")
    await _ingest(
        ledger,
        session_created("s1", chat_id="chat-a", character_id="mira"),
        user_message("s1", 2, "Kevin coaches a youth team in Leeds"),
        correction,
    )
    last = await ledger.publish(correction, msg_id="redelivered-copy")
    await ledger.ingested_through(last)
    await ledger.settled()
    assert len((await ledger.rpc("audit", op="supersede"))["items"]) == 1
    assert len((await ledger.rpc("audit", op="correct"))["items"]) == 1
    states = sorted(r["state"] for r in await ledger.evidence(claims=True, session_id="s1"))
    assert states == ["active", "superseded"]
