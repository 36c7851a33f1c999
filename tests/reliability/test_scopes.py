"""Scope fuzzing: random memory, variable, recall and query requests across four sessions (two
sharing a character), with forged session ids, scope ids, chat and character ids, and random
revisions, straight to the ledger's RPCs and as the model's tool calls through the loop.

Every value written carries a marker naming the scope it was written from; a reply that holds
the marker of a scope its session may not read is a leak, and a write whose row lands outside
the session's own scope (or any write by a request that named a foreign scope) is a breach.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavern_events import subjects
from tavern_events.ids import new_id
from tests.reliability.driver import Driver
from tests.reliability.report import REPORT, table
from tests.reliability.stack import Stack
from tests.support import eventually, signed_nats

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXAMPLES = int(os.environ.get("TAVERN_SCOPE_FUZZ_EXAMPLES", "60"))
MARK = re.compile(r"MK[a-z0-9]+Z")


@dataclass(frozen=True)
class Session:
    id: str
    chat: str
    character: str | None

    def key(self, scope: str, turn: int = 0) -> tuple[str, str, int] | None:
        """Where a write to `scope` by this session must land (None: it has no such scope)."""
        scope_id = {
            "chat": self.chat,
            "character": self.character,
            "agent": self.id,
            "turn": self.id,
        }.get(scope)
        return None if scope_id is None else (scope, scope_id, turn if scope == "turn" else 0)

    def readable(self, key: tuple[str, str, int]) -> bool:
        scope, scope_id, _ = key
        return (scope, scope_id) in {
            ("chat", self.chat),
            ("character", self.character),
            ("agent", self.id),
            ("turn", self.id),
        }


@dataclass
class World:
    """The sessions, and what the fuzzer learned: markers and ids by the scope they live in."""

    sessions: list[Session]
    markers: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    memory_ids: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    tally: dict[str, int] = field(default_factory=dict)
    breaches: list[str] = field(default_factory=list)

    def count(self, what: str) -> None:
        self.tally[what] = self.tally.get(what, 0) + 1

    def scope_ids(self) -> list[str]:
        found = {s.chat for s in self.sessions} | {s.id for s in self.sessions}
        return sorted(found | {s.character for s in self.sessions if s.character})


WORLD: World | None = None


@pytest.fixture(scope="module")
async def world(stack: Stack) -> AsyncIterator[World]:
    """Four sessions: A and B share character X, C has character Y, D has the defaults."""
    global WORLD
    tag = new_id()[-6:]
    sessions = [
        Session(f"sa-{tag}", f"chat-a-{tag}", f"char-x-{tag}"),
        Session(f"sb-{tag}", f"chat-b-{tag}", f"char-x-{tag}"),
        Session(f"sc-{tag}", f"chat-c-{tag}", f"char-y-{tag}"),
        Session(f"sd-{tag}", f"sd-{tag}", None),
    ]
    driver = Driver(stack.nc)  # type: ignore[arg-type]
    await driver.open()
    for s in sessions[:3]:
        created = await driver.command(
            s.id, "create", {"chat_id": s.chat, "character_id": s.character}
        )
        assert await driver.wait(created, 30)
    for s in sessions:  # evidence for recall to find, marked with the session's chat
        said = await driver.say(s.id, f"My favourite colour is MK{_slug(s.chat)}Z, noted.")
        assert await driver.wait(said, 30)
    await driver.close()
    WORLD = World(sessions)
    for s in sessions:  # what a session says reaches its character's chats (memory reach)
        reach = ("character", s.character, 0) if s.character else ("chat", s.chat, 0)
        WORLD.markers[f"MK{_slug(s.chat)}Z"] = reach
    await eventually(_bound(stack, sessions), timeout=30)
    yield WORLD
    WORLD = None


def _bound(stack: Stack, sessions: list[Session]) -> Any:
    async def check() -> bool:
        conn = await asyncpg.connect(stack.database_url)
        try:
            rows = await conn.fetch(
                "SELECT session_id, chat_id, character_id FROM ledger.session_binding"
                " WHERE session_id = ANY($1::text[])",
                [s.id for s in sessions],
            )
        finally:
            await conn.close()
        got = {r["session_id"]: (r["chat_id"], r["character_id"]) for r in rows}
        return got == {s.id: (s.chat, s.character) for s in sessions}

    return check


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


# --- operations --------------------------------------------------------------------------------

MEMORY_SCOPES = ["chat", "character", "agent", "global", "turn", "bogus"]
VARIABLE_SCOPES = ["turn", "chat", "character", "agent", "global", "bogus"]


@dataclass(frozen=True)
class Op:
    kind: str
    actor: int  # index into the sessions; -1: an unknown session id
    scope: str
    forge: tuple[tuple[str, int], ...]  # (field, index into scope ids or -1 for junk)
    pick: int  # which known memory id / variable name
    revision: int
    turn: int


KINDS = [
    "memory.write",
    "memory.read",
    "memory.update",
    "memory.forget",
    "memory.search",
    "variable.set",
    "variable.get",
    "variable.list",
    "variable.delete",
    "variable.patch",
    "recall",
    "query",
]


def ops() -> st.SearchStrategy[Op]:
    """Mostly well-formed requests of real sessions (so that writes land and reads have
    something to leak), a fair share with forged ids, unknown sessions or wrong scopes."""
    forge = st.lists(
        st.tuples(st.sampled_from(["scope_id", "chat_id", "character_id"]), st.integers(-1, 11)),
        min_size=1,
        max_size=2,
        unique_by=lambda f: f[0],
    ).map(tuple)
    return st.builds(
        Op,
        kind=st.sampled_from(KINDS),
        actor=st.sampled_from([0, 0, 1, 1, 2, 2, 3, 3, -1]),
        scope=st.sampled_from(["chat", "chat", "character", "character", "agent", "turn"])
        | st.sampled_from(["global", "bogus"]),
        forge=st.just(()) | st.just(()) | forge,
        pick=st.integers(0, 40),
        revision=st.integers(0, 4),
        turn=st.integers(0, 3),
    )


JUNK_IDS = ["*", "a.b", ">", "other", "x" * 65, "chat-a", "global"]


def _forged(world: World, op: Op) -> dict[str, str]:
    ids = world.scope_ids()
    return {
        name: (JUNK_IDS[index % len(JUNK_IDS)] if index < 0 else ids[index % len(ids)])
        for name, index in op.forge
    }


def _claims_foreign(world: World, op: Op, actor: Session | None, forged: dict[str, str]) -> bool:
    """Whether the request names a scope id that is not the actor's own."""
    if actor is None:
        return bool(forged)
    own = {
        "chat_id": actor.chat,
        "character_id": actor.character,
        "scope_id": (actor.key(_scope_of(op)) or ("", None, 0))[1],
    }
    if op.scope == "global":
        own["scope_id"] = "global"
    return any(own.get(name) != value for name, value in forged.items())


