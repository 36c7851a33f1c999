"""Poison and malformed input on every stream a service consumes and on every RPC subject:
each message gets a dead letter with its reason (or is skipped as the contract says, or is
handled as data with a structured outcome), every RPC answers with a structured error, and each
consumer keeps going: the good message published right after is processed within a second.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from tavern_cli import catalog
from tavern_events import rpc, subjects
from tavern_events.dlq import DeadLetter
from tavern_events.ids import new_id
from tavern_projector.sources import subject_matches
from tests.reliability import poison as corpus
from tests.reliability.driver import Driver
from tests.reliability.invariants import dead_letters
from tests.reliability.poison import Poison
from tests.reliability.report import REPORT, table
from tests.reliability.stack import Stack
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GOOD_WITHIN_S = 1.0
"""The issue's bound: the next good message is processed within a second of the poison."""
SETTLE_TIMEOUT_S = 15.0
RPC_TIMEOUT_S = 5.0


@dataclass
class Outcome:
    stream: str
    poison: Poison
    subject: str
    stream_seq: int
    consumers: list[str]
    dead_letter: str | None = None
    refused_by: set[str] = field(default_factory=set)
    """The consumers that dead-lettered it (each leaves its own record)."""
    settled_s: float | None = None

    @property
    def verdict(self) -> str:
        if self.poison.expect == "dlq":
            return "dead-lettered" if self.dead_letter else "NOT dead-lettered"
        return "handled" if self.dead_letter is None else f"dead-lettered ({self.dead_letter})"

    @property
    def ok(self) -> bool:
        in_time = self.settled_s is not None and self.settled_s <= GOOD_WITHIN_S
        wanted = (self.dead_letter is not None) == (self.poison.expect == "dlq")
        return in_time and wanted and "NO REASON" not in (self.dead_letter or "")


def consumers_of(stream: str, subject: str) -> list[str]:
    return [
        spec.name
        for spec in catalog.all_consumers()
        if spec.stream == stream and any(subject_matches(f, subject) for f in spec.filter_subjects)
    ]


async def settled(stack: Stack, names: list[str]) -> bool:
    """Every named consumer has nothing pending and nothing in flight."""
    lags = await stack.consumer_lags()
    return all(lags.get(name) == 0 for name in names)


async def _publish_then_good(
    stack: Stack,
    stream: str,
    subject: str,
    item: Poison,
    good: tuple[str, bytes],
) -> Outcome:
    ack = await stack.js.publish(subject, item.data, headers={"Nats-Msg-Id": new_id()})
    assert ack.stream == stream
    names = consumers_of(stream, subject)
    outcome = Outcome(stream, item, subject, ack.seq, names)
    started = time.monotonic()
    await stack.js.publish(good[0], good[1], headers={"Nats-Msg-Id": new_id()})
    names = sorted(set(names) | set(consumers_of(stream, good[0])))
    try:
        await eventually(lambda: settled(stack, names), timeout=SETTLE_TIMEOUT_S, interval=0.02)
        outcome.settled_s = time.monotonic() - started
    except AssertionError:
        outcome.settled_s = None
    return outcome


async def _find_dead_letters(stack: Stack, outcomes: list[Outcome]) -> None:
    letters: dict[tuple[str, int], list[DeadLetter]] = {}
    for d in await dead_letters(stack.nc):  # type: ignore[arg-type]
        letters.setdefault((d.stream, d.stream_seq), []).append(d)
    for outcome in outcomes:
        found = letters.get((outcome.stream, outcome.stream_seq), [])
        if found:
            first = found[0]
            outcome.dead_letter = f"{first.consumer}: {first.reason[:60] or 'NO REASON'}"
            if any(not d.reason for d in found):
                outcome.dead_letter += " NO REASON"
        outcome.refused_by = {d.consumer for d in found}


def _good_session_event(session_id: str) -> tuple[str, bytes]:
    event = corpus.golden("user__message", session_id=session_id)
    return subjects.session_event(session_id, "user/message"), corpus.dumps(event)


