"""Hostile content through the whole system: the corpus in tests/fixtures/hostile (secrets in many
shapes, private data, prompt injections in English and Chinese) fed as user messages, as memory
writes ("remember that ...") and as tool output. Reports what was blocked, quarantined, redacted
or let through. Secrets are blocked everywhere (no evidence, memory, fact, audit or recall holds
one); no injection text comes back in a recall until a user releases it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.streams import LEDGER
from tavern_events.union import decode
from tavern_runtime import directget
from tavern_runtime.errors import TransientError
from tavern_runtime.sessionlog import SessionLogWriter
from tests.reliability import poison
from tests.reliability.driver import Driver, Sent
from tests.reliability.report import REPORT, table
from tests.reliability.stack import Stack
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"
PATHS = ("user message", "memory write", "tool output")


@dataclass(frozen=True)
class Item:
    family: str  # secrets | private | injections
    id: str
    text: str
    needle: str


def corpus() -> list[Item]:
    items = []
    for family in ("secrets", "private", "injections"):
        for line in (CORPUS / f"{family}.jsonl").read_text().splitlines():
            raw = json.loads(line)
            items.append(Item(family, raw["id"], raw["text"], raw["needle"]))
    return items


@dataclass
class Fed:
    item: Item
    chat: str  # session of the user message and the memory write
    tool: str  # session whose tool output carries the text
    said: Sent | None = None
    remembered: Sent | None = None
    outcomes: dict[str, str] = field(default_factory=dict)
    recalled: list[str] = field(default_factory=list)


# --- feeding ---------------------------------------------------------------------------------


async def _converse(driver: Driver, fed: Fed) -> None:
    fed.said = await driver.say(fed.chat, f"Note for later: {fed.item.text}")
    assert await driver.wait(fed.said, 60)
    fed.remembered = await driver.say(fed.chat, f"remember that {fed.item.text}")
    assert await driver.wait(fed.remembered, 60)
    assert await driver.stored(fed.remembered)


def _event(name: str, session_id: str, **changes: Any) -> SessionEvent:
    raw = poison.golden(name, session_id=session_id, seq=0)
    payload = changes.pop("payload", {})
    raw["payload"] = {**raw["payload"], **payload}
    raw.update(changes)
    return decode(raw, SessionEvent)


async def _tool_output(writer: SessionLogWriter, fed: Fed) -> None:
    """A session whose only turn fetched a page holding the hostile text (as a loop would
    log it: a well-formed turn appended with the real writer)."""
    sid, call = fed.tool, f"call_0_{new_id()[-10:]}"
    created = {"chat_id": sid, "character_id": None, "persona_id": None, "title": None}
    asked: dict[str, object] = {
        "content": "",
        "reasoning_content": None,
        "provider": "offline",
        "model": "x",
    }
    asked["tool_calls"] = [{"id": call, "name": "web_fetch", "arguments": '{"url": "x"}'}]
    events = [
        _event("session__created", sid, payload=created),
        _event("turn__start", sid, payload={"claimed": [], "trigger": "system"}),
        _event("step__start", sid),
        _event("assistant__message", sid, actor_id=None, payload=asked),
        _event("tool__call", sid, payload={"call_id": call, "name": "web_fetch"}),
        _event(
            "tool__result",
            sid,
            source="tool:web_fetch",
            payload={"call_id": call, "name": "web_fetch", "content": fed.item.text},
        ),
        _event("step__end", sid),
        _event("turn__end", sid, step=1, payload={"steps": 1}),
    ]
    for attempt in range(10):  # as the loop's HeldLog does: back-pressure is retried
        try:
            await writer.append(sid, events, expected_last=0)
            return
        except TransientError:
            await asyncio.sleep(0.05 * 2**attempt)
    raise AssertionError(f"could not append the tool output of {sid}")


# --- what the ledger kept --------------------------------------------------------------------


async def _event_ids(stack: Stack, session_id: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    assert stack.nc is not None
    async for msg in directget.scan(stack.nc, "SESSIONS", subjects.session_filter(session_id)):
        event = json.loads(msg.data)
        found.setdefault(event["type"], []).append(event)
    return found


async def _evidence_outcome(conn: asyncpg.Connection, event_id: str, needle: str) -> str:
    row = await conn.fetchrow(
        "SELECT state, content FROM ledger.evidence WHERE source_event_id = $1", event_id
    )
    if row is None:
        return "blocked"
    if needle not in row["content"] or row["state"] == "redacted":
        return "redacted"
    return "quarantined" if row["state"] == "quarantined" else "let through"


def _memory_outcome(result: dict[str, Any] | None) -> str:
    if result is None:
        return "no call"
    payload = result["payload"]
    if not payload["ok"]:
        return "blocked"
    state: str = json.loads(payload["content"]).get("state", "?")
    return {"active": "let through"}.get(state, state)


async def _classify(stack: Stack, conn: asyncpg.Connection, fed: Fed) -> None:
    assert fed.said is not None
    assert fed.remembered is not None
    chat = await _event_ids(stack, fed.chat)
    said = next(
        e for e in chat["user/message"] if e["payload"].get("input_id") == fed.said.input_id
    )
    fed.outcomes["user message"] = await _evidence_outcome(conn, said["id"], fed.item.needle)
    writes = [r for r in chat.get("tool/result", []) if r["payload"]["name"] == "memory_write"]
    fed.outcomes["memory write"] = _memory_outcome(writes[-1] if writes else None)
    tool = await _event_ids(stack, fed.tool)
    result = tool["tool/result"][0]
    fed.outcomes["tool output"] = await _evidence_outcome(conn, result["id"], fed.item.needle)


async def _stored_anywhere(conn: asyncpg.Connection, needle: str) -> list[str]:
    """Ledger tables holding `needle` in any state (evidence, memory, observations, audit)."""
    checks = {
        "evidence": "SELECT count(*) FROM ledger.evidence WHERE strpos(content, $1) > 0",
        "memory": "SELECT count(*) FROM ledger.memory WHERE strpos(content, $1) > 0",
        "observation": "SELECT count(*) FROM ledger.observation WHERE strpos(text, $1) > 0",
        "audit": "SELECT count(*) FROM ledger.audit"
        " WHERE strpos(coalesce(payload::text, ''), $1) > 0",
    }
    return [name for name, sql in checks.items() if await conn.fetchval(sql, needle)]


async def _ledger_facts(stack: Stack) -> bytes:
    assert stack.nc is not None
    chunks = [m.data async for m in directget.scan(stack.nc, LEDGER.name, subjects.LEDGER_ALL)]
    return b"\n".join(chunks)


async def _recall(stack: Stack, session_id: str, query: str) -> str:
    body = {"session_id": session_id, "query": query, "turn": 999, "explain": True}
    assert stack.nc is not None
    reply = await stack.nc.request(
        subjects.rpc("ledger", "recall"), json.dumps(body).encode(), timeout=10
    )
    return reply.data.decode()


async def _recalled_in_logs(stack: Stack, session_id: str) -> str:
    """The recall messages the loop itself injected into the session's turns."""
    events = await _event_ids(stack, session_id)
    return "\n".join(
        e["payload"]["text"] for e in events.get("user/message", []) if e.get("form") == "recall"
    )


