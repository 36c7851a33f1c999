"""The AsyncAPI contract, checked from outside: a subscriber that knows only
docs/asyncapi/contract.json watches an end-to-end run of the four service processes (the
offline model, the shipped defaults) and validates every message on a documented subject,
every RPC request and every RPC reply against the document's schemas and headers.

The run imports a card, then follows the memory flow of test_memory_defaults (a fact told in one
session recalled in the next) with the loop's tools asked in plain words (memory, variables,
history, scene, character, lore, the evidence query); then, as an operator's CLI would, it asks
every other operation of the document once, on what earlier replies named: all 61 RPCs answer
and every reply is checked, the errors the run provokes on purpose included. Last, a malformed
event in a session log is parked by its consumers, and the dead letters are checked too.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pytest
from jsonschema import Draft202012Validator
from nats.aio.msg import Msg

from tavern_events import rpc
from tavern_runtime.bus import login_options
from tavern_runtime.cards import importer
from tests.reliability.driver import Driver
from tests.reliability.stack import Stack, running_stack
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "asyncapi" / "contract.json"
CARDS = ROOT / "tests" / "fixtures" / "cards"
TIMEOUT_S = 5.0
ERROR = "#/components/messages/rpc_error"
EXPECTED_ERRORS = {
    ("ledger_recall", "invalid"),  # the request without a query
    ("unknown_rpc", "not_found"),  # an operation no service has
    ("ledger_rollback", "conflict"),  # rolling back a row nothing superseded
    ("ledger_consolidation_candidate_transition", "conflict"),  # rolling back a rejected one
    ("consolidator_rules_decide", "not_found"),  # unpinning rule 99 of a scope with one
    ("projector_replay_status", "not_found"),  # a replay job nobody started
    ("ledger_claim_supersede", "conflict"),  # a judgement naming rows that are not claims of fact
}
"""Error replies the run provokes, each validated against the document's error message."""
POISON_SUBJECT = "tavern.session.poisoned.turn.start"
WRONG_REQUEST = "tavern.rpc.ledger.recall payload: : 'query' is a required property"
"""The one request of the run that breaks its schema, on purpose (the operator's)."""


@dataclass
class Channel:
    """A channel of the document, ready to match subjects and validate messages."""

    key: str
    pattern: re.Pattern[str]
    parameters: dict[str, dict[str, Any]]
    messages: list[dict[str, Any]]
    replies: list[dict[str, Any]] = field(default_factory=list)


class Contract:
    """Everything this subscriber knows: the document."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.channels: list[Channel] = []
        for key, channel in document["channels"].items():
            if channel["address"] is None:
                continue  # a reply channel: the requester's inbox
            self.channels.append(self._channel(key, channel))

    def _channel(self, key: str, channel: dict[str, Any]) -> Channel:
        parts = re.split(r"(\{\w+\})", channel["address"])
        pattern = "".join(
            f"(?P<{p[1:-1]}>[^.]+)" if p.startswith("{") else re.escape(p) for p in parts
        )
        messages = [self.resolve(m["$ref"]) for m in channel["messages"].values()]
        found = Channel(key, re.compile(f"^{pattern}$"), channel.get("parameters", {}), messages)
        for op in self.document["operations"].values():
            if op["channel"]["$ref"] == f"#/channels/{key}" and "reply" in op:
                found.replies = [self.resolve(m["$ref"]) for m in op["reply"]["messages"]]
        return found

    def resolve(self, ref: str) -> Any:
        node: Any = self.document
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
            if isinstance(node, dict) and set(node) == {"$ref"}:
                node = self.resolve(node["$ref"])
        return node

    def channel_of(self, subject: str) -> tuple[Channel, dict[str, str]] | None:
        for channel in self.channels:
            match = channel.pattern.fullmatch(subject)
            if match:
                return channel, match.groupdict()
        return None

    def problems(self, schema: dict[str, Any], value: Any) -> list[str]:
        """What is wrong with `value` under `schema` (whose references point into the
        document)."""
        root = {"allOf": [schema], "components": self.document["components"]}
        validator = Draft202012Validator(root)
        return [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:300]
            for e in validator.iter_errors(value)
        ]


@dataclass
class Seen:
    subject: str
    reply: str
    headers: dict[str, str]
    data: bytes


class Observer:
    """A plain subscriber on every subject: it keeps what it sees, in order."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.nc: Any = None

    async def start(self, stack: Stack) -> None:
        password = stack.credentials.nats_password("operator")
        self.nc = await nats.connect(
            stack.nats.url, name="contract-observer", **login_options("operator", password)
        )

        async def keep(msg: Msg) -> None:
            self.seen.append(Seen(msg.subject, msg.reply, dict(msg.headers or {}), msg.data))

        await self.nc.subscribe(">", cb=keep)
        await self.nc.flush()

    async def stop(self) -> None:
        await self.nc.flush()
        await self.nc.close()


