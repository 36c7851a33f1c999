"""One turn is one trace: the services run as processes exporting to an OTLP/HTTP receiver on
loopback, one input goes in through the CLI's conversation, and the spans of the CLI, the loop,
the ledger, the projector and the consolidator all carry the input's trace id, each joined to
the span that caused it (docs/tracing.md)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import httpx
import pytest

from tavern_cli.conversation import Conversation, Renderer
from tavern_runtime import tracing
from tests.e2e.otlp import Received, Receiver
from tests.reliability.stack import WITH_GATEWAY, Stack
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SERVICES = ("loop", "ledger", "projector", "consolidator")
SESSION = "traced-1"
PRODUCER, CONSUMER, SERVER, CLIENT = 4, 5, 2, 3
"""OTLP's span kinds."""


@pytest.fixture
async def traced(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Stack, Receiver]]:
    """The stack exporting to a receiver (with the gateway when the test asks for it)."""
    receiver = Receiver()
    receiver.start()
    env = {"TAVERN_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    gateway = bool(getattr(request, "param", False))
    env |= {"TAVERN_GATEWAY_PORT": "0"} if gateway else {}
    stack = Stack(proxied=False, env=env, services=WITH_GATEWAY if gateway else SERVICES)
    try:
        await stack.start()
        yield stack, receiver
    except BaseException:
        print(stack.tails())
        raise
    finally:
        tracing.shutdown_tracing()
        await stack.close()
        stack.remove()
        receiver.stop()


async def _one_turn(stack: Stack) -> str:
    """Send one message as `tavern chat` does and wait for its turn's end; its input id."""
    assert stack.nc is not None
    chat = Conversation(stack.nc, SESSION, Renderer(io.StringIO()))
    await chat.open()
    try:
        input_id = await chat.send("My sister Ines works as a pediatric nurse in Porto")
        ended = await chat.wait_turn(timeout=60)
        assert ended.payload.outcome == "completed"
    finally:
        await chat.close()
    return input_id


def _by_name(spans: list[Received], name: str) -> list[Received]:
    return [s for s in spans if s.name == name]


async def test_one_turn_is_one_trace_across_every_service(
    traced: tuple[Stack, Receiver],
) -> None:
    stack, receiver = traced
    assert tracing.configure_tracing("cli", receiver.url)
    input_id = await _one_turn(stack)
    tracing.shutdown_tracing()  # the CLI's span is exported now

    (sent,) = [s for s in receiver.snapshot() if s.name == "cli.input"]
    assert sent.attributes["tavern.input_id"] == input_id
    wanted = {"tavern-cli", *(f"tavern-{s}" for s in SERVICES)}

    def whole() -> list[Received] | None:
        """The trace once every service is in it and the ledger has read all the turn."""
        spans = [s for s in receiver.snapshot() if s.trace_id == sent.trace_id]
        services = {s.service for s in spans}
        said, ended = _append_of(spans, "user/message"), _append_of(spans, "turn/end")
        complete = (
            said is not None
            and ended is not None
            and said.span_id in _handled(spans, "ledger.ingest")
            and ended.span_id in _handled(spans, "projector.project")
        )
        return spans if wanted <= services and complete else None

    spans = await eventually(whole, timeout=60, interval=0.2)
    by_id = {s.span_id: s for s in spans}

    # The turn continues the input's trace; the loop's spans sit inside the turn.
    (turn,) = _by_name(spans, "loop.turn")
    assert (turn.service, turn.parent_id) == ("tavern-loop", sent.span_id)
    assert sent.kind == PRODUCER
    for name in ("loop.claim", "loop.model_request", "loop.recall"):
        found = _by_name(spans, name)
        assert found, f"no {name} span"
        assert all(_within(s, turn, by_id) for s in found), name

    # The ledger serves the recall as a child of the loop's request.
    (asked,) = _by_name(spans, "loop.recall")
    (served,) = _by_name(spans, "ledger.recall")
    assert (asked.kind, served.kind) == (CLIENT, SERVER)
    assert served.parent_id == asked.span_id

    # Every append of the turn is in it, and the turn's first one records the claim.
    appends = _by_name(spans, "sessionlog.append")
    assert appends
    assert all(a.kind == PRODUCER and _within(a, turn, by_id) for a in appends)
    claimed = [a for a in appends if "turn/start" in str(a.attributes["tavern.event_types"])]
    assert len(claimed) == 1
    ends = [a for a in appends if "turn/end" in str(a.attributes["tavern.event_types"])]
    assert len(ends) == 1

    # Ingestion, projection and consolidation intake are consumers of those appends: each is
    # the child of one append of the turn and links to the others it handled.
    append_ids = {a.span_id for a in appends}
    for name, service in (
        ("ledger.ingest", "tavern-ledger"),
        ("projector.project", "tavern-projector"),
        ("consolidator.intake", "tavern-consolidator"),
    ):
        found = _by_name(spans, name)
        assert found, f"no {name} span"
        for consumer in found:
            assert (consumer.service, consumer.kind) == (service, CONSUMER)
            assert consumer.parent_id in append_ids, name
            assert all(link[1] in append_ids for link in consumer.links), name
    # The ledger ingested what the person said; the projector projected the turn to its end.
    said, ended = _append_of(spans, "user/message"), _append_of(spans, "turn/end")
    assert said is not None
    assert said.span_id in _handled(spans, "ledger.ingest")
    assert ended is not None
    assert ended.span_id in _handled(spans, "projector.project")

    # Nothing of the turn leaked into another trace.
    others = [s for s in receiver.snapshot() if s.trace_id != sent.trace_id]
    assert not [s for s in others if s.name in ("loop.turn", "loop.claim", "ledger.recall")]


def _append_of(spans: list[Received], event_type: str) -> Received | None:
    """The append that carried the turn's (first) event of `event_type`."""
    for span in _by_name(spans, "sessionlog.append"):
        if event_type in str(span.attributes.get("tavern.event_types", "")).split(","):
            return span
    return None


def _handled(spans: list[Received], name: str) -> set[str]:
    """The appends whose events the `name` spans processed (their parents and links)."""
    return {
        span_id
        for c in _by_name(spans, name)
        for span_id in (c.parent_id, *(link[1] for link in c.links))
    }


def _within(span: Received, ancestor: Received, by_id: dict[str, Received]) -> bool:
    """Whether `ancestor` is on `span`'s chain of parents."""
    seen = span
    while seen.parent_id and seen.parent_id in by_id:
        seen = by_id[seen.parent_id]
        if seen.span_id == ancestor.span_id:
            return True
    return False


@pytest.mark.parametrize("traced", [True], ids=["gateway"], indirect=True)
async def test_a_message_sent_through_the_web_app_starts_the_turns_trace(
    traced: tuple[Stack, Receiver],
) -> None:
    stack, receiver = traced
    async with httpx.AsyncClient(
        base_url=stack.gateway_url, timeout=30, follow_redirects=True
    ) as web:
        await web.get("/login")  # the CSRF cookie
        csrf = {"X-CSRF-Token": web.cookies.get("tavern_csrf") or ""}
        setup = {"name": "olga", "password": "a-long-enough-password"}
        assert (await web.post("/api/setup", json=setup, headers=csrf)).status_code == 200
        session_id = (await web.post("/api/sessions", json={}, headers=csrf)).json()["session_id"]

        async def sent() -> str | None:
            path = f"/api/sessions/{session_id}/messages"
            r = await web.post(path, json={"text": "I keep bees in Porto"}, headers=csrf)
            return str(r.json()["input_id"]) if r.status_code == 200 else None

        input_id = await eventually(sent, timeout=20, interval=0.3)

    def trace() -> list[Received] | None:
        spans = receiver.snapshot()
        inputs = [s for s in spans if s.attributes.get("tavern.input_id") == input_id]
        if not inputs:
            return None
        mine = [s for s in spans if s.trace_id == inputs[0].trace_id]
        said = _append_of(mine, "user/message")
        ingested = said is not None and said.span_id in _handled(mine, "ledger.ingest")
        return mine if ingested and _append_of(mine, "turn/end") is not None else None

    spans = await eventually(trace, timeout=60, interval=0.2)
    (published,) = _by_name(spans, "gateway.input")
    assert (published.service, published.kind) == ("tavern-gateway", PRODUCER)
    (turn,) = _by_name(spans, "loop.turn")
    assert turn.parent_id == published.span_id
    assert {s.service for s in spans} >= {"tavern-gateway", "tavern-loop", "tavern-ledger"}
