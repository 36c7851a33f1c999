"""A hostile-input corpus on every RPC subject of every service, through the real processes:
NUL characters, lone surrogates, bodies over the limit, deep nesting, wrong types and unknown
fields.

Every request is answered within the caller's deadline by an error of the common model
(`tavern_events.replies`): a known code, a message, `retryable`. Data that can never be stored
is `invalid` (never `unavailable`, which would make clients retry it forever), an oversize body
`too_large`, and an operation nobody serves `not_found`. A body over the bus's `max_payload`
(5 MB) never leaves the client: nats-py refuses it before sending. Every service stays up.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass

import pytest
from nats.errors import MaxPayloadError
from pydantic import ValidationError

from tavern_events import subjects
from tavern_events.replies import RETRYABLE, ErrorReply
from tavern_runtime.embedded import MAX_PAYLOAD
from tests.reliability.poison import NESTING, Poison, dumps
from tests.reliability.report import REPORT, table
from tests.reliability.stack import Stack
from tests.reliability.test_poison import BODILESS, rpc_subjects

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DEADLINE_S = 5.0
"""What a caller waits: the loop's tools wait 5 s for the ledger and the projector."""
FIVE_MB = 5 * 1024 * 1024
BIG = 1024 * 1024
BUS_REFUSED = "too_large (refused by the bus)"
"""A body over the bus's `max_payload`: nats-py raises `MaxPayloadError` before sending it."""

FIELDS = ("session_id", "scope_id", "query", "text", "character", "name", "id", "evidence_id")
"""Fields the RPCs read; a hostile string goes in each, so it reaches whichever one is read."""


def _everywhere(value: object) -> dict[str, object]:
    return dict.fromkeys(FIELDS, value)


def corpus() -> list[Poison]:
    """Each poison with the one code its reply must carry (`expect`), or `error` when any
    error of the model will do (wrong types, unknown fields: the handler's own checks)."""
    surrogate = b'{"session_id": "s1", "query": "\\ud800 tail", "text": "\\udfff", "id": "\\ud83d"}'
    return [
        Poison("NUL in every string field", dumps(_everywhere("a\x00b")), "invalid"),
        Poison("NUL alone", dumps(_everywhere("\x00")), "invalid"),
        Poison("raw NUL byte inside a string", b'{"query": "a\x00b"}', "invalid"),
        Poison("NUL in a key", dumps({"session_id": "s1", "ke\x00y": 1}), "invalid"),
        Poison("lone surrogates", surrogate, "invalid"),
        Poison("lone surrogate in a key", b'{"\\ud800": 1, "session_id": "s1"}', "invalid"),
        Poison("NUL deep in a list", dumps({"items": [{"text": ["ok", "x\x00"]}]}), "invalid"),
        Poison("just over 1 MiB", dumps({"session_id": "s1", "query": "q" * BIG}), "too_large"),
        Poison("5 MB body", dumps({"session_id": "s1", "query": "q" * FIVE_MB}), "too_large"),
        Poison("5 MB of garbage", b"{" * FIVE_MB, "too_large"),
        Poison("nesting 200 deep", b'{"query": ' + b"[" * 200 + b"]" * 200 + b"}", "invalid"),
        Poison(
            "nesting 100000 deep", b'{"q": ' + b"[" * NESTING + b"]" * NESTING + b"}", "invalid"
        ),
        Poison(
            "wrong types",
            dumps({"session_id": 42, "limit": "many", "query": {}, "fields": 7, "text": []}),
            "error",
        ),
        Poison("unknown fields", dumps({"zz_unknown": 1, "zz_more": {"a": [1]}}), "error"),
        Poison("not an object", b"[1, 2, 3]", "error"),
    ]


LENIENT_ALLOWED = {"wrong types", "unknown fields"}
"""Poisons an RPC with no required field may take as an empty request (it answers `{}` too)."""


@dataclass
class Outcome:
    subject: str
    poison: str
    expect: str
    code: str  # the error code, "answered", or what went wrong ("NO REPLY", "NOT THE MODEL")
    seconds: float