@pytest.fixture
async def system() -> AsyncIterator[tuple[Stack, Driver, Observer]]:
    async with running_stack() as stack:
        assert stack.nc is not None
        observer = Observer()
        await observer.start(stack)
        driver = Driver(stack.nc)
        await driver.open()
        try:
            yield stack, driver, observer
        finally:
            await driver.close()
            await observer.stop()


async def _turn(driver: Driver, session: str, text: str) -> None:
    sent = await driver.say(session, text)
    assert await driver.wait(sent), f"{session}: {text}"
    assert sent.outcome == "completed", (session, text, sent.outcome)


async def _run(stack: Stack, driver: Driver) -> None:
    """A user's conversation, the loop's tools, and an operator's RPCs."""
    assert stack.nc is not None
    card = CARDS / "v2_mira.png"  # as `tavern card import` does
    published = await importer.import_all(stack.js, card, stack.data_dir)
    mira = published[0].asset.asset_id

    db = await asyncpg.connect(stack.database_url)
    try:  # the card reached the projector's read model (asked there, not over the bus)

        async def projected() -> bool:
            sql = "SELECT count(*) FROM projector.characters WHERE asset_id = $1"
            return bool(await db.fetchval(sql, mira))

        await eventually(projected, timeout=30)
    finally:
        await db.close()
    binding: dict[str, object] = {"chat_id": "chat-k", "character_id": mira}
    opened = await driver.command("k1", "create", binding)
    assert await driver.wait(opened)
    await _turn(driver, "k1", "My sister Ines works as a pediatric nurse in Porto")
    await _turn(driver, "k1", "remember that my cat is called Pixel")
    await _turn(driver, "k1", "search memory for Pixel")
    for call in (
        'call variable_set with {"scope": "chat", "name": "mood", "value": {"level": 2}}',
        'call variable_get with {"scope": "chat", "name": "mood"}',
        'call variable_list with {"scope": "chat"}',
        'call tavern_history_search with {"query": "sister"}',
        "call tavern_scene_get with {}",
        "call tavern_character_get with {}",
        'call tavern_lore_search with {"query": "Porto"}',
        'call acp_query with {"text": "Porto"}',
    ):
        await _turn(driver, "k1", call)
    again = await driver.command("k2", "create", binding)
    assert await driver.wait(again)
    await _turn(driver, "k2", "What does Ines do for work?")

    await _operator(stack.nc)
    await _poison(stack)


async def _poison(stack: Stack) -> None:
    """A malformed event in a session log: its consumers park it on the DLQ."""
    headers = {"Nats-Msg-Id": "contract-poison"}
    await stack.js.publish(POISON_SUBJECT, b'{"type": "turn/start"}', headers=headers)

    async def parked() -> bool:
        return bool((await stack.js.stream_info("DLQ")).state.messages)

    await eventually(parked, timeout=30)


async def _ask(nc: Any, subject: str, body: dict[str, Any] | None = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=TIMEOUT_S)).data)


async def _operator(nc: Any) -> None:
    """What an operator's CLI asks, on the evidence the conversation left."""
    found = await _ask(nc, "tavern.rpc.ledger.query", {"session_id": "k1", "state": "all"})
    evidence, scope = found["items"][0]["evidence_id"], found["items"][0]["scope_id"]
    for service in ("loop", "ledger", "projector", "consolidator"):
        await _ask(nc, f"tavern.rpc.{service}.ping")
        await _ask(nc, f"tavern.rpc.{service}.no.such.operation", {})  # not_found
    asked: list[tuple[str, dict[str, Any]]] = [
        ("ledger.inspect", {"evidence_id": evidence}),
        ("ledger.history", {"evidence_id": evidence}),
        ("ledger.stats", {"scope_id": scope}),
        ("ledger.audit", {"scope_id": scope, "limit": 5}),
        ("ledger.export", {"scope_id": scope, "limit": 5}),
        ("ledger.consolidation.rule.list", {"scope_id": scope}),
        ("ledger.consolidation.candidate.list", {"scope_id": scope}),
        ("projector.status", {}),
        ("projector.sessions.list", {"limit": 5}),
        ("projector.replay.status", {"job_id": "replay-none"}),  # not_found
        ("projector.scene.get", {"session_id": "k2"}),
        ("consolidator.status", {"scope_id": scope}),
        ("consolidator.distil", {"scope_id": scope}),
        ("consolidator.explain", {"evidence_id": evidence}),
        ("consolidator.profile.get", {"scope_id": scope}),
        ("consolidator.dream.run", {"scope_id": scope}),
        ("consolidator.dream.review", {"scope_id": scope}),
        ("consolidator.rules.list", {"scope_id": scope}),
        ("consolidator.rules.draft", {"scope_id": scope}),
        ("consolidator.rules.rebuild", {"scope_id": scope}),
        ("consolidator.expression.list", {"scope_id": scope}),
        ("consolidator.audit", {"scope_id": scope, "limit": 5}),
        ("ledger.recall", {"session_id": "k1"}),  # no query: invalid, on purpose
    ]
    for operation, body in asked:
        await _ask(nc, f"tavern.rpc.{operation}", body)
    await _replay(nc)
    await _changes(nc, scope, evidence, found["items"][-1]["evidence_id"])