def _scope_of(op: Op) -> str:
    """The scope the request names: memory has no turn scope, so its writes go to chat."""
    return "chat" if op.kind == "memory.write" and op.scope == "turn" else op.scope


def _request(world: World, op: Op, actor_id: str, marker: str) -> dict[str, Any]:
    body: dict[str, Any] = {"session_id": actor_id, "turn": op.turn}
    known = sorted(world.memory_ids) or ["no-such-id"]
    memory_id = known[op.pick % len(known)]
    name = f"v{op.pick % 5}"
    kind = op.kind
    if kind == "memory.write":
        body |= {"scope": _scope_of(op), "content": f"remember {marker} for later"}
    elif kind in ("memory.read", "memory.forget"):
        body |= {"id": memory_id}
        if kind == "memory.forget" and op.revision:
            body["expected_revision"] = op.revision
    elif kind == "memory.update":
        body |= {"id": memory_id, "expected_revision": max(1, op.revision), "content": marker}
    elif kind == "memory.search":
        body |= {"query": "remember later colour"}
        if op.scope in MEMORY_SCOPES[:4]:
            body["scope"] = op.scope
    elif kind == "variable.set":
        body |= {"scope": op.scope, "name": name, "value": marker, "expected_revision": op.revision}
    elif kind in ("variable.get", "variable.delete"):
        body |= {"scope": op.scope, "name": name}
    elif kind == "variable.list":
        body |= {"scope": op.scope}
    elif kind == "variable.patch":
        change = {"name": name, "value": marker}
        body |= {"scope": op.scope, "changes": [change], "expected_revision": op.revision}
    elif kind == "recall":
        body = {"session_id": actor_id, "query": "favourite colour noted", "explain": True}
    return body