def _good_asset() -> tuple[str, bytes]:
    asset_id = f"good_{new_id()[-8:]}"
    event = corpus.golden("asset__imported", asset_id=asset_id)
    return subjects.asset_event("character", asset_id, "asset/imported"), corpus.dumps(event)


def _good_fact(scope_id: str) -> tuple[str, bytes]:
    event = corpus.golden("memory__changed", scope_id=scope_id)
    return subjects.ledger_fact(scope_id, "memory/changed"), corpus.dumps(event)


async def _stream_round(
    stack: Stack,
    stream: str,
    subject_of: Callable[[str], str],
    poisons: Callable[[str], list[Poison]],
    good: Callable[[], tuple[str, bytes]],
) -> list[Outcome]:
    outcomes = []
    key = f"pz{stream[:3].lower()}{new_id()[-8:]}"
    for item in poisons(key):
        outcomes.append(await _publish_then_good(stack, stream, subject_of(key), item, good()))
    return outcomes


async def test_poison_on_every_stream_is_dead_lettered_and_consumers_keep_going(
    stack: Stack,
) -> None:
    driver = Driver(stack.nc)  # type: ignore[arg-type]
    await driver.open()
    # A session the loop really created: the good SESSIONS events name it.
    warm = await driver.say(f"pz-good-{new_id()[-8:]}", "Hello, I am the good session.")
    assert await driver.wait(warm, 30)
    good_session = warm.session_id

    outcomes: list[Outcome] = []
    for event_type in ("user/message", "session/created"):
        outcomes += await _stream_round(
            stack,
            "SESSIONS",
            partial(subjects.session_event, event_type=event_type),
            corpus.session_poison,
            lambda: _good_session_event(good_session),
        )
    outcomes += await _stream_round(
        stack,
        "LEDGER",
        lambda key: subjects.ledger_fact(key, "memory/changed"),
        corpus.ledger_poison,
        lambda: _good_fact(good_session),
    )
    outcomes += await _stream_round(
        stack,
        "ASSETS",
        lambda key: subjects.asset_event("character", key, "asset/imported"),
        corpus.asset_poison,
        _good_asset,
    )
    outcomes += await _input_round(stack, driver)
    outcomes += await _bad_subject_round(stack, lambda: _good_session_event(good_session))
    await _find_dead_letters(stack, outcomes)
    await driver.close()

    rows = [
        [
            f"{o.stream} {o.subject.split('.', 3)[-1]}",
            o.poison.name,
            o.verdict,
            f"{o.settled_s:.2f}" if o.settled_s is not None else "STUCK",
            ",".join(
                n.removeprefix("projector-") + ("*" if n in o.refused_by else "")
                for n in o.consumers
            ),
        ]
        for o in outcomes
    ]
    tried = Counter(o.stream for o in outcomes)
    REPORT.add(
        f"poison on streams ({len(outcomes)} messages: {dict(tried)}; consumer* = dead-lettered "
        "by that consumer, one record each)",
        table(["stream subject", "poison", "outcome", "settled s", "consumers"], rows),
    )
    bad = [
        (o.stream, o.subject, o.poison.name, o.verdict, o.settled_s) for o in outcomes if not o.ok
    ]
    assert bad == []


async def _input_round(stack: Stack, driver: Driver) -> list[Outcome]:
    """INPUTS: poison for the dispatcher; after each, a good message must be claimed by a turn
    (what the dispatcher's work ends in) and that turn must complete. Settled is the time to
    the claim: the turn's own length is the model's and the ledger's, not the consumer's."""
    outcomes = []
    key = f"pzinp{new_id()[-8:]}"
    subject = subjects.session_input(key, "message")
    for item in corpus.input_poison(key):
        ack = await stack.js.publish(subject, item.data, headers={"Nats-Msg-Id": new_id()})
        outcome = Outcome("INPUTS", item, subject, ack.seq, consumers_of("INPUTS", subject))
        started = time.monotonic()
        good = await driver.say(f"pzgood{new_id()[-8:]}", "Hello after the poison")
        if await driver.wait(good, SETTLE_TIMEOUT_S) and good.outcome == "completed":
            done = good.claimed_at if good.claimed_at is not None else time.monotonic()
            outcome.settled_s = done - started
        outcomes.append(outcome)
    return outcomes