async def _replay(nc: Any) -> None:
    """An operator's replay of the session read models, followed until it is done."""
    job = await _ask(nc, "tavern.rpc.projector.replay.start", {"projection": "sessions"})

    async def done() -> bool:
        status = {"job_id": job["job_id"]}
        state = (await _ask(nc, "tavern.rpc.projector.replay.status", status))["state"]
        return bool(state == "done")

    await eventually(done, timeout=30)


async def _changes(nc: Any, scope: str, evidence: str, other: str) -> None:
    """The operations that change something, each on what an earlier reply named."""
    ledger = "tavern.rpc.ledger"
    note = {"session_id": "k1", "scope": "chat", "content": "The contract run's note"}
    written = await _ask(nc, f"{ledger}.memory.write", note)
    mine = {"session_id": "k1", "id": written["id"]}
    await _ask(nc, f"{ledger}.memory.read", mine)
    updated = await _ask(
        nc, f"{ledger}.memory.update", {**mine, "expected_revision": 1, "tags": ["checked"]}
    )
    await _ask(nc, f"{ledger}.memory.forget", {**mine, "expected_revision": updated["revision"]})
    chat = {"session_id": "k1", "scope": "chat"}
    listed = await _ask(nc, f"{ledger}.variable.list", chat)
    change = {"changes": [{"name": "a", "value": 1}], "expected_revision": listed["scope_revision"]}
    await _ask(nc, f"{ledger}.variable.patch", {**chat, **change})
    await _ask(nc, f"{ledger}.variable.delete", {**chat, "name": "a"})
    await _ask(nc, f"{ledger}.quarantine", {"evidence_id": other, "reason": "contract run"})
    await _ask(nc, f"{ledger}.release", {"evidence_id": other})
    await _ask(nc, f"{ledger}.redact", {"evidence_id": other})
    await _ask(nc, f"{ledger}.correct", {"session_id": "k1", "text": "Ines is a midwife now"})
    exported = await _ask(nc, f"{ledger}.export", {"scope_id": scope, "limit": 5})
    await _ask(nc, f"{ledger}.import", {"jsonl": "\n".join(exported["lines"])})
    proposal = {
        "scope_id": scope,
        "subject": "Ines",
        "predicate": "works as",
        "claim_domain": "user_fact",
        "text": "Ines works as a pediatric nurse",
        "evidence_ids": [evidence],
    }
    await _ask(nc, f"{ledger}.observation.propose", proposal)
    told = {k: v for k, v in proposal.items() if k != "scope_id"}  # the same one: not inserted
    await _ask(
        nc, f"{ledger}.observation.propose_batch", {"scope_id": scope, "observations": [told]}
    )
    held = {**proposal, "subject": "dev server", "text": "runs its API at localhost:8080"}
    await _ask(nc, f"{ledger}.observation.propose", held)  # env-bound: held for review
    queue = await _ask(nc, f"{ledger}.observation.list", {"scope_id": scope})
    assert [o["subject"] for o in queue["items"]] == ["dev server"], queue
    release = {"observation_id": queue["items"][0]["observation_id"], "reason": "shared"}
    await _ask(nc, f"{ledger}.observation.release", release)
    await _ask(nc, f"{ledger}.observation.list", {"scope_id": scope, "state": "all"})
    rule = {"scope_id": scope, "domain": "style", "title": "Short", "text": "Answer briefly"}
    activated = await _ask(
        nc, f"{ledger}.consolidation.rule.activate", {**rule, "source": "manual"}
    )
    pin = {"rule_id": activated["rule"]["id"], "pinned": True}
    await _ask(nc, f"{ledger}.consolidation.rule.pin", pin)
    await _ask(
        nc, "tavern.rpc.consolidator.rules.decide", {"scope_id": scope, "op": "unpin", "ref": "99"}
    )
    candidate = {"scope_id": scope, "domain": "style", "evidence_ids": [evidence]}
    created = await _ask(nc, f"{ledger}.consolidation.candidate.create", candidate)
    decided = {"candidate_id": created["candidate"]["candidate_id"], "decision": "reject"}
    await _ask(nc, "tavern.rpc.consolidator.expression.decide", decided)
    transition = {"candidate_id": created["candidate"]["candidate_id"], "event": "rollback"}
    await _ask(nc, f"{ledger}.consolidation.candidate.transition", transition)
    judged = {"evidence_id": evidence, "supersedes": [other], "decision": "update"}
    await _ask(nc, f"{ledger}.claim.supersede", judged)  # not two claims of fact: refused
    await _ask(nc, f"{ledger}.rollback", {"evidence_id": evidence})
    await _ask(nc, f"{ledger}.delete", {"evidence_id": other})