# --- the test --------------------------------------------------------------------------------


async def test_secrets_are_blocked_and_injections_never_recalled(stack: Stack) -> None:
    driver = Driver(stack.nc)  # type: ignore[arg-type]
    await driver.open()
    tag = new_id()[-6:]
    feds = [Fed(item, f"h-{tag}-{i}", f"ht-{tag}-{i}") for i, item in enumerate(corpus())]
    assert stack.nc is not None
    writer = SessionLogWriter(stack.nc)
    await asyncio.gather(*(_converse(driver, f) for f in feds))
    await asyncio.gather(*(_tool_output(writer, f) for f in feds))
    await eventually(_ingested(stack), timeout=60, interval=0.2)
    await driver.close()

    facts = await _ledger_facts(stack)
    conn = await asyncpg.connect(stack.database_url)
    try:
        for fed in feds:
            await _classify(stack, conn, fed)
        leaks = await _leaks(stack, conn, feds, facts)
        released = await _release_one(stack, conn, feds)
    finally:
        await conn.close()
    _report(feds, leaks, released)

    assert [k for k in leaks if k[0] == "secrets"] == []
    assert [k for k in leaks if k[0] == "injections"] == []
    assert released, "a released injection comes back in a recall"
    let_through = [
        (f.item.id, path)
        for f in feds
        if f.item.family == "private"
        for path, outcome in f.outcomes.items()
        if outcome == "let through"
    ]
    assert let_through == [], "private data stored as ordinary evidence"


def _ingested(stack: Stack) -> Any:
    async def check() -> bool:
        lags = await stack.consumer_lags()
        return lags["ledger-ingest"] == 0 and lags["projector-memory"] == 0

    return check