# --- the database's truth ------------------------------------------------------------------------


async def _snapshot(conn: asyncpg.Connection) -> dict[tuple[str, ...], tuple[Any, ...]]:
    rows = await conn.fetch(
        "SELECT id, scope, scope_id, revision, state, content FROM ledger.memory"
    )
    found: dict[tuple[str, ...], tuple[Any, ...]] = {
        ("memory", r["id"]): (r["scope"], r["scope_id"], 0, r["revision"], r["state"], r["content"])
        for r in rows
    }
    for r in await conn.fetch(
        "SELECT scope, scope_id, turn, name, revision, value::text AS value FROM ledger.variable"
    ):
        key = ("variable", r["scope"], r["scope_id"], str(r["turn"]), r["name"])
        found[key] = (r["scope"], r["scope_id"], r["turn"], r["revision"], "", r["value"])
    return found


def _changed(
    before: dict[tuple[str, ...], tuple[Any, ...]], after: dict[tuple[str, ...], tuple[Any, ...]]
) -> list[tuple[tuple[str, ...], tuple[Any, ...]]]:
    keys = set(before) | set(after)
    return [(k, after.get(k) or before[k]) for k in keys if before.get(k) != after.get(k)]


async def _run(world: World, stack: Stack, program: list[Op]) -> None:
    nc = await signed_nats(stack.nats.url_as("operator"))
    conn = await asyncpg.connect(stack.database_url)
    try:
        for op in program:
            await _one(world, nc, conn, op)
    finally:
        await conn.close()
        await nc.close()


async def _one(world: World, nc: Any, conn: asyncpg.Connection, op: Op) -> None:
    actor = world.sessions[op.actor] if op.actor >= 0 else None
    actor_id = actor.id if actor else f"forged-{op.pick}"
    marker = f"MK{uuid.uuid4().hex[:12]}Z"
    forged = _forged(world, op)
    body = _request(world, op, actor_id, marker)
    if op.kind == "query":
        ids = world.scope_ids()
        body = {"scope_id": ids[op.pick % len(ids)], "state": "all", "limit": 50}
    elif op.kind != "recall":
        body |= forged
    before = await _snapshot(conn)
    reply = await _ask(nc, op.kind, body)
    after = await _snapshot(conn)
    error = reply.get("error")
    world.count(f"{op.kind} {error.get('code', '?') if isinstance(error, dict) else 'ok'}")
    _check_writes(world, op, actor, forged, _changed(before, after), marker)
    _check_reads(world, op, actor, body, reply)