BAD_IDS = ("bad$id%", "x" * 65)
"""Subject tokens NATS accepts but the contract's ids do not (`[A-Za-z0-9_-]{1,64}`)."""


async def _bad_subject_round(stack: Stack, good: Callable[[], tuple[str, bytes]]) -> list[Outcome]:
    """Well-formed events on subjects whose session id token is not a legal id."""
    outcomes = []
    for bad in BAD_IDS:
        for stream, subject, name in (
            ("SESSIONS", f"tavern.session.{bad}.user.message", "user__message"),
            ("INPUTS", f"tavern.input.{bad}.message", "input__message"),
        ):
            item = Poison(
                f"illegal id in subject ({bad[:8]})",
                corpus.dumps(corpus.golden(name, session_id=bad)),
                "dlq",
            )
            outcomes.append(await _publish_then_good(stack, stream, subject, item, good()))
    return outcomes


# --- hostile but valid inputs through the whole loop -----------------------------------------


async def test_oversize_and_nested_inputs_end_in_structured_outcomes(stack: Stack) -> None:
    """Valid inputs with hostile content: each turn ends (rejected or completed) and every tool
    call gets its result, an error the model can read."""
    driver = Driver(stack.nc)  # type: ignore[arg-type]
    await driver.open()
    session = f"pz-big-{new_id()[-8:]}"

    def nested(depth: int) -> str:
        value = "[" * depth + "]" * depth
        return f'call variable_set with {{"scope": "chat", "name": "n{depth}", "value": {value}}}'

    inputs = [
        ("message of 160 000 chars", "tell me " * 20_000),
        ("tool arguments nested 5000 deep", nested(5000)),
        ("tool arguments nested 950 deep", nested(950)),
        (
            "tool argument of 30 000 chars",
            'call variable_set with {"scope": "chat", "name": "w", "value": "'
            + "w" * 30_000
            + '"}',
        ),
        ("the next message", "Hello after all that"),
    ]
    rows, outcomes = [], []
    for label, text in inputs:  # one turn each: claimed together, only the last is answered
        sent = await driver.say(session, text)
        assert await driver.wait(sent, 30), label
        assert await driver.stored(sent), label
        turn = await _turn_of(stack, session, sent.input_id)
        results = [e["payload"] for e in turn if e["type"] == "tool/result"]
        calls = [e for e in turn if e["type"] == "tool/call"]
        outcome = results[0] if results else None
        shown = "-" if outcome is None else ("ok" if outcome["ok"] else outcome["error"]["code"])
        rows.append([label, sent.outcome, len(calls), shown])
        outcomes.append((label, sent.outcome, len(calls), len(results)))
    REPORT.add(
        "hostile inputs through the loop", table(["input", "turn", "tool calls", "result"], rows)
    )
    await driver.close()
    assert outcomes[0][1] == "rejected"
    assert all(outcome == "completed" for _, outcome, _, _ in outcomes[1:]), outcomes
    assert all(calls == results for _, _, calls, results in outcomes), outcomes


async def _turn_of(stack: Stack, session_id: str, input_id: str) -> list[dict[str, Any]]:
    """The events of the turn that claimed `input_id`."""
    events = await _log(stack, session_id)
    turn = next(
        e["turn"]
        for e in events
        if any(c["input_id"] == input_id for c in e["payload"].get("claimed", []))
    )
    return [e for e in events if e["turn"] == turn]


async def _log(stack: Stack, session_id: str) -> list[dict[str, Any]]:
    from tavern_runtime import directget

    found = []
    async for msg in directget.scan(stack.nc, "SESSIONS", subjects.session_filter(session_id)):  # type: ignore[arg-type]
        found.append(json.loads(msg.data))
    return found