async def _ask(stack: Stack, subject: str, item: Poison) -> Outcome:
    assert stack.nc is not None
    started = time.monotonic()
    try:
        msg = await stack.nc.request(subject, item.data, timeout=DEADLINE_S)
    except MaxPayloadError:
        over = len(item.data) > MAX_PAYLOAD
        return Outcome(subject, item.name, item.expect, BUS_REFUSED if over else "NO REPLY", 0.0)
    except Exception as exc:
        return Outcome(subject, item.name, item.expect, f"NO REPLY ({type(exc).__name__})", 0.0)
    took = time.monotonic() - started
    body = json.loads(msg.data)
    if not isinstance(body, dict) or "error" not in body:
        return Outcome(subject, item.name, item.expect, "answered", took)
    try:
        error = ErrorReply.model_validate(body).error
    except ValidationError:
        return Outcome(subject, item.name, item.expect, f"NOT THE MODEL {body!r:.120}", took)
    return Outcome(subject, item.name, item.expect, error.code, took)


async def _settled_probe(stack: Stack, probe: Outcome, attempts: int = 20) -> Outcome:
    """A probe answered "slow down" (the services' rate limits, which earlier tests on the same
    stack drew on) tells nothing of how the subject reads `{}`: ask it again until it does."""
    for _ in range(attempts):
        if probe.code not in RETRYABLE:
            return probe
        await asyncio.sleep(0.2)
        probe = await _ask(stack, probe.subject, Poison("{}", b"{}", "error"))
    return probe


def _acceptable(o: Outcome, lenient: set[str]) -> bool:
    name = o.subject.removeprefix("tavern.rpc.")
    if o.code == "answered":
        bodiless = name in BODILESS or name.rsplit(".", 1)[-1] in BODILESS
        return (bodiless and o.expect == "error") or (
            o.poison in LENIENT_ALLOWED and o.subject in lenient
        )
    if o.code.startswith(("NO REPLY", "NOT THE MODEL")):
        return False
    if o.code == BUS_REFUSED:
        return o.expect == "too_large"
    return o.expect in ("error", o.code)


async def test_hostile_input_on_every_rpc_subject_is_answered_in_the_common_model(
    stack: Stack,
) -> None:
    poisons = corpus()
    outcomes: list[Outcome] = []
    lenient: set[str] = set()
    for service, names in rpc_subjects().items():
        probes = [
            await _settled_probe(stack, o)
            for o in await asyncio.gather(
                *(_ask(stack, s, Poison("{}", b"{}", "error")) for s in names)
            )
        ]
        lenient |= {o.subject for o in probes if o.code == "answered"}
        for item in poisons:
            if len(item.data) > BIG:  # one at a time (floods: tests/reliability/test_floods.py)
                outcomes += [await _ask(stack, s, item) for s in names]
            else:
                outcomes += await asyncio.gather(*(_ask(stack, s, item) for s in names))
        assert stack.nc is not None
        pong = await stack.nc.request(subjects.rpc(service, "ping"), b"", timeout=1.0)
        assert json.loads(pong.data)["ok"] is True, f"{service} stopped answering"

    by_poison: dict[str, Counter[str]] = {}
    for o in outcomes:
        by_poison.setdefault(o.poison, Counter())[o.code] += 1
    slowest = max(o.seconds for o in outcomes)
    REPORT.add(
        f"hostile RPC corpus ({len(outcomes)} requests on {len(lenient)} lenient and "
        f"{len({o.subject for o in outcomes})} subjects; slowest reply {slowest:.2f} s)",
        table(
            ["poison", "replies"],
            [
                [p, ", ".join(f"{k} x{n}" for k, n in sorted(c.items()))]
                for p, c in by_poison.items()
            ],
        ),
    )
    wrong = [
        (o.subject, o.poison, o.expect, o.code) for o in outcomes if not _acceptable(o, lenient)
    ]
    assert wrong == [], "\n".join(map(str, wrong))
    assert stack.unexpected_exits() == []


async def test_unknown_operations_get_not_found_instead_of_silence(stack: Stack) -> None:
    assert stack.nc is not None
    for service in ("ledger", "projector", "consolidator", "loop"):
        msg = await stack.nc.request(
            subjects.rpc(service, "no.such.operation"), b"{}", timeout=DEADLINE_S
        )
        error = ErrorReply.model_validate_json(msg.data).error
        assert (error.code, error.retryable) == ("not_found", False), service
        assert "ping" in (error.model_extra or {})["operations"]
    # A known operation is answered once, by its handler, not by the unknown-operation one.
    sub = await stack.nc.subscribe("_INBOX.rpc-errors-once")
    await stack.nc.publish(subjects.rpc("ledger", "ping"), b"", reply="_INBOX.rpc-errors-once")
    first = await sub.next_msg(timeout=DEADLINE_S)
    assert json.loads(first.data)["ok"] is True
    with pytest.raises(TimeoutError):
        await sub.next_msg(timeout=0.5)
    await sub.unsubscribe()