async def _ask(nc: Any, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    msg = await nc.request(subjects.rpc("ledger", kind), json.dumps(body).encode(), timeout=10)
    reply = json.loads(msg.data)
    assert isinstance(reply, dict), reply
    return reply


def _check_writes(
    world: World,
    op: Op,
    actor: Session | None,
    forged: dict[str, str],
    changed: list[tuple[tuple[str, ...], tuple[Any, ...]]],
    marker: str,
) -> None:
    foreign = _claims_foreign(world, op, actor, forged)
    for key, (scope, scope_id, turn, *_rest) in changed:
        where = (scope, scope_id, turn)
        if actor is None or foreign:
            world.breaches.append(f"{op.kind} by {actor} naming {forged} changed {key}")
        elif not actor.readable(where):
            world.breaches.append(f"{op.kind} by {actor.id} landed in {where}")
        if key[0] == "memory":
            world.memory_ids[key[1]] = where
        world.markers[marker] = where


def _check_reads(
    world: World, op: Op, actor: Session | None, body: dict[str, Any], reply: dict[str, Any]
) -> None:
    text = json.dumps(reply)
    for found in MARK.findall(text):
        where = world.markers.get(found)
        if where is None or found in json.dumps(body):
            continue  # a marker this request sent itself (echoed), or one never stored
        if op.kind == "query":
            if where[0] == "chat" and where[1] != body["scope_id"]:
                world.breaches.append(f"query of {body['scope_id']} returned {where}")
        elif actor is None or not actor.readable(where):
            world.breaches.append(f"{op.kind} by {actor and actor.id} read {where}")
    if op.kind == "query":
        return
    for memory_id, where in world.memory_ids.items():
        seen = memory_id in text and memory_id not in json.dumps(body)
        if seen and (actor is None or not actor.readable(where)):
            world.breaches.append(f"{op.kind} by {actor and actor.id} saw memory {where}")


# --- the tests -----------------------------------------------------------------------------------


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(program=st.lists(ops(), min_size=1, max_size=10))
def test_no_request_reads_or_writes_another_scope(
    world: World, stack: Stack, program: list[Op]
) -> None:
    asyncio.run(_run(world, stack, program))
    assert world.breaches == [], world.breaches


def test_scope_fuzz_summary(world: World) -> None:
    """Runs after the property: records what the fuzzer tried."""
    rows = [[k, v] for k, v in sorted(world.tally.items())]
    total = sum(world.tally.values())
    REPORT.add(
        f"scope fuzzing ({total} requests, {EXAMPLES} examples, breaches {len(world.breaches)})",
        table(["request outcome", "count"], rows),
    )
    assert world.breaches == []
    assert total > 0


async def test_tool_calls_cannot_reach_another_sessions_scope(stack: Stack, world: World) -> None:
    """Through the loop: the model names another session's memory ids, variables and scope ids
    (as extra arguments the tools do not take); nothing of that session comes back."""
    owner, intruder = world.sessions[0], world.sessions[2]
    driver = Driver(stack.nc)  # type: ignore[arg-type]
    await driver.open()
    secret = f"MK{uuid.uuid4().hex[:12]}Z"
    write = await driver.say(owner.id, f"remember that the vault code word is {secret}")
    assert await driver.wait(write, 30)
    conn = await asyncpg.connect(stack.database_url)
    try:
        memory_id = await conn.fetchval(
            "SELECT id FROM ledger.memory WHERE strpos(content, $1) > 0", secret
        )
        assert memory_id is not None
        before = await _snapshot(conn)
        calls = [
            f'call memory_read with {{"id": "{memory_id}"}}',
            f'call memory_update with {{"id": "{memory_id}", "expectedRevision": 1, '
            '"content": "x"}',
            f'call memory_forget with {{"id": "{memory_id}"}}',
            f'call memory_search with {{"query": "vault code word", "scopeId": "{owner.chat}"}}',
            'call memory_search with {"query": "vault code word", "scope": "chat"}',
            f'call variable_get with {{"scope": "chat", "name": "v1", "chatId": "{owner.chat}"}}',
            f'call variable_set with {{"scope": "character", "name": "v1", "value": "{secret}", '
            f'"characterId": "{owner.character}", "sessionId": "{owner.id}"}}',
            "search memory for vault code word",
        ]
        outcomes = []
        for text in calls:
            sent = await driver.say(intruder.id, text)
            assert await driver.wait(sent, 30)
            outcomes.append(sent)
        assert await driver.stored(outcomes[-1])
        after = await _snapshot(conn)
    finally:
        await conn.close()
    events = [json.loads(m) for m in await _log(stack, intruder.id)]
    results = [e["payload"] for e in events if e["type"] == "tool/result"]
    leaked = [r["name"] for r in results if secret in json.dumps(r) and r["name"] != "variable_set"]
    touched = [k for k, _ in _changed(before, after) if k == ("memory", memory_id)]
    owner_vars = [
        k for k, v in _changed(before, after) if k[0] == "variable" and v[1] != intruder.character
    ]
    REPORT.add(
        "scope probes through the loop's tools",
        table(
            ["tool call from another session", "result"],
            [[c[:70], _short(r)] for c, r in zip(calls, results, strict=False)],
        ),
    )
    await driver.close()
    assert leaked == []
    assert touched == []
    assert owner_vars == []


def _short(result: dict[str, Any]) -> str:
    if not result["ok"]:
        return f"error {(result.get('error') or {}).get('code', '?')}"
    content: str = result["content"]
    return "ok " + content[:50]


async def _log(stack: Stack, session_id: str) -> list[bytes]:
    from tavern_runtime import directget

    assert stack.nc is not None
    found = []
    async for msg in directget.scan(stack.nc, "SESSIONS", subjects.session_filter(session_id)):
        found.append(msg.data)
    return found