# --- RPC subjects -----------------------------------------------------------------------------


def rpc_subjects() -> dict[str, list[str]]:
    """Every RPC subject of every service, from the contract's catalog (`tavern_events.rpc`,
    which tests/unit/contract/test_asyncapi.py holds to what each service registers), so an
    RPC added to a service is poisoned here too."""
    return {service: [r.subject for r in rpc.of_service(service)] for service in rpc.SERVICES}


@dataclass
class RpcOutcome:
    subject: str
    poison: str
    reply: str  # "error <code>", "answered", "TIMEOUT", "not JSON"


async def _ask(stack: Stack, subject: str, item: Poison) -> RpcOutcome:
    assert stack.nc is not None
    try:
        msg = await stack.nc.request(subject, item.data, timeout=RPC_TIMEOUT_S)
    except Exception as exc:
        return RpcOutcome(subject, item.name, f"NO REPLY ({type(exc).__name__})")
    try:
        body = json.loads(msg.data)
    except ValueError:
        return RpcOutcome(subject, item.name, "NOT JSON")
    if not isinstance(body, dict):
        return RpcOutcome(subject, item.name, "NOT AN OBJECT")
    error = body.get("error")
    if isinstance(error, dict) and error.get("code") and error.get("message"):
        return RpcOutcome(subject, item.name, f"error {error['code']}")
    return RpcOutcome(subject, item.name, "answered")


OBJECT_POISONS = {"wrong field types", "ids with dots and wildcards", "big body (1 MB)"}
"""Poisons that are JSON objects: an RPC whose request has no required field and ignores
unknown ones may take them as an empty request (lenient, not unsafe); all others must fail."""


async def test_poison_on_every_rpc_subject_gets_a_structured_reply(stack: Stack) -> None:
    by_service = rpc_subjects()
    poisons = corpus.rpc_poison()
    empty = Poison("empty object", b"{}", "error")
    outcomes: list[RpcOutcome] = []
    lenient: set[str] = set()
    for service, names in by_service.items():
        probes = await asyncio.gather(*(_ask(stack, s, empty) for s in names))
        lenient |= {o.subject for o in probes if o.reply == "answered"}
        found = await asyncio.gather(*(_ask(stack, s, p) for s in names for p in poisons))
        outcomes += found
        # The service keeps answering: its ping comes back within a second.
        started = time.monotonic()
        assert stack.nc is not None
        await stack.nc.request(subjects.rpc(service, "ping"), b"{}", timeout=GOOD_WITHIN_S)
        assert time.monotonic() - started <= GOOD_WITHIN_S

    codes = Counter(o.reply for o in outcomes)
    by_subject: dict[str, Counter[str]] = {}
    for o in outcomes:
        by_subject.setdefault(o.subject.removeprefix("tavern.rpc."), Counter())[o.reply] += 1
    rows = [
        [s, ", ".join(f"{k} x{n}" for k, n in sorted(c.items()))] for s, c in by_subject.items()
    ]
    REPORT.add(
        f"poison on RPC subjects ({len(outcomes)} requests: {dict(codes)})",
        table(["subject", "replies"], rows),
    )
    unexpected = [(o.subject, o.poison, o.reply) for o in outcomes if not _acceptable(o, lenient)]
    assert unexpected == [], "\n".join(map(str, unexpected))


BODILESS = {"ping", "projector.status"}
"""RPCs that read no request body: any body gets their answer."""


def _acceptable(outcome: RpcOutcome, lenient: set[str]) -> bool:
    if outcome.reply.startswith("error "):
        return True
    if outcome.reply != "answered":
        return False  # no reply, not JSON, not an object
    name = outcome.subject.removeprefix("tavern.rpc.")
    if name.rsplit(".", 1)[-1] in BODILESS or name in BODILESS:
        return True
    return outcome.poison in OBJECT_POISONS and outcome.subject in lenient
