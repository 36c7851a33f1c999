"""Memory as a user meets it, through the four service processes with the shipped defaults and
the offline model: a fact told in one session is recalled in the next session of the chat and
in a new chat with the same character, a directive is not, and a correction said in chat (in
English and in Chinese, in the same session or another chat) replaces the fact it contradicts
in what the next session is given."""
# ruff: noqa: RUF001 - full-width punctuation is test data

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tavern_events.message import UserMessage
from tavern_runtime.sessionlog import SessionLogReader
from tests.reliability.driver import Driver
from tests.reliability.stack import Stack, running_stack
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
async def system() -> AsyncIterator[tuple[Stack, Driver]]:
    async with running_stack() as stack:
        assert stack.nc is not None
        driver = Driver(stack.nc)
        await driver.open()
        try:
            yield stack, driver
        finally:
            await driver.close()


async def _open(driver: Driver, session: str, chat: str) -> None:
    sent = await driver.command(session, "create", {"chat_id": chat, "character_id": "mira"})
    assert await driver.wait(sent), f"create {session}"
    assert sent.outcome == "completed"


async def _say(driver: Driver, session: str, text: str) -> None:
    sent = await driver.say(session, text)
    assert await driver.wait(sent), f"{session}: {text}"
    assert sent.outcome == "completed"


async def _stored(stack: Stack, *texts: str) -> None:
    """Wait until ingestion holds each text as a message (it runs beside the loop, not in its
    turn)."""
    db = await asyncpg.connect(stack.database_url)
    try:

        async def check() -> bool:
            found = await db.fetchval(
                "SELECT count(*) FROM ledger.evidence WHERE content = ANY($1::text[]) "
                "AND claim_kind = 'message'",
                list(texts),
            )
            return bool(found == len(texts))

        await eventually(check, timeout=30)
    finally:
        await db.close()


async def _recalled(stack: Stack, session: str) -> str:
    """What the ledger gave the session's last step (its recall injection)."""
    events = await SessionLogReader(stack.js).events(session)
    injected = [e for e in events if isinstance(e, UserMessage) and e.form == "recall"]
    return injected[-1].payload.text if injected else ""


async def test_facts_cross_sessions_and_chats_directives_do_not(
    system: tuple[Stack, Driver],
) -> None:
    stack, driver = system
    fact = "My sister Ines works as a pediatric nurse in Porto"
    directive = "From now on always answer me in French"
    await _open(driver, "a1", "chat-a")
    await _say(driver, "a1", fact)
    await _say(driver, "a1", directive)
    await _stored(stack, fact, directive)

    for session, chat in (("a2", "chat-a"), ("b1", "chat-b")):
        await _open(driver, session, chat)
        await _say(driver, session, "What does Ines do for work, and how should you answer me?")
        recall = await _recalled(stack, session)
        assert "pediatric nurse in Porto" in recall, (session, recall)
        assert "earlier session" in recall
        assert "answer me in French" not in recall, (session, recall)


async def test_corrections_said_in_chat_replace_the_fact_in_later_sessions(
    system: tuple[Stack, Driver],
) -> None:
    stack, driver = system
    await _open(driver, "a1", "chat-a")
    await _say(driver, "a1", "Kevin coaches a youth football team in Manchester")
    await _say(driver, "a1", "我住在北京")
    await _say(driver, "a1", "更正：我现在搬到上海了")
    await _open(driver, "b1", "chat-b")
    correction = "Actually, Kevin coaches in Leeds now"
    await _say(driver, "b1", correction)
    await _stored(stack, correction, "更正：我现在搬到上海了")

    await _open(driver, "c1", "chat-c")
    await _say(driver, "c1", "Where does Kevin coach? 我住在哪里？")
    recall = await _recalled(stack, "c1")
    assert "Leeds" in recall, recall
    assert "Manchester" not in recall, recall
    assert "上海" in recall, recall
    assert "我住在北京" not in recall, recall