@dataclass
class Checked:
    problems: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    errors: set[tuple[str, str]] = field(default_factory=set)
    """(channel, error code) of every error reply."""


def _check(contract: Contract, seen: list[Seen]) -> Checked:
    """Every documented message and reply validated against the document."""
    out = Checked()
    waiting: dict[str, Channel] = {}
    unknown = Channel("unknown_rpc", re.compile("$^"), {}, [], [contract.resolve(ERROR)])
    for msg in seen:
        if msg.subject in waiting:  # the reply of a request seen before
            _reply(contract, waiting.pop(msg.subject), json.loads(msg.data), out)
            continue
        if not msg.subject.startswith("tavern."):
            continue  # the server's own subjects ($JS, $KV) and other inboxes
        found = contract.channel_of(msg.subject)
        if found is None and msg.subject.startswith("tavern.rpc.") and msg.reply:
            waiting[msg.reply] = unknown  # an operation nobody has: answered not_found
            continue
        if found is None:
            out.problems.append(f"undocumented subject {msg.subject}")
            continue
        channel, values = found
        out.problems += _message_problems(contract, channel, values, msg)
        out.counts[channel.key] += 1
        if channel.replies and msg.reply:
            waiting[msg.reply] = channel
    out.problems += [f"{c.key}: no reply seen on {r}" for r, c in waiting.items()]
    return out


def _message_problems(
    contract: Contract, channel: Channel, values: dict[str, str], msg: Seen
) -> list[str]:
    problems = []
    for name, value in values.items():
        allowed = channel.parameters[name].get("enum")
        if allowed is not None and value not in allowed:
            problems.append(f"{msg.subject}: {name}={value!r} is not one of {allowed}")
    message = channel.messages[0]
    body = json.loads(msg.data) if msg.data else {}  # an empty body is an empty request
    problems += [f"{msg.subject} payload: {p}" for p in contract.problems(message["payload"], body)]
    problems += [
        f"{msg.subject} headers: {p}" for p in contract.problems(message["headers"], msg.headers)
    ]
    return problems


def _reply(contract: Contract, channel: Channel, reply: Any, out: Checked) -> None:
    if all(contract.problems(m["payload"], reply) for m in channel.replies):
        out.problems.append(f"{channel.key} reply fits no reply message: {reply!r:.300}")
    out.counts[f"{channel.key} reply"] += 1
    if isinstance(reply, dict) and "error" in reply:
        out.errors.add((channel.key, reply["error"]["code"]))


async def test_a_subscriber_knowing_only_the_documents_validates_a_whole_run(
    system: tuple[Stack, Driver, Observer],
) -> None:
    stack, driver, observer = system
    contract = Contract(json.loads(DOCUMENT.read_text(encoding="utf-8")))
    await _run(stack, driver)
    await asyncio.sleep(1.0)  # facts the ledger commits after its replies, still in flight
    checked = _check(contract, list(observer.seen))
    poisoned = [p for p in checked.problems if p.startswith(f"{POISON_SUBJECT} payload")]
    assert poisoned, "the malformed event breaks the session schema"
    wrong = [p for p in checked.problems if p not in poisoned]
    assert wrong == [WRONG_REQUEST], "\n".join(wrong[:40])
    assert checked.errors == EXPECTED_ERRORS
    counts = checked.counts
    assert counts["unknown_rpc reply"] == 4  # one per service
    for channel in ("session", "input", "ledger", "asset", "dlq"):
        assert counts[channel] > 0, (channel, counts)
    rpcs = {k for k, op in contract.document["operations"].items() if op["action"] == "receive"}
    assert len(rpcs) == len(rpc.ALL) == 61
    missing = {r for r in rpcs if counts[f"{r} reply"] == 0}
    assert missing == set(), (missing, counts)