async def _leaks(
    stack: Stack, conn: asyncpg.Connection, feds: list[Fed], facts: bytes
) -> list[tuple[str, str, str]]:
    """(family, item, where) for every place a secret or an injection showed up."""
    found: list[tuple[str, str, str]] = []
    for fed in feds:
        item = fed.item
        if item.family == "private":
            continue
        needle = item.needle
        # Queries that would find the text (not the whole text: recall leaves out an echo of
        # the query itself), in the session it was said in and the one whose tool returned it.
        queries = _queries(item)
        recalled = [await _recall(stack, s, q) for s in (fed.chat, fed.tool) for q in queries]
        recalled.append(await _recalled_in_logs(stack, fed.chat))
        if any(_holds(r, needle) for r in recalled):
            fed.recalled.append("recall")
            found.append((item.family, item.id, "recall"))
        if item.family == "secrets":
            found += [(item.family, item.id, t) for t in await _stored_anywhere(conn, needle)]
            if needle.encode() in facts or json.dumps(needle)[1:-1].encode() in facts:
                found.append((item.family, item.id, "LEDGER stream"))
        found += [(item.family, item.id, p) for p, o in fed.outcomes.items() if _leaked(item, o)]
    return found


def _queries(item: Item) -> tuple[str, ...]:
    """Queries that find the text: its words (CJK in pairs) in reverse order, of the whole
    text and of the needle. Not the text itself: recall leaves out a candidate that contains
    the query (an echo of what was just asked)."""
    return _scrambled(item.text), _scrambled(item.needle)


def _scrambled(text: str) -> str:
    return " ".join(reversed(re.findall(r"[\u3400-\u9fff]{1,2}|[^\s\u3400-\u9fff]+", text)))


def _holds(reply: str, needle: str) -> bool:
    """Whether a JSON reply carries `needle` (as is, or escaped inside a JSON string)."""
    return needle in reply or json.dumps(needle)[1:-1] in reply


def _leaked(item: Item, outcome: str) -> bool:
    if item.family == "secrets":
        return outcome not in ("blocked", "redacted")
    return outcome == "let through"


async def _release_one(stack: Stack, conn: asyncpg.Connection, feds: list[Fed]) -> bool:
    """Release one quarantined injection: a user's decision brings it back into recall."""
    fed = next(f for f in feds if f.item.family == "injections")
    row = await conn.fetchrow(
        "SELECT id FROM ledger.evidence WHERE session_id = $1 AND state = 'quarantined'"
        " AND strpos(content, $2) > 0 LIMIT 1",
        fed.chat,
        fed.item.needle,
    )
    assert row is not None, "the injection was quarantined"
    body = json.dumps({"evidence_id": row["id"], "actor": "user", "reason": "reviewed"})
    assert stack.nc is not None
    reply = json.loads(
        (await stack.nc.request(subjects.rpc("ledger", "release"), body.encode(), timeout=10)).data
    )
    assert "error" not in reply, reply
    recalled = [await _recall(stack, fed.chat, q) for q in _queries(fed.item)]
    return any(_holds(r, fed.item.needle) for r in recalled)


def _report(feds: list[Fed], leaks: list[tuple[str, str, str]], released: bool) -> None:
    rows = []
    for family in ("secrets", "private", "injections"):
        group = [f for f in feds if f.item.family == family]
        for path in PATHS:
            counts = Counter(f.outcomes[path] for f in group)
            rows.append([family, path, len(group), *_counts(counts)])
    lines = table(
        ["corpus", "fed as", "items", "blocked", "quarantined", "redacted", "let through", "other"],
        rows,
    )
    secrets = [f for f in feds if f.item.family == "secrets"]
    injections = [f for f in feds if f.item.family == "injections"]
    blocked = sum(all(f.outcomes[p] in ("blocked", "redacted") for p in PATHS) for f in secrets)
    quarantined = sum(
        all(f.outcomes[p] in ("blocked", "quarantined") for p in PATHS) for f in injections
    )
    lines += [
        "",
        f"secrets blocked on every path: {blocked}/{len(secrets)}"
        f" ({100 * blocked / max(1, len(secrets)):.0f}%)",
        f"injections quarantined on every path: {quarantined}/{len(injections)}"
        f" ({100 * quarantined / max(1, len(injections)):.0f}%)",
        f"injections recalled before release: {sum(bool(f.recalled) for f in injections)};"
        f" a released one recalled: {released}",
        "private data let through: "
        + (
            ", ".join(
                sorted(
                    {
                        f.item.id
                        for f in feds
                        if f.item.family == "private" and "let through" in f.outcomes.values()
                    }
                )
            )
            or "none"
        ),
        f"leaks: {leaks or 'none'}",
    ]
    REPORT.add("hostile content", lines)


def _counts(counts: Counter[str]) -> list[int]:
    known = ("blocked", "quarantined", "redacted", "let through")
    return [counts[k] for k in known] + [sum(v for k, v in counts.items() if k not in known)]
